"""`ModuleModel.evaluated(fn)`: the subscripts and calls the model evaluated in a function, one pass
over its contexts, which `safe_shared.unsafe_writes` and the `DisjointIndex` rule read instead of
walking each function's tree.  The same writes as the walk of every node of the function, over every
fixture, example and a generated kernel-dense module."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from anodize.checker.engine import analyze_source
from anodize.checker.safe_shared import unsafe_writes, witness_rank
from anodize.language.walk import nodes_of

ROOT = Path(__file__).resolve().parents[2]


def _walked_unsafe_writes(model: object, fn: object) -> set[ast.AST]:
    """`unsafe_writes` as it was written before `evaluated`: every stored subscript of the tree."""
    out: set[ast.AST] = set()
    for target in nodes_of([fn.node], frozenset({ast.Subscript})):  # type: ignore[attr-defined]
        if not isinstance(target.ctx, ast.Store):  # type: ignore[attr-defined]
            continue
        base = model.values.get(target.value)  # type: ignore[attr-defined]
        ctx = model.ctx.get(target)  # type: ignore[attr-defined]
        if base is None or base.kind != "shared" or ctx is None or ctx.unsafe or ctx.fn is not fn:
            continue
        if not witness_rank(model, target):
            out.add(target)
    return out


def _sources(tmp: Path) -> list[tuple[str, str]]:
    files = sorted([*ROOT.glob("fixtures/*/*.py"), *ROOT.glob("examples/*.py")])
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from check_throughput import generate
    finally:
        sys.path.remove(str(ROOT / "bench"))
    generate(tmp, 600, lines_per_file=600)
    return [(f.read_text(), str(f)) for f in files + sorted(tmp.rglob("*.py"))]


def test_unsafe_writes_are_those_of_a_walk_of_every_node(tmp_path: Path) -> None:
    functions = writes = 0
    for source, path in _sources(tmp_path):
        model = analyze_source(source, path).model
        if model is None:
            continue
        for fn in model.functions.values():
            got = unsafe_writes(model, fn)
            assert len(got) == len(set(got))
            assert set(got) == _walked_unsafe_writes(model, fn), (path, fn.name)
            functions += 1
            writes += len(got)
        for fn in model.functions.values():  # every evaluated node is of its function's tree
            inside = {id(n) for n in ast.walk(fn.node)}
            assert all(id(n) in inside for n in model.evaluated(fn)), (path, fn.name)
    assert functions > 500 and writes > 10

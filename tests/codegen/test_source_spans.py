"""The typed model locates nodes in characters, as the checker does, also after non-ASCII text on a line."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

from anodize.language.syntax import Source, parse
from anodize.language import ir
from anodize.language.typer import build_ir

KERNEL = '''\
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


class Holder:
    @staticmethod
    @launch_contract(domain=1, block=256)
    @kernel
    def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in c:
            é = a[i]; c[i] = é + a[i]
'''


def test_codegen_spans_are_the_checkers_character_spans(tmp_path: Path) -> None:
    path = tmp_path / "nonascii_kernel.py"
    path.write_text(KERNEL, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("nonascii_kernel", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["nonascii_kernel"] = mod
    try:
        spec.loader.exec_module(mod)
        typed = build_ir(mod.Holder.k)
    finally:
        del sys.modules["nonascii_kernel"]
    ours = [e.span for e in _exprs(typed.body) if isinstance(e, ir.BinOp)]
    whole = Source(KERNEL, str(path))
    want = [whole.span(n) for n in ast.walk(parse(KERNEL)) if isinstance(n, ast.BinOp)]
    line = KERNEL.splitlines()[10]
    assert ours == want and len(ours) == 1
    # `é + a[i]` starts after the two-byte `é`: a character column, not a UTF-8 byte offset
    assert (ours[0].line, ours[0].col, ours[0].end_col) == (11, line.index("é +"), len(line))


def _exprs(node: object) -> list[object]:
    """Every IR node below `node` (dataclass fields, tuples)."""
    out: list[object] = []
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, tuple):
            todo.extend(n)
        elif hasattr(n, "__dataclass_fields__") and not isinstance(n, type):
            out.append(n)
            todo.extend(getattr(n, f) for f in n.__dataclass_fields__)  # type: ignore[attr-defined]
    return out

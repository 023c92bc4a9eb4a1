"""The checker's foundation on Python's `ast`: qualified names agree with libcst's
QualifiedNameProvider (the reference the checker was first built on, kept as a test-only
oracle), spans are in characters, the batched walk visits in source order, and the mypy
plugin loads without the runtime or NumPy."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from anodize.language.names import Names
from anodize.language.syntax import Source, parse
from anodize.language.walk import walk_batched

REPO = Path(__file__).resolve().parents[2]

SCOPING = '''\
import anodize as az
import anodize.thread as t
from anodize import DisjointSlice as DS, thread
from . import sibling
from .pkg.mod import k as kk
import math, os.path

x = 1

class C:
    y = 2
    z = y
    def m(self, q):
        return y, q, C

def f(az, n):
    global x
    x = 3
    d = [v for v in range(n) if v]
    g = lambda w: w + n
    if (m := n):
        pass
    return az, t.index_1d, DS, thread.tid_x, sibling.k, kk, math.sqrt, os.path.join, d, m, len

def h():
    def inner():
        nonlocal acc
        return acc
    acc = 1
    return inner, az.thread.index_1d
'''


TOO_DEEP_FOR_LIBCST = {"nesting_too_deep.py"}


def _sources() -> list[object]:
    """Every fixture and example, and SCOPING.  The default run takes the accepted fixtures,
    the examples, the host and fuzz fixtures, SCOPING and every third rejected fixture (they
    share their import forms); the other rejected fixtures run under `-m slow` (libcst's
    parse is the cost)."""
    files = sorted(REPO.glob("fixtures/**/*.py")) + sorted(REPO.glob("examples/*.py"))
    # code nested past what libcst's recursive parser takes (the checker reports the nesting
    # limit there, tests/reliability/test_bad_source.py): no oracle for these
    files = [p for p in files if p.name not in TOO_DEEP_FOR_LIBCST]
    out: list[object] = []
    rejected = 0
    for p in files:
        rel = str(p.relative_to(REPO))
        marks = []
        if rel.startswith("fixtures/reject/"):
            rejected += 1
            if rejected % 3 != 1:
                marks = [pytest.mark.slow]
        out.append(pytest.param(rel, p.read_text(encoding="utf-8"), marks=marks))
    return [*out, ("scoping", SCOPING)]


def _libcst_names(source: str) -> dict[tuple[int, int, int, int, str], set[str]]:
    """libcst's qualified names of every loaded name and attribute, by source range."""
    cst = pytest.importorskip("libcst")
    from libcst.metadata import (
        ExpressionContext,
        ExpressionContextProvider,
        MetadataWrapper,
        PositionProvider,
        QualifiedNameProvider,
    )

    w = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)  # (a fresh tree: no copy needed)
    ranges = w.resolve(PositionProvider)
    names = w.resolve(QualifiedNameProvider)
    ctx = w.resolve(ExpressionContextProvider)
    out = {}
    for node, qn in names.items():
        if not isinstance(node, (cst.Name, cst.Attribute)) or ctx.get(node) is not ExpressionContext.LOAD:
            continue
        r = ranges[node]
        qn = qn() if callable(qn) else qn
        out[(r.start.line, r.start.column, r.end.line, r.end.column, type(node).__name__)] = {q.name for q in qn}
    return out


@pytest.mark.parametrize("path,source", _sources(), ids=lambda v: v if len(v) < 60 else "src")
def test_qualified_names_match_libcst(path: str, source: str) -> None:
    want = _libcst_names(source)
    tree = parse(source)
    names = Names(tree, source)
    src = Source(source, path)
    checked = 0
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(node.ctx, ast.Load):
            continue
        s = src.span(node)
        key = (s.line, s.col, s.end_line, s.end_col, type(node).__name__)
        if key not in want or getattr(node, "_az_bundle", False):  # a bundle field's annotation, copied to its parameter
            continue  # libcst does not give this node names (e.g. an attribute of a call)
        assert set(names.qualnames(node)) == want[key], (key, ast.dump(node)[:80])
        checked += 1
    assert checked or "anodize" not in source


def test_scoping_rules() -> None:
    tree = parse(SCOPING)
    names = Names(tree, SCOPING)
    got = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            got.setdefault(ast.unparse(node), set()).update(names.qualnames(node))
    assert got["t.index_1d"] == {"anodize.thread.index_1d"}
    assert got["DS"] == {"anodize.DisjointSlice"}
    assert got["thread.tid_x"] == {"anodize.thread.tid_x"}
    assert got["sibling.k"] == {".sibling.k"}
    assert got["kk"] == {".pkg.mod.k"}
    assert got["os.path.join"] == {"os.path.join"}
    assert got["len"] == {"builtins.len"}
    # a parameter named `az` shadows the import inside `f`; `h` still sees the module's `az`
    assert "f.<locals>.az" in got["az"] and "anodize" in got["az"]
    assert got["az.thread.index_1d"] == {"anodize.thread.index_1d"}
    # `global x` makes `x` the module's; a class body does not enclose its methods
    assert got["y"] == {"C.y"}  # only the class body's own read resolves to the class attribute
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "f")
    assert names.function_locals(fn) == {"az", "n", "d", "g", "m"}


# functions whose text holds the scope words as parts of other words (`format`, `defaults`,
# `lambda_`, `classify`) or in comments and strings, beside real lambdas and `for` statements
FLAT_WORDS = """
import anodize as az
from anodize import Slice, f32, kernel, launch_contract, thread

@launch_contract(domain=1, block=256, requires=lambda a, c: len(a) == len(c))
@kernel
def k1(a: Slice[f32], c: Slice[f32]) -> None:
    i = thread.index_1d()  # before the loop, in this format
    for j in range(4):
        c[i] = a[i]

def k2(platform: int, lambda_: int) -> int:
    fmt = "format {}"
    return platform + lambda_

def k3(x: int) -> int:
    f = lambda y: y
    return [f(v) for v in range(x)][0]

def k4(defaults: int) -> int:
    classify = defaults
    return classify

def k5(n: int) -> int:
    t = 0
    for(i) in range(n):
        t += i
    return t
"""


def test_flat_function_shortcut_names_as_the_full_index() -> None:
    """`Names` finds a flat function's scopes from positions (its text's scope words counted:
    as substrings where they add up, else by a word search): each name reads as it does when
    every function is indexed (no source: no shortcut)."""
    tree = parse(FLAT_WORDS)
    fast, full = Names(tree, FLAT_WORDS), Names(tree)
    flat = {f.name: fast._flat_lambdas(f) is not None for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert flat == {"k1": True, "k2": True, "k3": False, "k4": True, "k5": True}
    seen = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)):
            assert fast.qualnames(node) == full.qualnames(node), ast.unparse(node)
            seen += 1
    assert seen > 40


def test_spans_are_in_characters() -> None:
    source = 'import anodize as az\n\n@az.kernel\ndef k(é: int, b: int) -> None:\n    s = "ünïcode"; t = b.real\n'
    tree = parse(source)
    src = Source(source, "m.py")
    fn = tree.body[1]
    assert isinstance(fn, ast.FunctionDef)
    assert src.name_span(fn) == src.point(4, 4, 1)
    assert src.decorator_span(fn.decorator_list[0]) == src.point(3, 0, 10)
    assert src.arg_name_span(fn.args.args[0]) == src.point(4, 6, 1)
    assert src.arg_name_span(fn.args.args[1]) == src.point(4, 14, 1)
    stmt = fn.body[1]
    assert isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Attribute)
    # `t = b.real` starts after a non-ASCII string: character columns, not UTF-8 bytes
    line = source.splitlines()[4]
    assert src.span(stmt).col == line.index("t =")
    assert src.attr_span(stmt.value) == src.point(5, line.index("real"), 4)
    assert src.code(stmt.value) == "b.real"


def test_walk_is_in_source_order_with_body_events() -> None:
    source = "@d1\n@d2(x)\nasync def f(a: A, b) -> R:\n    y = a\n    async for i in it:\n        pass\n"
    log: list[str] = []

    class V:
        def visit_Name(self, node: ast.Name) -> None:
            log.append(node.id)

        def visit_FunctionBody(self, node: ast.AST) -> None:
            log.append("<body>")

        def leave_FunctionBody(self, node: ast.AST) -> None:
            log.append("</body>")

        def visit_FunctionDef(self, node: ast.AST) -> None:  # async def reaches it too
            log.append("def")

        def visit_For(self, node: ast.AST) -> None:
            log.append("for")

    walk_batched(parse(source), [V()])
    assert log == ["def", "d1", "d2", "x", "A", "R", "<body>", "y", "a", "for", "i", "it", "</body>"]


def test_mypy_plugin_loads_without_runtime_or_numpy() -> None:
    code = (
        "import sys, anodize.checker.mypy_plugin\n"
        "bad = [m for m in ('numpy', 'anodize.runtime', 'libcst') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "import anodize\n"
        "assert anodize.LaunchConfig.__module__ == 'anodize.runtime.config'\n"
        "from anodize import device, Buffer\n"
        "assert 'numpy' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr

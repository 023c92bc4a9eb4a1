"""`anodize compile FILE:KERNEL` finds its kernel's slice without parsing the module whole
(anodize/language/module_slice.py `text_slice`): the module is cut at the lines that may start a
top-level statement and each piece is compiled on its own by CPython's parser.  The slice keeps
every line the tree's slice (`dependency_slice`) keeps, and a module that is not Python gives
None (the caller then parses it whole and reports the error)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "bench"))

from budgets import quick_and_full  # noqa: E402
from check_throughput import generate  # noqa: E402
from kernelgen import RandomChooser, gen_module  # noqa: E402

from anodize.language.module_slice import dependency_slice, text_slice  # noqa: E402
from anodize.language.syntax import parse, read_source  # noqa: E402


def _compare(src: str) -> tuple[int, int]:
    """Every top-level function of `src`: the text slice is None, or it holds the `def`'s line
    and keeps every line the tree's slice keeps (each kept line as it is in the source).
    Returns (functions the tree slices, functions the text slices too)."""
    try:
        tree = parse(src)
    except (SyntaxError, ValueError):  # not Python, or too deep: the caller parses it whole
        return 0, 0
    names = {s.name for s in tree.body if isinstance(s, ast.FunctionDef)}
    lines = src.splitlines()
    sliced = found = 0
    for name in sorted(names):
        fdef = next(s for s in reversed(tree.body) if isinstance(s, ast.FunctionDef) and s.name == name)
        want = dependency_slice(tree, src, fdef)
        got = text_slice(src, name)
        if want is None:
            continue
        sliced += 1
        if got is None:
            continue
        found += 1
        text, line = got
        assert line == fdef.lineno, name
        assert text.count("\n") == src.count("\n")
        for w, g, s in zip(want.splitlines(), text.splitlines(), lines):
            assert g in (s, ""), name
            if w and not w.lstrip().startswith("#"):  # (trailing comments go with a left-out function)
                assert g == w, (name, w)
    return sliced, found


def test_the_bench_module_slices_as_the_tree_does(tmp_path: Path) -> None:
    generate(tmp_path, 600, lines_per_file=600)
    src = next(tmp_path.rglob("*.py")).read_text()
    tree = parse(src)
    for name in ("helper_user_1", "vecadd_0", "put_1"):
        fdef = next(s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name)
        got = text_slice(src, name, 24)
        assert got == (dependency_slice(tree, src, fdef, 24), fdef.lineno)
    assert text_slice(src, "nonesuch") is None
    assert text_slice(src, "vecadd_0", 10_000) is None  # fewer functions than asked for


@pytest.mark.parametrize("modules", quick_and_full(30, 300))
def test_generated_modules(modules: int) -> None:
    sliced = found = 0
    for seed in range(9100, 9100 + modules):
        a, b = _compare(gen_module(RandomChooser(seed), outside=seed % 3 == 0))
        sliced, found = sliced + a, found + b
    assert found >= sliced * 9 // 10 and found > modules // 4


@pytest.mark.parametrize("stride", quick_and_full(5, 1))
def test_every_fixture_and_example(stride: int) -> None:
    sliced = found = 0
    for f in sorted([*ROOT.glob("fixtures/*/*.py"), *ROOT.glob("examples/*.py")])[::stride]:
        try:
            src = read_source(f)
            parse(src)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):  # not Python, or too deep
            continue
        a, b = _compare(src)
        sliced, found = sliced + a, found + b
    assert found >= sliced * 8 // 10 and found > 50 // stride


HEAD = '''"""A module docstring
with a line in column 0
"""
from anodize import DisjointSlice, Slice, f32, func, kernel, launch_contract, thread

'''

K = '''@launch_contract(domain=1, block=256,
requires=lambda a, c: len(a) == len(c))
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = h(a[i])

'''

H = '''@func
def h(x: f32) -> f32:
    return x * 2.0

'''

OTHER = '''def other(n: int) -> str:
    s = """
not code (
"""
    return s + str(n)

if True:
    Z = 1
else:
    Z = 2
try:
    W = (1,
2)
except Exception:
    W = 3

'''


def _kept_defs(text: str) -> set[str]:
    return {ln[4:].split("(")[0] for ln in text.splitlines() if ln.startswith("def ")}


def test_statements_over_column_0_lines() -> None:
    """Column-0 lines inside a docstring, a decorator's brackets, a string holding `def k` and a
    top-level `if`/`try` are joined to their statement; the slice keeps `k` and its helper."""
    src = HEAD + OTHER + H + K + OTHER.replace("other", "other2")
    got = text_slice(src, "k")
    assert got is not None
    text, line = got
    assert line == src.splitlines().index("def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:") + 1
    assert _kept_defs(text) == {"h", "k"} and "Z = 1" in text and "W = (1," in text


def test_a_def_in_a_string_is_not_taken_for_one() -> None:
    """A column-0 `def k` inside a top-level string is not guessed at (the tree decides); one
    inside a function's string is that function's text."""
    src = HEAD + H + OTHER + 'X = """\n' + K + '"""\n' + K
    assert text_slice(src, "k") is None
    src = HEAD + H + OTHER + "def f() -> str:\n    return '''\n" + K + "'''\n\n" + K
    got = text_slice(src, "k")
    assert got is not None and got[1] == len(src.splitlines()) - 4
    assert _kept_defs(got[0]) == {"f", "h", "k"}  # (`f`'s string names `h`)
    assert _compare(src) == (4, 4)


@pytest.mark.parametrize("bad", ["def broken(:\n", "x = (\n", "x = 0\n    y = 1\n", 'z = """\n', "else:\n    pass\n",
                                 "x = 1\x00\n", "return 1\nnonlocal q\n"])
def test_a_module_that_is_not_python_gives_none(bad: str) -> None:
    assert text_slice(HEAD + H + K + OTHER, "k") is not None
    assert text_slice(HEAD + H + bad + K + OTHER, "k") is None
    assert text_slice(bad + HEAD + H + K + OTHER, "k") is None

"""syntax.too_deep reads each node class's fields itself: the same node found as with
`ast.iter_child_nodes` (the walk it replaced), over deep expressions, statements and mixes."""

from __future__ import annotations

import ast

from anodize.language.syntax import _LEAVES, too_deep


def _reference(tree: ast.AST, limit: int) -> ast.AST | None:
    stack: list[tuple[ast.AST, int, ast.AST | None]] = [(tree, 0, None)]
    while stack:
        node, depth, top = stack.pop()
        if depth > limit:
            return top if top is not None else node
        line = getattr(node, "lineno", None)
        if line is not None and line == getattr(node, "end_lineno", None):
            width = (getattr(node, "end_col_offset", 0) or 0) - (getattr(node, "col_offset", 0) or 0)
            if 2 * width + 16 < limit - depth:
                continue
        if top is None and isinstance(node, ast.expr):
            top = node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _LEAVES):
                stack.append((child, depth + 1, top))
    return None


def test_too_deep_matches_iter_child_nodes() -> None:
    sources = [
        "x = " + "(" * 40 + "1" + ")" * 40,
        "x = " + "-" * 60 + "1\ny = [" + "[" * 30 + "]" * 31,
        "def f(a):\n" + "".join("    " * (d + 1) + f"if a > {d}:\n" for d in range(30)) + "    " * 31 + "pass\n",
        "f(" + ", ".join("g(" * 12 + "x" + ")" * 12 for _ in range(4)) + ")\nd = {k: " + "{1: " * 20 + "2" + "}" * 21,
        "a = " + "b if c else " * 25 + "d\nx = " + "not " * 3 + "y and z or w[1:2, ::3]",
    ]
    found = 0
    for src in sources:
        tree = ast.parse(src)
        for limit in (5, 10, 20, 40, 200):
            got, want = too_deep(tree, limit), _reference(tree, limit)
            assert got is want
            found += got is not None
    assert found >= 10  # deep chains found, at several limits

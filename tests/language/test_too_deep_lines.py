"""The nesting check with the module's text (syntax.py `too_deep(tree, source=...)`) skips a
subtree over several lines by the characters of its whole lines: it finds what the check
without the text finds -- the same deep node, or none -- for code nested over many lines
(an `elif` chain, nested `if`s, a sum or calls broken over lines), just under and over the
limit."""

from __future__ import annotations

import ast

import pytest

from anodize.language.syntax import NESTING_LIMIT, too_deep


def _elifs(n: int) -> str:
    return "if x == 0:\n    y = 0\n" + "".join(f"elif x == {k}:\n    y = {k}\n" for k in range(1, n))


def _ifs(n: int) -> str:
    return "".join(" " * k + f"if x > {k}:\n" for k in range(n)) + " " * n + "y = 1\n"


def _sum_lines(n: int) -> str:
    return "y = (a\n" + "".join("     + a\n" for _ in range(n)) + ")\n"


def _calls_lines(n: int) -> str:
    return "y = " + "f(\n" * n + "1" + ")" * n + "\n"


@pytest.mark.parametrize("make", [_elifs, _ifs, _sum_lines, _calls_lines])
def test_the_text_changes_no_answer(make) -> None:  # type: ignore[no-untyped-def]
    found = 0
    for n in (NESTING_LIMIT // 2 - 5, NESTING_LIMIT - 10, NESTING_LIMIT - 2, NESTING_LIMIT + 1, NESTING_LIMIT + 5):
        text = "def f(x, a):\n" + "".join("    " + ln + "\n" for ln in make(n).splitlines())
        if make is _ifs and n > 90:  # (Python's own limit: 100 nested blocks)
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:  # (the tokenizer's own limit: 200 open parentheses)
            continue
        plain, lined = too_deep(tree), too_deep(tree, source=text)
        assert plain is lined
        found += plain is not None
    assert found or make is _ifs


def test_a_short_multi_line_statement_is_not_entered() -> None:
    text = "def f(x, c):\n    if x:\n        c[0] = 1\n"
    tree = ast.parse(text)
    entered: list[str] = []
    import anodize.language.syntax as syntax

    real = syntax.child_nodes

    def spy(node: ast.AST) -> list[ast.AST]:
        entered.append(type(node).__name__)
        return real(node)

    syntax.child_nodes = spy  # type: ignore[assignment]
    try:
        assert too_deep(tree, source=text) is None
        with_text = list(entered)
        entered.clear()
        assert too_deep(tree) is None
    finally:
        syntax.child_nodes = real  # type: ignore[assignment]
    assert "If" in entered and "If" not in with_text

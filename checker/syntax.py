"""Parsing and source positions for the checker: Python's own `ast`, with character columns.

    tree = parse(source)                  # ast.Module; SyntaxError/ValueError as Python raises them
    src = Source(source, path)
    src.span(node)                        # Span(path, line, col, end_line, end_col), columns in characters
    src.name_span(fn_or_class)            # the name after `def` / `class`
    src.attr_span(attribute)              # the `attr` of `x.attr`
    src.decorator_span(expr)              # `@expr`, the `@` included
    src.code(node)                        # the node's source text

`ast` reports columns as UTF-8 byte offsets; `Source` turns them into character
offsets (the unit editors, rustc-style frames and the old libcst engine use).  Only
reported nodes ask for a span, so the conversion costs nothing on a clean module.
"""

from __future__ import annotations

import ast
import re

from .diagnostics import Span

__all__ = ["Source", "parse", "NEWLINE"]

# the line breaks Python's tokenizer counts
NEWLINE = re.compile(r"\r\n|\r|\n")
_DEF = re.compile(r"(?:async\s+)?(?:def|class)\s+")
_NAME_AFTER = re.compile(r"\s*(?:\\\r?\n\s*)*")


def parse(source: str) -> ast.Module:
    """`ast.parse` without the feature-version or type-comment extras."""
    return compile(source, "<anodize>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)  # type: ignore[no-any-return]


class Source:
    def __init__(self, source: str, path: str) -> None:
        self.text = source
        self.path = path
        self._lines: list[str] | None = None

    @property
    def lines(self) -> list[str]:
        """The source's lines without their line breaks; `lines[0]` is line 1."""
        if self._lines is None:
            self._lines = NEWLINE.split(self.text)
        return self._lines

    def line(self, lineno: int) -> str:
        lines = self.lines
        return lines[lineno - 1] if 0 < lineno <= len(lines) else ""

    def char_col(self, lineno: int, byte_col: int) -> int:
        text = self.line(lineno)
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> Span:
        line = getattr(node, "lineno", 1)
        end_line = getattr(node, "end_lineno", None) or line
        col = self.char_col(line, getattr(node, "col_offset", 0))
        end_col = getattr(node, "end_col_offset", None)
        ecol = self.char_col(end_line, end_col) if end_col is not None else col + 1
        return Span(self.path, line, col, end_line, ecol)

    def point(self, line: int, col: int, width: int) -> Span:
        return Span(self.path, line, col, line, col + width)

    def name_span(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> Span:
        """The name of a `def` or `class` (after its decorators and keyword)."""
        line = node.lineno
        text = self.line(line)
        col = self.char_col(line, node.col_offset)
        m = _DEF.match(text, col)
        if m is not None and text.startswith(node.name, m.end()):
            return self.point(line, m.end(), len(node.name))
        at = text.find(node.name, col)
        return self.point(line, at if at >= 0 else col, len(node.name))

    def attr_span(self, node: ast.Attribute) -> Span:
        """The attribute name of `x.attr` (the last token of the node)."""
        end_line = node.end_lineno or node.lineno
        end = self.char_col(end_line, node.end_col_offset or 0)
        return Span(self.path, end_line, max(end - len(node.attr), 0), end_line, end)

    def decorator_span(self, expr: ast.expr) -> Span:
        """`@expr`: the decorator expression with its `@`."""
        s = self.span(expr)
        text = self.line(s.line)
        at = text.rfind("@", 0, s.col + 1) if s.col < len(text) + 1 else -1
        if at >= 0 and not text[at + 1 : s.col].strip():
            return Span(s.path, s.line, at, s.end_line, s.end_col)
        return s

    def arg_name_span(self, node: ast.arg) -> Span:
        """A parameter's name (without its annotation)."""
        return self.point(node.lineno, self.char_col(node.lineno, node.col_offset), len(node.arg))

    def keyword_name_span(self, node: ast.keyword) -> Span:
        """`name` of `name=value` in a call (the whole `**x` for an unnamed keyword)."""
        if node.arg is None:
            return self.span(node)
        return self.point(node.lineno, self.char_col(node.lineno, node.col_offset), len(node.arg))

    def word_span(self, stmt: ast.AST, word: str) -> Span:
        """The first `word` (a whole identifier) at or after `stmt`'s start, on its lines."""
        line = getattr(stmt, "lineno", 1)
        end_line = getattr(stmt, "end_lineno", line) or line
        start = self.char_col(line, getattr(stmt, "col_offset", 0))
        pat = re.compile(r"(?<![\w.])" + re.escape(word) + r"(?!\w)")
        for ln in range(line, end_line + 1):
            m = pat.search(self.line(ln), start if ln == line else 0)
            if m is not None:
                return self.point(ln, m.start(), len(word))
        return self.span(stmt)

    def code(self, node: ast.AST) -> str:
        """The node's source text (lines joined with `\\n`)."""
        s = self.span(node)
        if s.line == s.end_line:
            return self.line(s.line)[s.col : s.end_col]
        parts = [self.line(s.line)[s.col :]]
        parts += [self.line(n) for n in range(s.line + 1, s.end_line)]
        parts.append(self.line(s.end_line)[: s.end_col])
        return "\n".join(parts)

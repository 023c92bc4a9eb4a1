"""Parsing and source positions for the checker: Python's own `ast`, with character columns.

    tree = parse(source)                  # ast.Module; SyntaxError/ValueError as Python raises them
    src = Source(source, path)
    src.span(node)                        # Span(path, line, col, end_line, end_col), columns in characters
    src.name_span(fn_or_class)            # the name after `def` / `class`
    src.attr_span(attribute)              # the `attr` of `x.attr`
    src.decorator_span(expr)              # `@expr`, the `@` included
    src.code(node)                        # the node's source text
    src.expr_span(node), src.quote(node)  # what messages point at and quote (own parentheses kept)

`ast` reports columns as UTF-8 byte offsets; `Source` turns them into character
offsets (the unit editors, rustc-style frames and the old libcst engine use).  Only
reported nodes ask for a span, so the conversion costs nothing on a clean module.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import gc
import io
import keyword
import os
import re
import stat
import threading
import tokenize
from collections.abc import Iterator
from itertools import accumulate, repeat
from operator import add

from anodize.language.diagnostics import Span
from anodize.language.walk import child_nodes

__all__ = ["Source", "collector_paused", "parse", "read_source", "NestingTooDeep", "NESTING_LIMIT", "in_source_order", "line_offsets", "NEWLINE"]

# the line breaks Python's tokenizer counts
NEWLINE = re.compile(r"\r\n|\r|\n")
_DEF = re.compile(r"(?:async\s+)?(?:def|class)\s+")
_IS = re.compile(r"\bis\b(?:\s+not\b)?")
_ELSE = re.compile(r"\belse\b")
_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)  # Python 3.12+
_FSTRING_END = getattr(tokenize, "FSTRING_END", -1)
_KEYWORDS = frozenset(keyword.kwlist) - {"True", "False", "None"}
_NAME_AFTER = re.compile(r"\s*(?:\\\r?\n\s*)*")


def read_source(path: str | os.PathLike[str]) -> str:
    """A Python file's text as Python reads it: decoded by its BOM or PEP 263 coding line
    (UTF-8 when it has neither; a BOM is dropped), with universal newlines, as `linecache`
    and the import system give it.  Opened without blocking, and only a regular file is read
    (a FIFO or a device is an OSError, never a hang).  Raises OSError, SyntaxError (an unknown
    or contradictory coding line) and UnicodeDecodeError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    finally:
        os.close(fd)
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return io.IncrementalNewlineDecoder(None, translate=True).decode(data.decode(encoding), final=True)


def line_offsets(text: str) -> list[int]:
    """Where each line of `text` starts (by the parser's line breaks), then `len(text)`:
    line n (1-based) is `text[offsets[n - 1] : offsets[n]]`, its line break included."""
    if "\r" in text:
        return [0, *(m.end() for m in NEWLINE.finditer(text)), len(text)]
    # only `\n` breaks lines: each line starts one past the end of the one before (without
    # the regular expression's tries of three breaks at each character)
    offsets = [0, *accumulate(map(add, map(len, text.split("\n")), repeat(1)))]
    offsets[-1] = len(text)  # (the last line has no break)
    return offsets


# How deep code may nest (statements and expressions together, counted in AST nodes from the
# module down) for anodize to read it: the checker, the typer and codegen walk trees
# recursively, and a 350-operator sum (which CPython compiles) would exhaust Python's stack.
# Deeper code is one located `az-unsupported` (docs/language.md, "Limits").
NESTING_LIMIT = 200
_new = object.__new__


class NestingTooDeep(ValueError):
    """Code nested deeper than NESTING_LIMIT: `node` is the outermost expression (or
    statement) of the deep chain."""

    def __init__(self, node: ast.AST, limit: int) -> None:
        super().__init__(f"code nested more than {limit} levels deep")
        self.node = node
        self.limit = limit


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, and on again when the last such
    block running on any thread leaves (unless the outermost found it off): for steps that
    build many objects and free none (what they free, reference counting frees), on which the
    collector's passes are pure cost -- a parse, a check, a compile (runtime/compile.py)."""
    global _paused_depth, _paused_resume
    with _paused_lock:
        if _paused_depth == 0:
            _paused_resume = gc.isenabled()
            gc.disable()
        _paused_depth += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused_depth -= 1
            if _paused_depth == 0 and _paused_resume:
                gc.enable()


_paused_lock = threading.Lock()
_paused_depth = 0  # `collector_paused` blocks running now, on any thread
_paused_resume = False  # whether the outermost found the collector on (and turns it back on)


def parse(source: str) -> ast.Module:
    """`ast.parse` without the feature-version or type-comment extras; NestingTooDeep (a
    ValueError) for code nested deeper than NESTING_LIMIT.  A module with `az.Bundle` classes
    gets its bundle parameters spread into their fields (bundles.py)."""
    with collector_paused():  # a node or more per token, none freed: the collector's passes over
        # them meanwhile double the parse's time (a 50,000-line module: 1.2 s, not 0.6 s)
        tree: ast.Module = compile(source, "<anodize>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    deep = too_deep(tree, source=source)
    if deep is not None:
        raise NestingTooDeep(deep, NESTING_LIMIT)
    if "Bundle" in source:
        from anodize.language.bundles import flatten

        flatten(tree)
    return tree


def too_deep(tree: ast.AST, limit: int = NESTING_LIMIT, source: str | None = None) -> ast.AST | None:
    """The outermost expression (else statement) of a chain of nodes deeper than `limit`, or
    None.  Iterative, and it skips every subtree on one line too short to nest that deep (a
    level of nesting takes at least one character), so it visits little more than the
    statements of a module.  With the module's `source` (the tree's text), a subtree over
    several lines is skipped alike by the characters of its whole lines (more than its own
    text: only ever too careful): an `if` and its two-line body, not their every child."""
    offsets = line_offsets(source) if source is not None else []
    n_lines = len(offsets) - 1
    stack: list[tuple[ast.AST, int, ast.AST | None]] = [(tree, 0, None)]
    pop, push = stack.pop, stack.append
    expr = ast.expr
    while stack:
        node, depth, top = pop()
        if depth > limit:
            return top if top is not None else node
        if top is None and isinstance(node, expr):
            top = node
        room = limit - depth - 1  # what a child may still nest
        below = depth + 1
        for child in child_nodes(node):  # (no contexts, no operators: leaves)
            # a child too short to nest that deep is not even pushed
            line = getattr(child, "lineno", None)  # (none: `arguments`, a `withitem`)
            if line is not None:
                try:
                    end = child.end_lineno  # type: ignore[attr-defined]
                    if line == end:
                        if 2 * (child.end_col_offset - child.col_offset) + 16 < room:  # type: ignore[attr-defined]
                            continue
                    elif 0 < line <= end <= n_lines and 2 * (offsets[end] - offsets[line - 1]) + 16 < room:
                        continue
                except TypeError:  # (a node built without an end)
                    pass
            push((child, below, top))
    return None


class Source:
    def __init__(self, source: str, path: str) -> None:
        self.text = source
        self.path = path
        self._lines: list[str] | None = None
        # byte columns are character columns (a plain attribute: a `cached_property` would
        # give up the instance's inline attribute values, read for each of the typer's spans)
        self.ascii = source.isascii()

    @property
    def lines(self) -> list[str]:
        """The source's lines without their line breaks; `lines[0]` is line 1."""
        if self._lines is None:
            text = self.text
            self._lines = text.split("\n") if "\r" not in text else NEWLINE.split(text)
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
        """`node`'s span.  In an ASCII source it is read from the node when first asked for
        (diagnostics.py `Span.__getattr__`): the typer makes one for every node it types, into
        the typed IR, and `anodize check` reads few of them (a node's four positions, read
        through its `__dict__`, cost more than the span)."""
        if self.ascii:
            sp = _new(Span)
            sp.__dict__["_az_at"] = (self, node)
            return sp
        return self.span_now(node)

    def span_now(self, node: ast.AST) -> Span:
        """`node`'s span, its fields read now."""
        if self.ascii:  # byte columns are character columns
            try:
                line, col, end_line, end_col = node.lineno, node.col_offset, node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
            except AttributeError:  # (a node built without a position)
                pass
            else:
                return Span(self.path, line, col, end_line or line, end_col if end_col is not None else col + 1)
        line = getattr(node, "lineno", 1)
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        if self.ascii:
            col = getattr(node, "col_offset", 0)
            return Span(self.path, line, col, end_line, end_col if end_col is not None else col + 1)
        col = self.char_col(line, getattr(node, "col_offset", 0))
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
        line, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if line is not None and line == end and getattr(node, "end_col_offset", None) is not None:
            text = self.line(line)
            if text.isascii():  # one ASCII line: the byte columns are the character columns
                return text[node.col_offset : node.end_col_offset]  # type: ignore[attr-defined]
        s = self.span(node)
        if s.line == s.end_line:
            return self.line(s.line)[s.col : s.end_col]
        parts = [self.line(s.line)[s.col :]]
        parts += [self.line(n) for n in range(s.line + 1, s.end_line)]
        parts.append(self.line(s.end_line)[: s.end_col])
        return "\n".join(parts)

    # -- what messages point at and quote ------------------------------------------------------
    def expr_span(self, node: ast.AST) -> Span:
        """`node`'s span, a parenthesized tuple and a generator expression without their own
        parentheses (`ast` counts them in; the reported range never did)."""
        s = self.span(node)
        if isinstance(node, ast.GeneratorExp) or (isinstance(node, ast.Tuple) and self.parenthesized(node)):
            return Span(s.path, s.line, s.col + 1, s.end_line, s.end_col - 1)
        return s

    def quote(self, node: ast.AST) -> str:
        """`node`'s source text with the parentheses around it that are its own (`(x)` in
        `return (x)`, not the call's in `f(x)`), as messages quote it."""
        s = self.span(node)
        text = self.line(s.line)
        if isinstance(node, ast.GeneratorExp) and _call_paren(text, s.col):
            return self.code(node).strip()[1:-1].strip()  # `f(x for x in y)`: the parentheses are the call's
        if s.line != s.end_line:
            return self.code(node).strip()
        col, end = s.col, s.end_col
        while True:
            i = col - 1
            while i >= 0 and text[i] in " \t":
                i -= 1
            j = end
            while j < len(text) and text[j] in " \t":
                j += 1
            if i < 0 or j >= len(text) or text[i] != "(" or text[j] != ")" or _call_paren(text, i):
                break
            col, end = i, j + 1
        return text[col:end].strip() if col != s.col else self.code(node).strip()

    def parenthesized(self, node: ast.Tuple) -> bool:
        """Do the parentheses at the start of `node` close at its end (`(a, b)`, not `(a), b`)?"""
        code = self.code(node)
        if not code.startswith("("):
            return False
        lines = code.split("\n")
        end = (len(lines), len(lines[-1]))
        depth = 0
        try:
            for tok in tokenize.generate_tokens(io.StringIO(code).readline):
                if tok.type == tokenize.OP and tok.string in "()[]{}":
                    depth += 1 if tok.string in "([{" else -1
                    if depth == 0:
                        return tok.end == end
        except (tokenize.TokenError, SyntaxError):
            pass
        return False

    def index_tuples(self, node: ast.Subscript) -> list[ast.Tuple]:
        """The tuples that are (part of) the index of `x[...]`: `x[(i, j)]`, `x[i, j]`, `x[(i, j), k]`."""
        sl = node.slice
        if not isinstance(sl, ast.Tuple):
            return []
        # `x[(i, j), k]` indexes with two elements, `(i, j)` one of them; `x[((i, j), k)]` with one tuple
        if any(isinstance(e, ast.Tuple) for e in sl.elts) and not self.parenthesized(sl):
            return [sl, *(e for e in sl.elts if isinstance(e, ast.Tuple))]
        return [sl]

    def string_pieces(self, node: ast.expr) -> list[tuple[Span, bool]]:
        """The literals an implicitly concatenated string is made of: (span, is an f-string)."""
        base = self.span(node)

        def at(row: int, col: int) -> tuple[int, int]:  # (row, col) in `"(" + code + ")"` -> the file's
            return (base.line, base.col + col - 1) if row == 1 else (base.line + row - 1, col)

        out: list[tuple[Span, bool]] = []
        depth = 0
        start = (0, 0)
        try:
            for tok in tokenize.generate_tokens(io.StringIO("(" + self.code(node) + ")").readline):
                if tok.type == tokenize.STRING and depth == 0:
                    prefix = tok.string[: len(tok.string) - len(tok.string.lstrip("rRbBuUfF"))]
                    out.append((Span(base.path, *at(*tok.start), *at(*tok.end)), "f" in prefix.lower()))
                elif tok.type == _FSTRING_START:
                    if depth == 0:
                        start = tok.start
                    depth += 1
                elif tok.type == _FSTRING_END:
                    depth -= 1
                    if depth == 0:
                        out.append((Span(base.path, *at(*start), *at(*tok.end)), True))
        except (tokenize.TokenError, SyntaxError):
            out = []
        return out or [(base, isinstance(node, ast.JoinedStr))]

    def op_span(self, left: ast.expr, right: ast.expr) -> Span:
        """The `is` / `is not` between two operands of a comparison."""
        a = self.span(left)
        b = self.span(right)
        for ln in range(a.end_line, b.line + 1):
            text = self.line(ln)
            start = a.end_col if ln == a.end_line else 0
            seg = text[start : b.col if ln == b.line else len(text)].split("#")[0]
            m = _IS.search(seg)
            if m is not None:
                return Span(a.path, ln, start + m.start(), ln, start + m.end())
        return Span(a.path, a.end_line, a.end_col, b.line, b.col)

    def else_span(self, body: list[ast.stmt], orelse: list[ast.stmt]) -> Span:
        """`else:` of a loop, through its last statement."""
        a = self.span(body[-1])
        first = self.span(orelse[0])
        last = self.span(orelse[-1])
        for ln in range(a.end_line, first.line + 1):
            text = self.line(ln)
            start = a.end_col if ln == a.end_line else 0
            m = _ELSE.search(text[start:].split("#")[0])
            if m is not None:
                return Span(a.path, ln, start + m.start(), last.end_line, last.end_col)
        return Span(a.path, first.line, first.col, last.end_line, last.end_col)

    def withitem_span(self, item: ast.withitem) -> Span:
        """`expr as name` of a `with` item."""
        a = self.span(item.context_expr)
        b = self.span(item.optional_vars) if item.optional_vars is not None else a
        return Span(a.path, a.line, a.col, b.end_line, b.end_col)


def _call_paren(text: str, i: int) -> bool:
    """Does the `(` at `text[i]` open a call's arguments?"""
    k = i - 1
    while k >= 0 and text[k] in " \t":
        k -= 1
    if k < 0:
        return False
    c = text[k]
    if c in ")]\"'":
        return True
    if not (c.isalnum() or c == "_"):
        return False
    w = k
    while w > 0 and (text[w - 1].isalnum() or text[w - 1] == "_"):
        w -= 1
    return text[w : k + 1] not in _KEYWORDS


def in_source_order(call: ast.Call) -> list[ast.expr | ast.keyword]:
    """A call's arguments, positional and keyword, in the order they are written."""
    if not call.keywords or not call.args:
        return [*call.args, *call.keywords]
    return sorted([*call.args, *call.keywords], key=lambda a: (a.lineno, a.col_offset))

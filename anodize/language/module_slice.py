"""One kernel's slice of its module: the module's source with every top-level function the
kernel does not depend on blanked out, line for line (every kept line, so every span, is
where it was).

Kept: every top-level statement that is not a function (imports, constants, records, ...), the
kernel, every top-level function named by what is kept (helpers, transitively), and every
function that names a kept helper (a helper's typings come from every kernel that calls it), to
a fixed point.  What a function "names" is every identifier in its text (code, strings and
comments alike): more than the names it uses, so a slice may keep a function it could leave out,
never the other way round.

The compile gate checks a kernel's slice (checker/kernel_slice.py), and `anodize compile
FILE:KERNEL` fronts only the slice (anodize/kernel.py `source_kernels`): `anodize check` of the
slice reports, inside the kernel and its helpers, what it reports there for the whole module
(tests/reliability/test_kernel_slice.py).  `dependency_slice` slices a parsed module;
`text_slice` finds the same slice (or a larger one) from the text, compiling the module piece
by piece without building its tree (tests/reliability/test_text_slice.py).
"""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from typing import Any

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NOT_LINES = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # line breaks to `str.splitlines`, not to Python
_IDENT = re.compile(r"[^\W\d]\w*")


def first_line(stmt: ast.stmt) -> int:
    """A statement's first line: its first decorator's for a decorated one."""
    decorators: list[ast.expr] = getattr(stmt, "decorator_list", [])
    return min([stmt.lineno, *(d.lineno for d in decorators)])


def dependency_slice(tree: ast.Module, source: str, fdef: ast.FunctionDef, min_functions: int = 0) -> str | None:
    """The slice of `source` (parsed as `tree`) for the top-level function `fdef` (see the
    module's doc), or None when the module is better checked whole: fewer than `min_functions`
    top-level functions, nothing to leave out, `fdef` not at the top level, or a left-out
    function shares a line with a kept statement (`def f(): ...; x = 1`)."""
    body = tree.body
    funcs = [s for s in body if isinstance(s, _FUNCS)]
    if len(funcs) < min_functions or not any(f is fdef for f in funcs) or any(c in source for c in _NOT_LINES):
        return None
    lines = source.splitlines(keepends=True)
    starts = [0]
    for text in lines:
        starts.append(starts[-1] + len(text))

    def names(stmt: ast.stmt) -> set[str]:
        lo = starts[min(first_line(stmt), len(lines)) - 1]
        hi = starts[min(stmt.end_lineno or stmt.lineno, len(lines))]
        return set(_IDENT.findall(source, lo, hi))

    named = [names(f) for f in funcs]
    wanted: set[str] = set()
    for s in body:
        if not isinstance(s, _FUNCS):
            wanted |= names(s)
    kernel = next(i for i, f in enumerate(funcs) if f is fdef)
    keep = _kept([f.name for f in funcs], named, wanted, kernel)
    dropped = [f for i, f in enumerate(funcs) if i not in keep]
    if not dropped:
        return None
    dropped_ids = {id(f) for f in dropped}
    kept_lines: set[int] = set()
    for s in body:
        if id(s) not in dropped_ids:
            kept_lines.update(range(first_line(s), (s.end_lineno or s.lineno) + 1))
    for f in dropped:
        first, last = first_line(f), f.end_lineno or f.lineno
        if first in kept_lines or last in kept_lines:
            return None
        for ln in range(first, last + 1):
            lines[ln - 1] = "\n" if lines[ln - 1].endswith("\n") else ""
    return "".join(lines)


def _kept(fnames: list[str], named: list[set[str]], wanted: set[str], kernel: int) -> set[int]:
    """The indices of the functions kept (the fixed point of the module's doc): the kernel's,
    those named by what is kept, those that name a kept helper.  `wanted` holds the names of
    every statement that is not a function (it grows)."""
    keep = {kernel}
    wanted |= named[kernel]
    helpers: set[str] = set()  # kept functions other than the kernel
    changed = True
    while changed:
        changed = False
        for i, fname in enumerate(fnames):
            if i in keep:
                continue
            # named by what is kept (a helper it calls), or names a kept helper (a caller of it:
            # its typings of the helper count)
            if fname in wanted or not named[i].isdisjoint(helpers):
                keep.add(i)
                if fname != fnames[kernel]:
                    helpers.add(fname)
                wanted |= named[i]
                changed = True
    return keep


# A line that may start a top-level statement: code in column 0, neither a decorated
# statement's later line nor the continuation of a compound one.
_START = re.compile(r"^(?![\s#)\]}]|(?:else|elif|except|finally)\b)", re.M)
_DEF_OR_CLASS = re.compile(r"^(?:(async[ \t]+)?def|class)[ \t]+([^\W\d]\w*)", re.M)
_MAX_MERGE = 16  # pieces one statement may span (a string or brackets over column-0 lines)


# CPython's symbol-table builder (the C module behind `symtable`, whose Python wrapper costs a
# fifth more a call in its cache of tables): it parses a chunk without building `ast` objects.
_SYMTABLE: Any = importlib.import_module("_symtable")


def _valid(chunk: str) -> Any:
    """The chunk's top symbol-table entry when it is Python on its own (read by CPython's
    parser and symbol table, without building its `ast` objects: ~60% of `ast.parse`'s time),
    else None.  The caller silences the parser's warnings (the slice's own parse gives them)."""
    try:
        return _SYMTABLE.symtable(chunk, "<anodize>", "exec")
    except Exception:  # SyntaxError, ValueError (null bytes), the parser's limits
        return None


def text_slice(source: str, name: str, min_functions: int = 0) -> tuple[str, int] | None:
    """The slice of `source` for its last top-level `def name` (the module's doc) and that
    `def`'s line, found without building the module's tree: what `anodize compile FILE:KERNEL`
    reads when only one kernel of a large module is wanted.  None when this cheap reading
    cannot say (the caller then parses the module whole: `dependency_slice`).

    The module is cut at the lines that may start a top-level statement (`_START`) into
    pieces, and every piece is compiled on its own by CPython (`_valid`): a piece that does
    not compile is joined to the next (a column-0 line inside a string or brackets), up to
    `_MAX_MERGE` pieces, else None.  A piece that compiles on its own starts and ends where
    the whole module's statements do, so every piece is a run of whole top-level statements
    and the module is Python exactly when every piece is (a syntax error anywhere gives None,
    and the caller reports it).  Only CPython's parser runs over the pieces left out:
    `syntax.parse`'s nesting limit is enforced on the slice, which is all anodize reads.

    A piece is a function when it starts with a `def` (after its decorators) that its symbol
    table confirms; every other piece counts as a statement that is not a
    function and is kept, with its names (so a slice may keep more than `dependency_slice`,
    never less).  Left-out pieces are blanked whole, trailing comments included."""
    if not source or any(c in source for c in _NOT_LINES) or "\r" in source:
        return None
    cuts = [0]
    after_decorator = False
    for m in _START.finditer(source):
        at = m.start()
        if at and at < len(source) and not after_decorator:
            cuts.append(at)
        after_decorator = source.startswith("@", at)
    cuts.append(len(source))
    pieces: list[tuple[int, int, Any]] = []  # (start, end, its symbol table)
    i = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while i < len(cuts) - 1:
            for j in range(i + 1, min(i + 1 + _MAX_MERGE, len(cuts))):
                table = _valid(source[cuts[i]:cuts[j]])
                if table is not None:
                    pieces.append((cuts[i], cuts[j], table))
                    i = j
                    break
            else:
                return None
    own_def = re.compile(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(name)}\b", re.M)
    fnames: list[str] = []
    named: list[set[str]] = []
    spans: list[tuple[int, int, int]] = []  # a function's piece: start, end, its def's offset
    wanted: set[str] = set()
    kernel = -1
    for lo, hi, table in pieces:
        idents = set(_IDENT.findall(source, lo, hi))
        may_def = source[lo] in "@ad"  # (`async def`, `def`, decorators)
        d = _DEF_OR_CLASS.search(source, lo, hi) if may_def else None
        if d is not None and d.group(0).startswith(("def", "async")) and (d.start() == lo or source[lo] == "@"):
            line = source.count("\n", lo, d.start()) + 1
            if any(c.type == _SYMTABLE.TYPE_FUNCTION and c.name == d.group(2) and c.lineno == line for c in table.children):
                if d.group(2) == name and d.group(1) is None:
                    kernel = len(fnames)
                fnames.append(d.group(2))
                named.append(idents)
                spans.append((lo, hi, d.start()))
                continue
        if name in idents and own_def.search(source, lo, hi):  # (one this reading did not
            return None  # confirm, perhaps in a string: the tree decides)
        wanted |= idents
    if kernel < 0 or len(fnames) < min_functions:
        return None
    keep = _kept(fnames, named, wanted, kernel)
    if len(keep) == len(fnames):
        return None
    out: list[str] = []
    at = 0
    for k, (lo, hi, _) in enumerate(spans):
        if k not in keep:
            out += [source[at:lo], "\n" * source.count("\n", lo, hi)]
            at = hi
    out.append(source[at:])
    return "".join(out), source.count("\n", 0, spans[kernel][2]) + 1

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
(tests/reliability/test_kernel_slice.py).
"""

from __future__ import annotations

import ast
import re

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

    named = {id(f): names(f) for f in funcs}
    keep: set[int] = {id(fdef)}
    wanted = set(named[id(fdef)])
    for s in body:
        if not isinstance(s, _FUNCS):
            wanted |= names(s)
    helpers: set[str] = set()  # kept functions other than the kernel
    changed = True
    while changed:
        changed = False
        for f in funcs:
            if id(f) in keep:
                continue
            # named by what is kept (a helper it calls), or names a kept helper (a caller of it:
            # its typings of the helper count)
            if f.name in wanted or not named[id(f)].isdisjoint(helpers):
                keep.add(id(f))
                if f.name != fdef.name:
                    helpers.add(f.name)
                wanted |= named[id(f)]
                changed = True
    dropped = [f for f in funcs if id(f) not in keep]
    if not dropped:
        return None
    kept_lines: set[int] = set()
    for s in body:
        if not (isinstance(s, _FUNCS) and id(s) not in keep):
            kept_lines.update(range(first_line(s), (s.end_lineno or s.lineno) + 1))
    for f in dropped:
        first, last = first_line(f), f.end_lineno or f.lineno
        if first in kept_lines or last in kept_lines:
            return None
        for ln in range(first, last + 1):
            lines[ln - 1] = "\n" if lines[ln - 1].endswith("\n") else ""
    return "".join(lines)

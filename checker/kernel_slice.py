"""The compile gate of one kernel checks what that kernel depends on, not the whole module
(one kernel of a 50,000-line module of thousands of kernels took 41 s when the gate checked it all).

`kernel_slice(front, fdef)` is the module's source with every top-level function the kernel does
not depend on blanked out, line for line (every kept line, so every span, is where it was).
Kept: every top-level statement that is not a function (imports, constants, records, ...), the
kernel, every top-level function named by what is kept (helpers, transitively), and every
function that names a kept helper (a helper's typings come from every kernel that calls it:
`typed_ints.views_of`), to a fixed point.  `anodize check` of the slice reports, inside the
kernel and its helpers, what it reports there for the whole module: the gate's errors
(`api.kernel_errors`) are the same (tools/agreement.py, tests/test_kernel_slice.py).

A module of fewer than `SLICE_FROM` top-level functions is checked whole (the slice would save
little there, and one analysis serves all its kernels).
"""

from __future__ import annotations

import ast
from collections import OrderedDict
from typing import Any

from .engine import Analysis, Project, analyze_source

SLICE_FROM = 24
"""Top-level functions from which a module's kernels are checked as slices."""

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SLICES: OrderedDict[tuple[int, int], tuple[Any, tuple[Analysis, ast.FunctionDef] | None]] = OrderedDict()
_SLICES_KEEP = 32
_NOT_LINES = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # line breaks to `str.splitlines`, not to Python


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", [])
    return min([stmt.lineno] + [d.lineno for d in decorators])


def slice_analysis(front: Any, fdef: ast.FunctionDef) -> tuple[Analysis, ast.FunctionDef] | None:
    """The analysis of `fdef`'s slice of its module and the kernel's `def` in it, or None when
    the module is checked whole (`kernel_slice`).  Kept for the last `_SLICES_KEEP` kernels."""
    key = (id(front), id(fdef))
    hit = _SLICES.get(key)
    if hit is not None and hit[0] is front:
        _SLICES.move_to_end(key)
        return hit[1]
    text = kernel_slice(front, fdef)
    out = None
    if text is not None:
        analysis = analyze_source(text, front.path, Project())
        mine = analysis.model.front.find(fdef.name, fdef.lineno) if analysis.model is not None else None
        out = (analysis, mine) if mine is not None else None
    _SLICES[key] = (front, out)
    while len(_SLICES) > _SLICES_KEEP:
        _SLICES.popitem(last=False)
    return out


def kernel_slice(front: Any, fdef: ast.FunctionDef) -> str | None:
    """The slice of `front`'s source for `fdef` (see the module's doc), or None when the module
    is checked whole: too few functions, nothing to leave out, or a left-out function shares
    a line with a kept statement (`def f(): ...; x = 1`)."""
    body = front.tree.body
    funcs = [s for s in body if isinstance(s, _FUNCS)]
    if len(funcs) < SLICE_FROM or fdef not in funcs or any(c in front.source for c in _NOT_LINES):
        return None
    names = {id(f): _names(f) for f in funcs}
    keep: set[int] = {id(fdef)}
    wanted = set(names[id(fdef)])
    for s in body:
        if not isinstance(s, _FUNCS):
            wanted |= _names(s)
    kept_names = {fdef.name}
    changed = True
    while changed:
        changed = False
        for f in funcs:
            if id(f) in keep:
                continue
            # named by what is kept (a helper it calls), or names a kept function (a caller of a
            # kept helper: its typings of the helper count)
            if f.name in wanted or names[id(f)] & (kept_names - {fdef.name}):
                keep.add(id(f))
                kept_names.add(f.name)
                wanted |= names[id(f)]
                changed = True
    dropped = [f for f in funcs if id(f) not in keep]
    if not dropped:
        return None
    lines = front.source.splitlines(keepends=True)
    kept_lines: set[int] = set()
    for s in body:
        if not (isinstance(s, _FUNCS) and id(s) not in keep):
            kept_lines.update(range(_first_line(s), (s.end_lineno or s.lineno) + 1))
    for f in dropped:
        first, last = _first_line(f), f.end_lineno or f.lineno
        if any(ln in kept_lines for ln in (first, last)):
            return None
        for ln in range(first, last + 1):
            text = lines[ln - 1]
            lines[ln - 1] = "\n" if text.endswith("\n") else ""
    return "".join(lines)

"""The compile gate of one kernel checks what that kernel depends on, not the whole module
(one kernel of a 50,000-line module of thousands of kernels took 41 s when the gate checked it all).

`kernel_slice(front, fdef)` is the module's source with every top-level function the kernel does
not depend on blanked out, line for line (anodize/language/module_slice.py says what is kept).
`anodize check` of the slice reports, inside the kernel and its helpers, what it reports there
for the whole module: the gate's errors (`api.kernel_errors`) are the same (tools/agreement.py,
tests/reliability/test_kernel_slice.py).

A module of fewer than `SLICE_FROM` top-level functions is checked whole (the slice would save
little there, and one analysis serves all its kernels).
"""

from __future__ import annotations

import ast
from collections import OrderedDict
from typing import Any

from anodize.language.module_slice import dependency_slice

from .engine import Analysis, Project, analyze_source

SLICE_FROM = 24
"""Top-level functions from which a module's kernels are checked as slices."""

_SLICES: OrderedDict[tuple[int, int], tuple[Any, tuple[Analysis, ast.FunctionDef] | None]] = OrderedDict()
_SLICES_KEEP = 32


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
    """The slice of `front`'s source for `fdef`, or None when the module is checked whole (too
    few functions, nothing to leave out, or a left-out function shares a line with a kept
    statement: `module_slice.dependency_slice`)."""
    return dependency_slice(front.tree, front.source, fdef, SLICE_FROM)

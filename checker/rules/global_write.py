"""Forbids a kernel or helper writing state outside its arguments."""

from __future__ import annotations

import ast

from anodize.language import messages
from .base import DeviceBodyRule


class GlobalWrite(DeviceBodyRule):
    """Forbids a kernel or helper writing state outside its arguments."""

    CODE = "az-global-write"
    ORDER = 80
    VALID = [
        """
SCALE = 2.0

@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    c[i] = a[i] * SCALE
""",
    ]
    INVALID = [
        """
import numpy as np
TABLE = np.zeros(4)
COUNT = 0

@kernel
def k(c: DisjointSlice[f32]) -> None:
    global COUNT  # E: az-global-write
    COUNT = 1  # E: az-global-write
    TABLE[0] = 1.0  # E: az-global-write
""",
    ]

    def _decl(self, node: ast.Global | ast.Nonlocal) -> None:
        if self.active:
            kw = "global" if isinstance(node, ast.Global) else "nonlocal"
            names = ", ".join(f"`{n}`" for n in node.names)
            self.report(messages.global_write(self.span(node), "declares-writable-from-kernel", kw=kw, names=names))

    visit_Global = visit_Nonlocal = _decl

    def _target(self, t: ast.expr) -> None:
        fn = self.fn
        if isinstance(t, ast.Name):
            if t.id in fn.globals_declared:  # type: ignore[union-attr]
                self.report(messages.global_write(self.span(t), "write-module-global", name=t.id))
        elif isinstance(t, (ast.Subscript, ast.Attribute)):
            base = self.model.values.get(t.value)
            if base is not None and base.kind == "global":
                what = "item" if isinstance(t, ast.Subscript) else "attribute"
                self.report(messages.global_write(self.span(t), "write-captured-object", what=what, value=self.model.src.quote(t.value)))
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._target(e.value if isinstance(e, ast.Starred) else e)

    def visit_Assign(self, node: ast.Assign) -> None:
        if self.active and self.fn is not None:
            for t in node.targets:
                self._target(t)

    def visit_AugAssign(self, node: ast.AugAssign | ast.AnnAssign) -> None:
        if self.active and self.fn is not None:
            self._target(node.target)

    visit_AnnAssign = visit_AugAssign

    def visit_Delete(self, node: ast.Delete) -> None:
        if self.active and self.fn is not None:
            for t in node.targets:
                self._target(t)

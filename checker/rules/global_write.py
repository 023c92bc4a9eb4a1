"""Forbids a kernel or helper writing state outside its arguments."""

from __future__ import annotations

import libcst as cst

from .. import messages
from .base import DeviceBodyRule


class GlobalWrite(DeviceBodyRule):
    """Forbids a kernel or helper writing state outside its arguments."""

    CODE = "az-global-write"
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

    def _decl(self, node: cst.Global | cst.Nonlocal) -> None:
        if self.active:
            kw = "global" if isinstance(node, cst.Global) else "nonlocal"
            names = ", ".join(f"`{n.name.value}`" for n in node.names)
            self.report(messages.global_write(self.span(node), f"`{kw}` declares {names} writable from a kernel"))

    visit_Global = visit_Nonlocal = _decl

    def _target(self, t: cst.BaseExpression) -> None:
        if not self.active or self.fn is None:
            return
        if isinstance(t, cst.Name) and t.value in self.fn.globals_declared:
            self.report(messages.global_write(self.span(t), f"write to module global `{t.value}`"))
        elif isinstance(t, (cst.Subscript, cst.Attribute)):
            base = self.model.values.get(t.value)
            if base is not None and base.kind == "global":
                what = "item" if isinstance(t, cst.Subscript) else "attribute"
                self.report(messages.global_write(self.span(t), f"{what} write on captured object `{self.model.code(t.value)}`"))
        elif isinstance(t, (cst.Tuple, cst.List)):
            for e in t.elements:
                self._target(e.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._target(t.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)

    def visit_Del(self, node: cst.Del) -> None:
        self._target(node.target)

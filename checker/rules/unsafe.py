"""Forbids unsafe-tier operations outside `with az.unsafe():`."""

from __future__ import annotations

import ast

from anodize.language import messages
from .base import Rule

_UNSAFE_KINDS = {"rawid", "warp", "shared", "barrier", "write_unchecked"}


class Unsafe(Rule):
    """Forbids unsafe-tier operations outside `with az.unsafe():`."""

    CODE = "az-unsafe"
    VALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        s = az.shared.array(256, f32)
        t = thread.tid_x()
        s[t] = a[i]
        az.syncthreads()
        c.write_unchecked(i.get(), s[255 - t])
""",
    ]
    INVALID = [
        """
@kernel
def k(c: DisjointSlice[f32]) -> None:
    t = thread.tid_x()  # E: az-unsafe
    az.syncthreads()  # E: az-unsafe
    c.write_unchecked(t, 1.0)  # E: az-unsafe
    with az.unsafe():
        s = az.shared.array(32, f32)
    s[0] = 1.0  # E: az-unsafe
""",
    ]

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.model.callees.get(node)
        ctx = self.model.ctx.get(node)
        if callee is None or ctx is None or ctx.unsafe:
            return
        if callee.kind in _UNSAFE_KINDS:
            name = self.model.src.quote(node.func)
            self.report(messages.unsafe_op(self.span(node), name, call=True))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        ctx = self.model.ctx.get(node)
        base = self.model.values.get(node.value)
        if ctx is None or ctx.unsafe or base is None or base.kind != "shared":
            return
        self.report(messages.unsafe_op(self.span(node), self.model.src.quote(node), shared=True))

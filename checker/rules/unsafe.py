"""Forbids unsafe-tier operations outside `with az.unsafe():`.

Shared arrays (`az.shared.array`, `dynamic_array`, `atomic_array`) and `az.syncthreads()`
are safe: the phase discipline that keeps them race-free outside `unsafe` is
az-shared-race's (checker/safe_shared.py)."""

from __future__ import annotations

import ast

from anodize.language import messages
from .base import Rule



class Unsafe(Rule):
    """Forbids unsafe-tier operations outside `with az.unsafe():`."""

    CODE = "az-unsafe"
    ORDER = 90
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
    az.syncthreads()
    c.write_unchecked(t, 1.0)  # E: az-unsafe
    b = thread.block_idx_x()  # E: az-unsafe
""",
    ]

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.model.callees.get(node)
        ctx = self.model.ctx.get(node)
        if callee is None or ctx is None or ctx.unsafe:
            return
        if callee.decl is not None and callee.decl.unsafe:  # `warp.*`, `thread.tid_x()`, `s.write_unchecked(...)`
            name = self.model.src.quote(node.func)
            self.report(messages.unsafe_op(self.span(node), name, call=True))

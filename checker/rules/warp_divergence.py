"""Forbids a full-warp operation under lane-dependent control flow or without whole warps."""

from __future__ import annotations

import ast

from anodize.language import messages
from anodize.language.diagnostics import Span
from ..kernel_values import FunctionInfo
from .base import Rule, divergence_reason


class WarpDivergence(Rule):
    """Forbids a full-warp operation under lane-dependent control flow or without whole warps."""

    CODE = "az-warp-divergence"
    ORDER = 110
    VALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32], n: i32) -> None:
    i = thread.index_1d()
    v = a[i] if i in a else 0.0
    with az.unsafe():
        t = thread.tid_x()
        warp = t // 32
        if warp == 0:
            v += az.warp.shfl_down(v, 16)
        if t >> 5 < 4 and thread.block_idx_x() > 0:
            v += az.warp.shfl_xor(v, 1)
        if n > 2:
            v = az.warp.shfl_idx(v, 0)
        for r in range(n):
            v += az.warp.shfl_down(v, 1)
        if az.warp.any(v > 0.0):
            v = az.warp.shfl_up(v, 1)
        if thread.lane_id() == 0:
            v = v * 2.0
    if i in c:
        c[i] = v
""",
        """
@launch_contract(domain=2, block=(32, 8))
@kernel
def k(c: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    with az.unsafe():
        v = f32(thread.tid_x())
        if thread.tid_y() % 2 == 0:
            v = az.warp.shfl_down(v, 1)
    if ij in c:
        c[ij] = v
""",
    ]
    INVALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    v = a[i] if i in a else 0.0
    with az.unsafe():
        if thread.lane_id() < 16:
            v += az.warp.shfl_down(v, 16)  # E: az-warp-divergence
        if thread.tid_x() % 32 == 0:
            v = az.warp.shfl_idx(v, 0)  # E: az-warp-divergence
        if v > 0.0:
            b = az.warp.ballot(True)  # E: az-warp-divergence
    if i not in c:
        return
    with az.unsafe():
        v = az.warp.shfl_xor(v, 1)  # E: az-warp-divergence
    c[i] = v
""",
        """
@launch_contract(domain=1, block=48)
@kernel
def k(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        v = az.warp.shfl_down(f32(1.0), 1)  # E: az-warp-divergence
        if thread.tid_x() // 32 == 0:
            v = az.warp.shfl_down(v, 1)  # E: az-warp-divergence
    if i in c:
        c[i] = v
""",
    ]

    def visit_Call(self, node: ast.Call) -> None:
        m = self.model
        ctx = m.warp_ops.get(node)
        if ctx is not None:
            what = f"`{m.code(node.func)}`"
        else:
            ctx = m.helper_warp_calls.get(node)
            if ctx is None:
                return
            what = f"a warp operation inside `{m.code(node.func)}`"
        if ctx.lane_divergent is not None:
            self.report(messages.warp_divergence(self.span(node), what, self.span(ctx.lane_divergent), divergence_reason(ctx.lane_divergent, lanes=True)))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        fn = self.model.by_node.get(node)
        if fn is None or fn.kind != "kernel" or fn.warp_op is None:
            return
        block = fn.contract.block if fn.contract is not None else None
        if block is not None:
            threads = 1
            for b in block:
                threads *= b
            if threads % 32 == 0:
                return
        op = fn.warp_op
        callee = self.model.callees.get(op)
        what = f"`{self.model.code(op.func)}`"
        if callee is not None and callee.kind == "helper":
            what = f"a warp operation inside `{self.model.code(op.func)}`"
        self.report(messages.warp_block(self.span(op), what, fn.name, block, self._decl(fn), has_contract=fn.contract is not None))

    def _decl(self, fn: FunctionInfo) -> Span:
        c = fn.contract
        if c is None:
            return self.model.src.name_span(fn.node)
        if "block" in c.args:
            return self.span(c.args["block"])
        return self.model.src.decorator_span(c.decorator)

"""Forbids a barrier reachable under thread-dependent control flow."""

from __future__ import annotations

import ast

from anodize.language import messages
from .base import Rule, divergence_reason


class BarrierDivergence(Rule):
    """Forbids a barrier reachable under thread-dependent control flow."""

    CODE = "az-barrier-divergence"
    ORDER = 100
    VALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32], n: i32) -> None:
    i = thread.index_1d()
    with az.unsafe():
        s = az.shared.array(256, f32)
        t = thread.tid_x()
        s[t] = a[i] if i in a else 0.0
        az.syncthreads()
        for k in range(n):
            az.syncthreads()
        if thread.block_idx_x() == 0:
            az.syncthreads()
        stride = 128
        while stride > 0:
            if t < stride:
                s[t] += s[t + stride]
            az.syncthreads()
            stride = stride // 2
    if i in c:
        c[i] = 1.0
""",
        # a helper's block-uniform result
        """
@func
def rounds() -> i32:
    return 2

@launch_contract(domain=1, block=256)
@kernel
def k(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        if rounds() > 1:
            az.syncthreads()
    if i in c:
        c[i] = 1.0
""",
    ]
    INVALID = [
        # a helper's result returned under thread-dependent control differs between threads
        """
@func
def inside(a: Slice[f32]) -> i32:
    i = thread.index_1d()
    if i in a:
        return 1
    return 0

@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        if inside(a) == 1:
            az.syncthreads()  # E: az-barrier-divergence
    if i in c:
        c[i] = 1.0
""",
        """
@kernel
def k(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        if thread.tid_x() == 0:
            az.syncthreads()  # E: az-barrier-divergence
    if i not in c:
        return
    with az.unsafe():
        az.syncthreads()  # E: az-barrier-divergence
""",
        """
@kernel
def k(a: Slice[i32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    n = a[i]
    flag = 0
    if n > 3:
        flag = 1
    with az.unsafe():
        for j in range(n):
            az.syncthreads()  # E: az-barrier-divergence
        if flag == 1:
            az.syncthreads()  # E: az-barrier-divergence
""",
    ]

    def visit_Call(self, node: ast.Call) -> None:
        m = self.model
        ctx = m.barriers.get(node)
        if ctx is not None:
            callee = m.callees[node]
            if ctx.divergent is not None and callee.kind == "barrier":
                grid = callee.decl is not None and callee.decl.tag == ("barrier", "grid")  # az.grid.sync()
                self.report(
                    messages.barrier_divergence(
                        self.span(node), "barrier-divergent-grid-sync" if grid else "barrier-divergent-syncthreads",
                        self.span(ctx.divergent), divergence_reason(ctx.divergent, lanes=False)
                    )
                )
            elif ctx.divergent is not None:  # a block collective ends with a barrier
                self.report(
                    messages.barrier_divergence(
                        self.span(node), "barrier-divergent-collective", self.span(ctx.divergent), divergence_reason(ctx.divergent, lanes=False),
                        callee=m.code(node.func),
                    )
                )
            return
        ctx = m.helper_barrier_calls.get(node)
        if ctx is None or ctx.divergent is None:
            return
        self.report(
            messages.barrier_divergence(
                self.span(node), "barrier-divergent-helper", self.span(ctx.divergent), divergence_reason(ctx.divergent, lanes=False),
                callee=m.code(node.func),
            )
        )

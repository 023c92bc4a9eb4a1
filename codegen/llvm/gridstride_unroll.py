"""Grid-stride loops that are not elementwise (a reduction `acc += x[i]`, a histogram's
`bins.add(data[i] & 255, 1)`): the same mapping, unrolled by UNROLL on the GPU.

Thread `t` of `T` still visits `i, i + T, i + 2T, ...` in that order, so every result
(a float sum's rounding included) is the scalar loop's.  While `i + (UNROLL - 1) * T`
is below `len(c)`, the body is lowered UNROLL times in a row, for `i`, `i + T`, ...,
so the loads of the UNROLL iterations are independent and the scheduler issues them
together (several loads in flight per thread instead of one: the difference between
a latency-bound and a bandwidth-bound reduction); the scalar loop takes the rest.

Only small straight bodies are unrolled: no `break`/`continue`/`return`, no nested
loop, barrier, helper call, collective or warp operation (`unrollable`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as llir

from anodize.language import ir

from .types import I64T

if TYPE_CHECKING:
    from .lower import Lowerer

UNROLL = 4
_MAX_STMTS = 8


def unrollable(s: ir.GridStride) -> bool:
    stmts = ir.walk_stmts(s.body)
    if len(stmts) > _MAX_STMTS:
        return False
    for st in stmts:
        if not isinstance(st, (ir.Assign, ir.Write, ir.SharedWrite, ir.ExprStmt, ir.If)):
            return False
        if isinstance(st, ir.Assign) and st.name == s.var:
            return False
        for e in _exprs(st):
            if not _plain(e):
                return False
    return True


def _exprs(st: ir.Stmt) -> list[ir.Expr]:
    if isinstance(st, ir.Assign):
        return [st.value]
    if isinstance(st, ir.Write):
        return [st.value, *st.index]
    if isinstance(st, ir.SharedWrite):
        return [st.value, *st.index]
    if isinstance(st, ir.ExprStmt):
        return [st.value]
    if isinstance(st, ir.If):
        return [st.cond]
    return []


def _plain(e: ir.Expr) -> bool:
    """No call, collective or warp operation anywhere in `e`."""
    if isinstance(e, (ir.Call, ir.Collective, ir.WarpOp)):
        return False
    for v in vars(e).values():
        if isinstance(v, tuple):
            if not all(_plain(x) for x in v if isinstance(x, _EXPR_TYPES)):
                return False
        elif isinstance(v, _EXPR_TYPES) and not _plain(v):
            return False
    return True


_EXPR_TYPES = tuple(t for t in ir.Expr.__args__)  # type: ignore[attr-defined]


def lower_unrolled(lw: Lowerer, s: ir.GridStride, first: llir.Value, stride: llir.Value) -> llir.Value:
    """The unrolled part of the loop from `first`; returns the index the scalar loop resumes at."""
    b = lw.b
    slot, _ = lw.frame.vars[s.var]
    n = lw.frame.slices[s.slice.name].dims[0]
    pre = b.block
    head = lw.fn.append_basic_block("gsu.cond")
    body = lw.fn.append_basic_block("gsu.body")
    end = lw.fn.append_basic_block("gsu.end")
    span = b.mul(stride, llir.Constant(I64T, UNROLL - 1), flags=("nuw",))
    step = b.mul(stride, llir.Constant(I64T, UNROLL), flags=("nuw",))
    b.branch(head)

    b.position_at_end(head)
    cur = b.phi(I64T, name="gsu.i")
    cur.add_incoming(first, pre)
    # `cur + span < n` as `span < n - cur` under `cur < n`: no wrap even for a poisoned first
    # index (a kernel without a contract, launched with the wrong rank, starts at 2**64 - 1)
    inside = b.icmp_unsigned("<", cur, n)
    room = b.icmp_unsigned("<", span, b.sub(n, cur))
    b.cbranch(b.and_(inside, room), body, end)

    b.position_at_end(body)
    checks = lw.checks  # the copies are the scalar loop's checks again: counted once, there
    i = cur
    for k in range(UNROLL):  # i <= cur + span < n < 2**62, stride < 2**41: no wrap below
        b.store(i, slot)
        lw.stmts(s.body)
        if k + 1 < UNROLL:
            i = lw.b.add(i, stride, flags=("nuw",))
    nxt = lw.b.add(cur, step, flags=("nuw",))
    cur.add_incoming(nxt, lw.b.block)
    lw.b.branch(head)

    lw.checks = checks
    b.position_at_end(end)
    return cur

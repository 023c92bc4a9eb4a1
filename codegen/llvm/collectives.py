"""Lowering of the safe collectives and of the block witness (called from lower.py).

Built from the target's own primitives, so the GPU (NVVM `shfl.sync`, `barrier0`, a
`.shared` global) and the threaded CPU backend (host-thread shuffles, barriers and the
block's shared buffer) run the same algorithm and get the same bits:

* `warp.reduce`: a butterfly (`shfl_xor` 16, 8, 4, 2, 1), then lane 0's value to every
  lane (`shfl_idx 0`), so the result is bit-identical on the warp's lanes.
* `block.reduce`: the warp's result; lane 0 of each warp stores it in the compiler's
  scratch slot `warp`; barrier; every thread combines slots 0..nwarps-1 in order (the same
  bits everywhere); barrier.
* `block.scan`: an inclusive warp scan (`shfl_up` 1..16); lane 31 stores the warp's total;
  barrier; each thread combines the totals of the warps before its own; barrier.
  Exclusive: the inclusive value of the previous lane (`shfl_up 1`), the identity of `op`
  on thread 0.
* `block.broadcast`: thread `src` stores; barrier; every thread loads; barrier.

On the GPU (`Target.collective_one_barrier`) the closing barrier goes: the scratch has two
halves, and each thread counts the block collectives it has run (a local the compiler keeps
in a register; every thread runs the same sequence, since a collective under thread-dependent
control is az-barrier-divergence), so collective n uses half n % 2.  Collective n + 1 writes
the other half, and collective n + 2, which writes this half again, does so only after
passing collective n + 1's barrier, which every thread reaches only after its reads of
collective n: so no write of the scratch races with a read.  The collective still counts as
one barrier for the user's shared memory (the phase discipline): its one barrier separates
everything before it from everything after it.  The CPU backends keep the closing barrier
(their region splitter counts on it).

Threads are numbered linearly (x fastest): warp = linear >> 5, lane = linear & 31 (the
hardware's warps; the contract's block is a multiple of 32).  Bools travel as i32.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir as llir

from anodize.language import ir
from anodize.language.collectives import SCRATCH_TY
from anodize.language.types import I32, ScalarTy
from anodize.language.vocab import BLOCK_COLLECTIVES, COLLECTIVE_SCRATCH, COLLECTIVE_SCRATCH_SLOTS

if TYPE_CHECKING:
    from .lower import Lowerer

I1 = llir.IntType(1)
I32T = llir.IntType(32)
I64T = llir.IntType(64)


def lower_collective(lw: Lowerer, e: ir.Collective) -> llir.Value:
    b = lw.b
    v = lw.expr(e.value)
    ty = e.ty
    if ty.is_bool:  # carried as an i32 0/1: "and"/"or" are then bitwise
        v, ty = b.zext(v, I32T), I32
    if e.kind == "warp.reduce":
        r = _warp_reduce(lw, e, v, ty)
    else:
        scratch = lw.shared_gv.get(COLLECTIVE_SCRATCH)
        if scratch is None:
            scratch = lw.shared_gv[COLLECTIVE_SCRATCH] = lw.t.shared_global(lw, COLLECTIVE_SCRATCH, SCRATCH_TY, e.span)
        linear = _linear(lw)
        warp = b.lshr(linear, llir.Constant(I32T, 5))
        lane = b.and_(linear, llir.Constant(I32T, 31))
        nwarps = e.threads // 32
        assert e.kind in BLOCK_COLLECTIVES
        count = _count(lw)
        half = None
        if count is not None:  # this collective's half of the scratch: COLLECTIVE_SCRATCH_SLOTS * (n % 2)
            n = b.load(count, typ=I32T)
            half = b.mul(b.and_(n, llir.Constant(I32T, 1)), llir.Constant(I32T, COLLECTIVE_SCRATCH_SLOTS))
            b.store(b.add(n, llir.Constant(I32T, 1)), count)
            scratch = b.gep(scratch, [b.zext(half, I64T)], inbounds=True, source_etype=I64T)
        if e.kind == "block.reduce":
            r = _block_reduce(lw, e, v, ty, scratch, warp, lane, nwarps)
        elif e.kind == "block.scan":
            r = _block_scan(lw, e, v, ty, scratch, warp, lane, nwarps)
        else:
            r = _broadcast(lw, e, v, ty, scratch, linear)
        if count is None:
            lw.t.barrier(lw, e.span)  # the collective ends with a barrier: its scratch is free again
    if e.ty.is_bool:
        r = b.trunc(r, I1)
    return r


def _count(lw: Lowerer) -> llir.Value | None:
    """The kernel's count of block collectives run so far (an i32 local, 0 at entry; helpers are
    lowered inline, so one count serves the whole kernel), or None where the target keeps the
    closing barrier."""
    if not getattr(lw.t, "collective_one_barrier", False):
        return None
    slot = lw.collective_count
    if slot is None:
        slot = lw.collective_count = lw.alloca(I32T, "__az_collectives_run")
    return slot


def _linear(lw: Lowerer) -> llir.Value:
    b, t = lw.b, lw.t
    x, y, z = (t.sreg(lw, "tid", a) for a in "xyz")
    nx, ny = t.sreg(lw, "ntid", "x"), t.sreg(lw, "ntid", "y")
    return b.add(x, b.mul(nx, b.add(y, b.mul(ny, z))))


def _combine(lw: Lowerer, op: str, a: llir.Value, c: llir.Value, ty: ScalarTy) -> llir.Value:
    b = lw.b
    if ty.is_float:
        if op == "sum":
            return b.fadd(a, c)
        return lw.t.float_minmax(lw, op, a, c)
    if op == "sum":
        return b.add(a, c)
    if op == "and":
        return b.and_(a, c)
    if op == "or":
        return b.or_(a, c)
    lt = (b.icmp_signed if ty.signed else b.icmp_unsigned)("<", a, c)
    return b.select(lt, a, c) if op == "min" else b.select(lt, c, a)


def _identity(op: str, ty: ScalarTy) -> llir.Constant:
    t = a_type(ty)
    if ty.is_float:
        return llir.Constant(t, {"sum": 0.0, "max": float("-inf"), "min": float("inf")}[op])
    bits = ty.bits
    if op in ("sum", "or"):
        return llir.Constant(t, 0)
    if op == "and":
        return llir.Constant(t, -1)  # all ones
    if op == "max":
        return llir.Constant(t, -(1 << (bits - 1)) if ty.signed else 0)
    return llir.Constant(t, ((1 << (bits - 1)) - 1) if ty.signed else -1)  # min


def a_type(ty: ScalarTy) -> llir.Type:
    if ty.is_float:
        return llir.FloatType() if ty.bits == 32 else llir.DoubleType()
    return llir.IntType(ty.bits)


def _shfl(lw: Lowerer, mode: str, v: llir.Value, k: int, ty: ScalarTy, e: ir.Collective) -> llir.Value:
    return lw.t.warp(lw, mode, [v, llir.Constant(I32T, k)], ty, e.span)


def _warp_reduce(lw: Lowerer, e: ir.Collective, v: llir.Value, ty: ScalarTy) -> llir.Value:
    for d in (16, 8, 4, 2, 1):
        v = _combine(lw, e.op, v, _shfl(lw, "shfl_xor", v, d, ty, e), ty)
    return _shfl(lw, "shfl_idx", v, 0, ty, e)  # lane 0's bits on every lane


def _slot(lw: Lowerer, scratch: llir.Value, index: llir.Value) -> llir.Value:
    return lw.b.gep(scratch, [lw.b.zext(index, I64T)], inbounds=True, source_etype=I64T)


def _store_if(lw: Lowerer, cond: llir.Value, scratch: llir.Value, index: llir.Value, v: llir.Value) -> None:
    b = lw.b
    with b.if_then(cond):
        b.store(v, _slot(lw, scratch, index), align=8)


def _load(lw: Lowerer, scratch: llir.Value, w: int, ty: ScalarTy) -> llir.Value:
    p = lw.b.gep(scratch, [llir.Constant(I64T, w)], inbounds=True, source_etype=I64T)
    return lw.b.load(p, typ=a_type(ty), align=8)


def _block_reduce(lw: Lowerer, e: ir.Collective, v: llir.Value, ty: ScalarTy, scratch: llir.Value,
                  warp: llir.Value, lane: llir.Value, nwarps: int) -> llir.Value:
    b = lw.b
    r = _warp_reduce(lw, e, v, ty)
    _store_if(lw, b.icmp_unsigned("==", lane, llir.Constant(I32T, 0)), scratch, warp, r)
    lw.t.barrier(lw, e.span)
    acc = _load(lw, scratch, 0, ty)
    for w in range(1, nwarps):  # in warp order: the same bits on every thread
        acc = _combine(lw, e.op, acc, _load(lw, scratch, w, ty), ty)
    return acc


def _block_scan(lw: Lowerer, e: ir.Collective, v: llir.Value, ty: ScalarTy, scratch: llir.Value,
                warp: llir.Value, lane: llir.Value, nwarps: int) -> llir.Value:
    b = lw.b
    x = v
    for d in (1, 2, 4, 8, 16):  # inclusive scan within the warp
        y = _shfl(lw, "shfl_up", x, d, ty, e)
        x = b.select(b.icmp_unsigned(">=", lane, llir.Constant(I32T, d)), _combine(lw, e.op, y, x, ty), x)
    _store_if(lw, b.icmp_unsigned("==", lane, llir.Constant(I32T, 31)), scratch, warp, x)
    lw.t.barrier(lw, e.span)
    # the combined totals of the warps before this one (meaningful when warp > 0)
    prefix = _load(lw, scratch, 0, ty)
    for w in range(1, nwarps - 1):
        before = b.icmp_unsigned("<", llir.Constant(I32T, w), warp)
        prefix = b.select(before, _combine(lw, e.op, prefix, _load(lw, scratch, w, ty), ty), prefix)
    first_warp = b.icmp_unsigned("==", warp, llir.Constant(I32T, 0))
    if e.inclusive:
        return b.select(first_warp, x, _combine(lw, e.op, prefix, x, ty))
    prev = _shfl(lw, "shfl_up", x, 1, ty, e)  # the previous lane's inclusive value
    first_lane = b.icmp_unsigned("==", lane, llir.Constant(I32T, 0))
    in_first = b.select(first_lane, _identity(e.op, ty), prev)
    in_later = b.select(first_lane, prefix, _combine(lw, e.op, prefix, prev, ty))
    return b.select(first_warp, in_first, in_later)


def _broadcast(lw: Lowerer, e: ir.Collective, v: llir.Value, ty: ScalarTy, scratch: llir.Value,
               linear: llir.Value) -> llir.Value:
    b = lw.b
    _store_if(lw, b.icmp_unsigned("==", linear, llir.Constant(I32T, e.src)), scratch, llir.Constant(I32T, 0), v)
    lw.t.barrier(lw, e.span)
    return _load(lw, scratch, 0, ty)


def lower_block_witness(lw: Lowerer, e: ir.MakeWitness) -> llir.Value:
    """This block's x index (i64); for a kernel without a contract (`site` >= 0) the launch
    must be 1-D with blocks of 1-D (a fault and a poison index otherwise: fail closed)."""
    b = lw.b
    v = lw.sreg64("ctaid", "x")
    if e.site < 0:
        return v
    ok, dims = lw.expressions.launch_dims_ok(1)
    with b.if_then(b.not_(ok), likely=False):
        lw.fault(e.site, dims, llir.Constant(I64T, 1))
    return b.select(ok, v, llir.Constant(I64T, -1))

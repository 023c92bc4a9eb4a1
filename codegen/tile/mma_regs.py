"""A tensor-core matmul whose A operand is in registers (`tile.matmul(p.astype(f16), v_tile, acc)`,
the layout plan's register operand: language/tile_plan.py), on mma.sync m16n8k16; or whose A is
resident in shared memory across its loop (codegen/tile/prefetch.py), read with ldmatrix -- or,
on sm_90, both on wgmma (codegen/tile/attn_wgmma.py: A's registers or the resident tile's descriptors).

A is an (M, K) register tile in the accumulator layout over a (warps, 1) grid
(codegen/tile/layout.py): a thread's registers of two neighbouring n8 blocks `2 kk` and
`2 kk + 1` of row block `mi` are exactly its A fragment of k-step `kk` (FlashAttention-2's
register reuse of P): a0 = (row g, cols 2t, 2t+1) = registers q 0, 1 of block 2 kk; a1 = row
g + 8, q 2, 3; a2, a3 the same of block 2 kk + 1.  B (K x N, or N x K read transposed) is
staged whole in the compiler's dynamic shared buffer (one stage: cp.async where rows are 16-byte
aligned, predicated 2-byte loads else; rows and columns outside the slice read zero, as the
generic lowering's loads do), then each warp reads all N columns of each k-step with ldmatrix.
No K clamping: A's registers cover the whole K; B's rows past the slice are zeros.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import llvmlite.ir as llir

from anodize.language.types import I64 as I64T

from ..tensorcore import inline_ptx as P
from ..tensorcore.common import shared_buffer
from ..tensorcore.inline_ptx import I32, I64, c32, c64
from .attn_wgmma import descriptor, emit_register_a
from .mma_ir import MmaOperandIR
from .staging import _Operand, _rowmajor, whole_tile

if TYPE_CHECKING:
    from ..llvm.lower import Lowerer

__all__ = ["copy_first", "lower_register_a"]

LIMIT = 2**31 - 4096  # (mma.py's: the routines index with 32 bits)
I16 = llir.IntType(16)
HALF = llir.HalfType()


def packs_as_vector() -> bool:
    """Two halves packed as a `<2 x half>` (so LLVM rounds a pair of f32 with one
    `cvt.rn.f16x2.f32`) instead of two 16-bit patterns shifted and or-ed together.  The b32 is
    bit for bit the same; on by default since the H100 checked it (session 15),
    `ANODIZE_TILE_F16X2=0` is the way back."""
    return os.environ.get("ANODIZE_TILE_F16X2", "") != "0"


def ldsm_xor() -> bool:
    """`ANODIZE_TILE_LDSM_XOR` (on unless `=0`): each lane's ldmatrix addresses as one base a tile plus an
    immediate, with the swizzle's k-step XOR inside the instruction's asm (`inline_ptx.ldsm_kstep`,
    the recognised attention form's addressing) where the tile's rows are 8 or more 16-byte chunks,
    instead of one offset register a (k-step, column pair) that LLVM hoists out of the loop and
    keeps live across it (64 of them for K and V at d128).  On by default since the H100 measured it
    (session 14, bench/RESULTS.md: by-ops attention d64 1.442 -> 1.348 ms)."""
    return os.environ.get("ANODIZE_TILE_LDSM_XOR", "1") != "0"


def copy_first() -> bool:
    """`ANODIZE_TILE_COPY_FIRST=1` (with ANODIZE_TILE_ONE_WAIT): the loop's first matmul issues every
    matmul's next tile right after its wait and barrier, before its mma (the recognised attention
    form's order), so the copies have a whole iteration to land instead of what follows the first
    mma; the other slots were last read an iteration ago, before that barrier.  Off until a GPU run
    has measured it (ptxas keeps the loop free of spills at d64/d128 over 4 warps but for the exp2
    spelling at d128)."""
    return os.environ.get("ANODIZE_TILE_COPY_FIRST", "") == "1"


def _lane_base(b: llir.IRBuilder, base: llir.Value, row: llir.Value, chunk: llir.Value, cpr: int) -> llir.Value:
    """The k-step-0 address of a lane reading `row` (its low 3 bits the swizzle's: the other terms
    of the rows it reads are multiples of 8) at logical chunk `chunk` < 2 of a swizzled tile at
    `base` (128-byte aligned) with `cpr` >= 8 chunks a row: the XOR of `ldsm_kstep` then only
    touches the chunk's bits 5-6 (staging._rowmajor's layout, gemm._swizzle with one row a line)."""
    return b.add(base, b.add(b.mul(row, c32(cpr * 16)), b.shl(b.xor(chunk, b.and_(row, c32(7))), c32(4))))


def _pack(b: llir.IRBuilder, lo: llir.Value, hi: llir.Value) -> llir.Value:
    """Two 16-bit floats as one b32 (lo in the low half)."""
    if packs_as_vector():
        vec = llir.VectorType(HALF, 2)
        v = b.insert_element(llir.Constant(vec, llir.Undefined), _as(b, lo, HALF), c32(0))
        return b.bitcast(b.insert_element(v, _as(b, hi, HALF), c32(1)), I32)

    def bits(v: llir.Value) -> llir.Value:
        return b.zext(_as(b, v, I16), I32)

    return b.or_(bits(lo), b.shl(bits(hi), c32(16)))


def _as(b: llir.IRBuilder, v: llir.Value, ty: llir.Type) -> llir.Value:
    return v if v.type == ty else b.bitcast(v, ty)


def issue_copy(lw: Lowerer, op: Any, k: int, n: int, warps: int, site: int, dest: llir.Value, aligned: bool = False,
               wg: bool = False, base1024: bool = False, a_rows: int = 0) -> None:
    """Copy `op`'s tile (K x N as the matmul reads it: (k, n) loaded, or (n, k) under `.T`) into
    the dynamic buffer at byte `dest` (cp.async 16-byte copies where rows are 16-byte aligned,
    else predicated 2-byte loads; zero outside the slice); no group committed.  A dimension too
    large for 32-bit indices records fault `site` and copies nothing.  `aligned`: the rows are
    known 16-byte aligned (the aligned version of a prefetching loop): cp.async only.  `wg`: in
    wgmma's layout (codegen/tile/attn_wgmma.py); `base1024`: `dest` counts from the buffer's
    address rounded up to 1024 bytes; `a_rows`: an A tile for wgmma's descriptors, its rows in
    wgmma's order (`_Operand`: `a_rows` row blocks of 16 a warp)."""
    b = lw.b
    sv = lw.frame.slices[op.slice.name]
    dims = [b.sext(d, I64) if d.type.width < 64 else d for d in sv.dims]
    fits = None
    for d in dims:
        ok = b.icmp_unsigned("<", d, c64(LIMIT))
        fits = ok if fits is None else b.and_(fits, ok)
    with b.if_then(b.not_(fits), likely=False):
        lw.fault(site, c64(0), c64(0))

    def clamp(e: Any) -> llir.Value:
        v = lw.conv(lw.expr(e), e.ty, I64T)
        v = b.select(b.icmp_signed(">", v, c64(-512)), v, c64(-512))  # past an edge: still past it
        v = b.select(b.icmp_signed("<", v, c64(LIMIT)), v, c64(LIMIT))
        return b.trunc(v, I32)

    with b.if_then(fits, likely=True):
        origin = [clamp(o) for o in op.offset]
        kax = op.k_axis(False)
        shape = (k, n) if not op.trans else (n, k)
        lims = [b.trunc(d, I32) for d in dims]
        g = b.ptrtoint(sv.ptr, I64)
        B = _Operand(b, warps * 32, shape, g, dims[1], origin, lims, kax, lims[kax], wg, a_rows)
        base = b.add(_buffer(lw, base1024), dest)
        bits = b.or_(b.or_(dims[1], b.lshr(g, c64(1))), b.zext(origin[1], I64))
        if aligned:
            B.copy(base, c32(0), True, whole_tile())
            return
        vec_ok = b.icmp_unsigned("==", b.and_(bits, c64(7)), c64(0))
        fast, slow, join = (b.function.append_basic_block(nm) for nm in ("mma_ra_vec", "mma_ra_scalar", "mma_ra_join"))
        b.cbranch(vec_ok, fast, slow)
        for block, aligned in ((fast, True), (slow, False)):
            b.position_at_end(block)
            B.copy(base, c32(0), aligned, aligned and whole_tile())
            b.branch(join)
        b.position_at_end(join)


def _buffer(lw: Lowerer, base1024: bool) -> llir.Value:
    """The shared address of the compiler's dynamic buffer (rounded up to 1024 bytes: `base1024`)."""
    gv = lw.module.globals.get("__az_tc_smem") or shared_buffer(lw.module)
    s0 = lw.b.ptrtoint(gv, I32)
    return P.round_up_1024(lw.b, s0) if base1024 else s0


def _issue_group(lw: Lowerer, pf: Any, slot: llir.Value) -> None:
    """One wait: every matmul's next tile into its other slot, one group."""
    b = lw.b
    for c in pf.group:
        issue_copy(lw, c.op, c.k, c.n, c.warps, c.site, b.add(c32(c.region), b.mul(b.xor(slot, c32(1)), c32(c.k * c.n * 2))),
                   pf.aligned, c.wg, pf.base1024)
    P.cp_async_commit(b)


def lower_register_a(lw: Lowerer, s: Any, acc: list[llir.Value], slots: list[llir.Value]) -> None:
    """`acc += A @ B` of a `TileMma` with `a_regs` (`acc`: the accumulator's values, stored
    back to `slots`); with `s.prefetch` (codegen/tile/prefetch.py) B is already on its way in
    the iteration's slot, and the next iteration's B is issued after the mma."""
    b = lw.b
    lay = s.layout
    assert lay.wn == 1, "a register A operand needs the (warps, 1) grid (the plan's row mode)"
    a_vals = [b.load(lw.frame.vars[n][0]) for n in s.a_regs]
    K = s.k
    kt_a = K // 8  # A's n8 blocks a row block
    pf = s.prefetch
    resident = not s.a_regs
    assert not resident or (pf is not None and pf.a_region >= 0), "a TileMma without A names a resident A tile"
    assert resident or len(a_vals) == lay.mt * kt_a * 4, (len(a_vals), lay, K)
    op = s.b
    nbytes = K * lay.n * 2
    s0 = _buffer(lw, pf is not None and pf.base1024)
    wg = s.engine == "wgmma"
    assert not wg or pf is not None, "a register-A wgmma reads a prefetching loop's slot"
    if pf is None:
        issue_copy(lw, op, K, lay.n, s.warps, s.site, c32(0))
        P.cp_async_commit(b)
        P.cp_async_wait(b, 0)
        P.barrier(b)
        base = s0
    else:
        slot = b.and_(b.trunc(lw.conv(lw.expr(pf.slot), pf.slot.ty, I64T), I32), c32(1))
        if not pf.waitless:
            P.cp_async_wait(b, pf.waits)
            if pf.base1024:  # (a wgmma of the loop reads the copies through the async proxy)
                P.fence_proxy_async(b)
            P.barrier(b)
        base = b.add(s0, b.add(c32(pf.region), b.mul(slot, c32(nbytes))))
        if pf.group and copy_first():
            _issue_group(lw, pf, slot)
    lane = b.and_(P.sreg(b, "tid.x"), c32(31))
    lr = b.and_(lane, c32(15))
    hi = b.lshr(lane, c32(4))
    j8 = b.lshr(lane, c32(3))
    l7 = b.and_(lane, c32(7))
    mt, nt = lay.mt, lay.nt
    if resident:  # A's rows of this warp in the resident (M, K) tile: ldmatrix row lane % 16, chunk lane / 16
        a_base = b.add(s0, c32(pf.a_region))
        a_row = b.add(b.mul(b.lshr(P.sreg(b, "tid.x"), c32(5)), c32(lay.m // lay.wm)), lr)
    cur = [[acc[(mi * nt + ni) * 4:(mi * nt + ni) * 4 + 4] for ni in range(nt)] for mi in range(mt)]
    b_cpr = K // 8 if op.trans else lay.n // 8
    xor_b = not wg and ldsm_xor() and b_cpr >= 8 and not b_cpr & (b_cpr - 1) and (pf is None or pf.region % 128 == 0) and nbytes % 128 == 0
    xor_a = resident and ldsm_xor() and K // 8 >= 8 and not K // 8 & (K // 8 - 1) and pf.a_region % 128 == 0 and (lay.m // lay.wm) % 8 == 0
    if xor_b:  # B^T rows n = 16 npair + n_lane, chunk 2 kk + (j8 & 1); B rows k = 16 kk + lr, chunk 2 npair + hi
        b_full = (_lane_base(b, base, b.add(b.shl(b.lshr(j8, c32(1)), c32(3)), l7), b.and_(j8, c32(1)), b_cpr) if op.trans
                  else _lane_base(b, base, lr, hi, b_cpr))
    a_ss = wg and resident and pf.a_ss
    xor_a = xor_a and not a_ss
    if xor_a:
        a_full = _lane_base(b, a_base, a_row, hi, K // 8)
    if a_ss:  # (staging._Operand `a_rows`: warpgroup g's m64 blocks from row 64 mt g)
        a_wg = b.add(a_base, b.mul(b.lshr(P.sreg(b, "tid.x"), c32(7)), c32(mt * 64 * 128)))
    a_frags: list[list[Any]] = []  # wgmma: [kk][mi] A's fragments
    for kk in range(K // 16):
        a_frags.append([])
        bfr: list[Any] = []
        for npair in range(0 if wg else nt // 2):
            if xor_b:
                r = (P.ldsm_kstep(b, b_full, kk, npair * 16 * b_cpr * 16, False) if op.trans
                     else P.ldsm_kstep(b, b_full, npair, kk * 16 * b_cpr * 16, True))
                bfr += [[r[0], r[1]], [r[2], r[3]]]
                continue
            if op.trans:  # shared B is N x K: rows n
                n = b.add(c32(npair * 16), b.add(b.shl(b.lshr(j8, c32(1)), c32(3)), l7))
                off = _rowmajor(b, n, b.add(c32(kk * 2), b.and_(j8, c32(1))), K // 8)
            else:  # shared B is K x N: rows k, ldmatrix.trans
                off = _rowmajor(b, b.add(c32(kk * 16), lr), b.add(c32(npair * 2), hi), lay.n // 8)
            r = P.ldmatrix_x4(b, b.add(base, off), trans=not op.trans)
            bfr += [[r[0], r[1]], [r[2], r[3]]]
        for mi in range(mt):
            blk0 = (mi * kt_a + 2 * kk) * 4
            blk1 = blk0 + 4
            if a_ss:  # (its descriptors: attn_wgmma.py)
                continue
            if xor_a:
                afr = P.ldsm_kstep(b, a_full, kk, mi * 16 * (K // 8) * 16, False)
            elif resident:  # matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15): a0..a3
                off = _rowmajor(b, b.add(a_row, c32(mi * 16)), b.add(c32(kk * 2), hi), K // 8)
                afr = list(P.ldmatrix_x4(b, b.add(a_base, off), trans=False))
            else:
                afr = [_pack(b, a_vals[blk0], a_vals[blk0 + 1]), _pack(b, a_vals[blk0 + 2], a_vals[blk0 + 3]),
                       _pack(b, a_vals[blk1], a_vals[blk1 + 1]), _pack(b, a_vals[blk1 + 2], a_vals[blk1 + 3])]
            if wg:
                a_frags[kk].append(afr)
                continue
            for ni in range(nt):
                cur[mi][ni] = P.mma_16816(b, afr, bfr[ni], cur[mi][ni], s.elem)
    if wg:  # (codegen/tile/attn_wgmma.py) B from the slot at `base`: 1024-byte aligned, the region and slots multiples of 1024
        a_in = (descriptor(b, a_wg, 0, K, lay.m, True), lay.m) if a_ss else a_frags
        flat = emit_register_a(b, [v for mi in range(mt) for ni in range(nt) for v in cur[mi][ni]], a_in, base, K, lay.n,
                               op.trans, mt, s.elem)
        cur = [[flat[(mi * nt + ni) * 4:(mi * nt + ni) * 4 + 4] for ni in range(nt)] for mi in range(mt)]
    if pf is None:
        P.barrier(b)  # the buffer is free again
    elif pf.group:  # one wait: every matmul's next tile into its other slot, one group
        if not copy_first():
            _issue_group(lw, pf, slot)
    elif not pf.waitless:  # the next iteration's tile into the other slot (last read an iteration ago, before this barrier)
        nxt = MmaOperandIR(op.slice, pf.next, op.shape, op.trans)
        issue_copy(lw, nxt, K, lay.n, s.warps, s.site, b.add(c32(pf.region), b.mul(b.xor(slot, c32(1)), c32(nbytes))), pf.aligned,
                   wg, pf.base1024)
        P.cp_async_commit(b)
    for sl, v in zip(slots, [v for mi in range(mt) for ni in range(nt) for v in cur[mi][ni]], strict=True):
        b.store(v, sl)

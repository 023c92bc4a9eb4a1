"""`TileMma`: one tensor-core matmul of a tile kernel, `acc += x @ y` over a K range, its
accumulator in registers in the `MmaLayout` (codegen/tile/layout.py), and its LLVM lowering.

The statement is plain IR made by the tile lowering (codegen/tile/plain.py) from the language's
layout plan (language/tile_plan.py): one per tensor-core matmul, or one per matmul of a
pipelined loop (a loop of matmuls only, each over the whole K range the loop covers: `trips`
steps of the matmul's K).  Each operand is described by operations, not by a form: its slice,
its tile's offset (evaluated with the loop variable at its first value), whether the matmul
reads it transposed, and the axis along which K advances.

Semantics, exactly the generic lowering's up to the order of the f32 sum: element `(r, c)`
gains `sum_k x[r, k] * y[k, c]` over the K steps, with an operand element outside its slice
read as zero.  The lowering clamps the K range to where both operands are inside (so the
copies never form an address outside), and the mainloop is a `stages`-deep cp.async ring
(16-byte copies with the byte count clamped at the edges; predicated 2-byte loads where a
row is not 16-byte aligned: K = 4095, an odd offset) feeding `ldmatrix` (`.trans` for a K x N
B or a transposed A) and `mma.sync.m16n8k16` (`emit_mma_sync`), or Hopper's wgmma
(codegen/tile/wgmma.py) where the target and the layout allow it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.records import dataclass

from anodize.language.types import I64 as I64T

from ..llvm.registry import lowers
from ..llvm.types import add_attr, mem_type
from ..tensorcore import inline_ptx as P
from ..tensorcore.common import shared_buffer
from ..tensorcore.gemm import _swizzle
from ..tensorcore.inline_ptx import F32, I32, I64, c32, c64
from .layout import MmaLayout
from .mma_ir import MmaOperandIR, TileMma
from .mma_regs import lower_register_a
from .staging import _Operand, _rowmajor
from .wgmma import emit_wgmma

if TYPE_CHECKING:
    from ..llvm.lower import Lowerer

__all__ = ["MmaOperandIR", "TileMma", "emit_mma_sync", "lower_tile_mma"]

LIMIT = 2**31 - 4096  # the routines index with 32 bits


# ---- the LLVM lowering ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TilePredStore:
    """`slice[index] = value` where the index is inside `slice`, as one predicated store (no
    branch): the fragment loops' stores (codegen/tile/mma.py `lower_pred_store`).  With `row`, a
    2-D store's address is `row` (an i64 local: the flat index of the element `offset` columns to
    the left, `index[0] * slice.shape[1] + index[1] - offset` wrapping) plus `offset` elements, the
    offset folded into the store's address as a constant: one row address serves every element
    of a fragment row, and the codegen's strength reduction has no per-element products to match.
    The fragment's first column, `index[1] - offset`, is then a program's tile origin plus its
    thread's: non-negative (what `store_limits`' one limit a row relies on)."""

    slice: ir.SliceRef
    index: tuple[Any, ...]
    value: Any
    span: Any = None
    row: Any = None
    offset: int = 0


@lowers(TileMma)
def lower_tile_mma(lw: Lowerer, s: TileMma) -> None:
    """`s_TileMma` of the LLVM lowering (codegen/llvm/stmts.py)."""
    b = lw.b
    slots = [lw.frame.vars[n][0] for n in s.acc]
    acc = [b.load(sl) for sl in slots]
    if s.a is None:
        lower_register_a(lw, s, acc, slots)
        return

    def i64(e: Any) -> llir.Value:
        return lw.conv(lw.expr(e), e.ty, I64T)

    ops = []
    for op, is_a in ((s.a, True), (s.b, False)):
        assert op is not None
        sv = lw.frame.slices[op.slice.name]
        dims = [b.sext(d, I64) if d.type.width < 64 else d for d in sv.dims]
        ops.append((sv, dims, [i64(o) for o in op.offset], op.k_axis(is_a)))
    fits = None
    for _, dims, _, _ in ops:
        for d in dims:
            ok = b.icmp_unsigned("<", d, c64(LIMIT))
            fits = ok if fits is None else b.and_(fits, ok)
    with b.if_then(b.not_(fits), likely=False):
        lw.fault(s.site, c64(0), c64(0))

    def smax(x: llir.Value, y: llir.Value) -> llir.Value:
        return b.select(b.icmp_signed(">", x, y), x, y)

    def smin(x: llir.Value, y: llir.Value) -> llir.Value:
        return b.select(b.icmp_signed("<", x, y), x, y)

    trips = smin(smax(i64(s.trips), c64(0)), c64(1 << 40))
    klen = b.mul(trips, c64(s.k))
    # the K range [lo, hi) (relative to the first step) where both operands are inside
    (_, da, oa, ka), (_, db, ob, kb) = ops
    lo = smax(c64(0), smax(b.neg(oa[ka]), b.neg(ob[kb])))
    hi = smin(klen, smin(b.sub(da[ka], oa[ka]), b.sub(db[kb], ob[kb])))
    kp = smax(b.sub(hi, lo), c64(0))
    origins = []
    for (sv, dims, off, kax) in ops:
        o = list(off)
        o[kax] = smin(b.add(off[kax], lo), c64(LIMIT))  # >= 0 from lo; clamped when the range is empty
        o[1 - kax] = smin(smax(off[1 - kax], c64(-512)), c64(LIMIT))  # past an edge: still past it
        origins.append([b.trunc(v, I32) for v in o])
    K = b.trunc(kp, I32)
    # a block holds its ring and its register tiles: ptxas may give it every register it needs
    # (without the hint it trades registers for occupancy and spills the fragments)
    add_attr(lw.fn.attributes, '"nvvm.minctasm"="1"')
    with b.if_then(fits, likely=True):
        if s.engine == "wgmma":
            out = emit_wgmma(lw, s, acc, ops, origins, K)
        else:
            out = emit_mma_sync(b, lw.module, s, acc, ops, origins, K)
        for sl, v in zip(slots, out, strict=True):
            b.store(v, sl)


def store_limits() -> bool:
    """Whether a fragment's stores test their column against one limit a row
    (`ANODIZE_TILE_STORE_LIMIT=1`, off until a GPU run has compared them)."""
    return os.environ.get("ANODIZE_TILE_STORE_LIMIT", "0") == "1"


@lowers(TilePredStore)
def lower_pred_store(lw: Lowerer, s: TilePredStore) -> None:
    """`s_TilePredStore`: one predicated `st.global` where the index is inside the slice (the
    address is formed either way, never dereferenced outside)."""
    b = lw.b
    sv = lw.frame.slices[s.slice.name]
    v = lw.expr(s.value)
    elem = sv.ty.elem
    bits = elem.info.mem_bits
    kind = "f32" if elem.name == "f32" else "b16" if bits == 16 else ""
    disp = 0  # bytes the store instruction adds to its address operand
    if s.row is None:
        ok, ptr, _, _ = lw.bounds.address(sv, s.index)
    else:  # the same bounds test; the address from the row's flat index (the same modulo 2**64)
        idx = lw.bounds.index_values(s.index)
        ok = b.and_(b.icmp_unsigned("<", idx[0], sv.dims[0]), b.icmp_unsigned("<", idx[1], sv.dims[1]))
        ptr = b.gep(sv.ptr, [lw.expr(s.row)], inbounds=True, source_etype=mem_type(elem))
        disp = s.offset * bits // 8
        if not kind and s.offset:
            ptr = b.gep(ptr, [c64(s.offset)], inbounds=True, source_etype=mem_type(elem))
    if not kind:
        with b.if_then(ok):
            b.store(b.zext(v, llir.IntType(8)) if elem.is_bool else v, ptr)
        return
    if kind == "b16" and v.type != llir.IntType(16):
        v = b.bitcast(v, llir.IntType(16))
    if s.row is not None and store_limits():
        # index (r, c0 + offset), c0 = the fragment's first column (>= 0, below 2**62): inside
        # where r < rows and offset < cols - c0, the latter clamped to [0, 2**31 - 1] (offset is
        # below the tile's width) and made 0 where the row is outside: one limit a fragment row
        c0 = b.sub(idx[1], c64(s.offset))
        left = b.sub(sv.dims[1], c0)
        left = b.select(b.icmp_signed("<", left, c64(0)), c64(0), left)
        left = b.select(b.icmp_signed(">", left, c64(2**31 - 1)), c64(2**31 - 1), left)
        limit = b.select(b.icmp_unsigned("<", idx[0], sv.dims[0]), b.trunc(left, I32), c32(0))
        P.st_global_below(b, b.ptrtoint(ptr, I64), v, kind, limit, s.offset, disp)
        return
    P.st_global(b, b.ptrtoint(ptr, I64), [v], kind, b.zext(ok, I32), disp)


# ---- mma.sync ------------------------------------------------------------------------------------


def emit_mma_sync(b: llir.IRBuilder, module: llir.Module, s: TileMma, acc: list[llir.Value], ops: list[Any],
                  origins: list[list[llir.Value]], K: llir.Value) -> list[llir.Value]:
    """The mainloop of `s` on mma.sync: returns the accumulator's registers after it."""
    lay = s.layout
    threads = s.warps * 32
    tk = s.k_tile
    assert not lay.stacked, "mma.sync takes a warp's rows contiguous"
    sa = s.a
    assert sa is not None  # (A in registers: mma_regs.py)
    tid = P.sreg(b, "tid.x")
    warp = b.lshr(tid, c32(5))
    lane = b.and_(tid, c32(31))
    warp_m, warp_n = b.udiv(warp, c32(lay.wn)), b.urem(warp, c32(lay.wn))
    mt, nt = lay.mt, lay.nt
    wtm, wtn = lay.m // lay.wm, lay.n // lay.wn
    gv = module.globals.get("__az_tc_smem") or shared_buffer(module)
    s0 = b.ptrtoint(gv, I32)

    opnds = []
    for (sv, dims, _, kax), origin, op, is_a in zip(ops, origins, (sa, s.b), (True, False), strict=True):
        shape = ((lay.m, tk) if not op.trans else (tk, lay.m)) if is_a else ((tk, lay.n) if not op.trans else (lay.n, tk))
        lims = [b.trunc(d, I32) for d in dims]
        k_end = b.add(origin[kax], K)
        o = _Operand(b, threads, shape, b.ptrtoint(sv.ptr, I64), dims[1], origin, lims, kax, k_end)
        o.tid = tid
        opnds.append(o)
    A, B = opnds
    stage_bytes = A.nbytes + B.nbytes
    S = s.stages
    # 16-byte copies: rows 16-byte aligned (leading dimensions multiples of 8, aligned bases) and
    # each tile's first column a multiple of 8
    bits = b.or_(b.or_(A.ld, B.ld), b.lshr(b.or_(A.g, B.g), c64(1)))
    bits = b.or_(bits, b.zext(b.or_(A.origin[1], B.origin[1]), I64))
    vec_ok = b.icmp_unsigned("==", b.and_(bits, c64(7)), c64(0))

    # ldmatrix offsets (within a stage's A or B part) of every fragment
    lr = b.and_(lane, c32(15))
    hi = b.lshr(lane, c32(4))
    j8 = b.lshr(lane, c32(3))
    l7 = b.and_(lane, c32(7))
    a_row0 = b.mul(warp_m, c32(wtm))
    n0 = b.mul(warp_n, c32(wtn))
    KK = tk // 16
    a_off = []
    for mi in range(mt):
        row = []
        for kk in range(KK):
            if not sa.trans:  # shared A is M x tk: rows m
                row.append(_rowmajor(b, b.add(a_row0, b.add(c32(mi * 16), lr)), b.add(c32(kk * 2), hi), tk // 8))
            else:  # shared A is tk x M: rows k, ldmatrix.trans
                k = b.add(c32(kk * 16), b.add(b.shl(b.lshr(j8, c32(1)), c32(3)), l7))
                chunk = b.add(b.lshr(b.add(a_row0, c32(mi * 16)), c32(3)), b.and_(j8, c32(1)))
                row.append(_rowmajor(b, k, chunk, lay.m // 8))
        a_off.append(row)
    b_off = []
    for npair in range(nt // 2):
        row = []
        for kk in range(KK):
            if s.b.trans:  # shared B is N x tk: rows n
                n = b.add(b.add(n0, c32(npair * 16)), b.add(b.shl(b.lshr(j8, c32(1)), c32(3)), l7))
                row.append(_rowmajor(b, n, b.add(c32(kk * 2), b.and_(j8, c32(1))), tk // 8))
            else:  # shared B is tk x N: rows k, ldmatrix.trans
                chunk = b.add(b.lshr(b.add(n0, c32(npair * 16)), c32(3)), hi)
                row.append(_rowmajor(b, b.add(c32(kk * 16), lr), chunk, lay.n // 8))
        b_off.append(row)

    def frags(a_base: llir.Value, b_base: llir.Value, kk: int) -> tuple[list[Any], list[Any]]:
        afr = [P.ldmatrix_x4(b, b.add(a_base, a_off[mi][kk]), trans=sa.trans) for mi in range(mt)]
        bfr: list[Any] = []
        for npair in range(nt // 2):
            r = P.ldmatrix_x4(b, b.add(b_base, b_off[npair][kk]), trans=not s.b.trans)
            bfr += [[r[0], r[1]], [r[2], r[3]]]
        return afr, bfr

    def bases(stage: llir.Value) -> tuple[llir.Value, llir.Value]:
        base = b.add(s0, b.mul(stage, c32(stage_bytes)))
        return base, b.add(base, c32(A.nbytes))

    def copy(stage: llir.Value, kt: llir.Value, aligned: bool) -> None:
        ab, bb = bases(stage)
        k0 = b.mul(kt, c32(tk))
        A.copy(ab, k0, aligned)
        B.copy(bb, k0, aligned)

    nested = [[acc[(mi * nt + ni) * 4: (mi * nt + ni) * 4 + 4] for ni in range(nt)] for mi in range(mt)]
    prefetch_ok = lay.count < 128

    def mainloop(aligned: bool) -> list[list[list[llir.Value]]]:
        prefetch = prefetch_ok and aligned
        for st in range(S - 1):
            copy(c32(st), c32(st), aligned)
            P.cp_async_commit(b)
        if prefetch:
            P.cp_async_wait(b, S - 2)
            P.barrier(b)
        frag0 = frags(*bases(c32(0)), 0) if prefetch else ([], [])
        ktiles = b.udiv(b.add(K, c32(tk - 1)), c32(tk))
        fn = b.function
        pre = b.block
        loop = fn.append_basic_block("mma_loop")
        done = fn.append_basic_block("mma_done")
        b.cbranch(b.icmp_signed(">", ktiles, c32(0)), loop, done)
        b.position_at_end(loop)
        kt = b.phi(I32)
        rs = b.phi(I32)
        acc_phi = [[[b.phi(F32) for _ in range(4)] for _ in range(nt)] for _ in range(mt)]
        fa_phi = [[b.phi(I32) for _ in range(4)] for _ in range(mt)] if prefetch else []
        fb_phi = [[b.phi(I32) for _ in range(2)] for _ in range(nt)] if prefetch else []
        cur_acc: Any = acc_phi
        cur = (fa_phi, fb_phi)
        a_base, b_base = bases(rs)
        rs1 = b.select(b.icmp_signed("==", rs, c32(S - 1)), c32(0), b.add(rs, c32(1)))

        def issue() -> None:
            ws = b.select(b.icmp_signed("==", rs, c32(0)), c32(S - 1), b.sub(rs, c32(1)))
            copy(ws, b.add(kt, c32(S - 1)), aligned)
            P.cp_async_commit(b)

        def mmas(afr: Any, bfr: Any, c: Any) -> Any:
            return [[P.mma_16816(b, afr[mi], bfr[ni], c[mi][ni], s.elem) for ni in range(nt)] for mi in range(mt)]

        if not prefetch:
            P.cp_async_wait(b, S - 2)
            P.barrier(b)
            issue()
            for kk in range(KK):
                cur_acc = mmas(*frags(a_base, b_base, kk), cur_acc)
        for kk in range(KK if prefetch else 0):
            if kk == 0 and KK == 1:
                issue()
            if kk + 1 < KK:
                nxt = frags(a_base, b_base, kk + 1)
            else:
                P.cp_async_wait(b, S - 2)
                P.barrier(b)
                nxt = frags(*bases(rs1), 0)
            if kk == 0 and KK > 1:
                issue()
            cur_acc = mmas(cur[0], cur[1], cur_acc)
            cur = nxt
        kt1 = b.add(kt, c32(1))
        end = b.block
        b.cbranch(b.icmp_signed("<", kt1, ktiles), loop, done)
        kt.add_incoming(c32(0), pre)
        kt.add_incoming(kt1, end)
        rs.add_incoming(c32(0), pre)
        rs.add_incoming(rs1, end)
        for phis, first, last in ((fa_phi, frag0[0], cur[0]), (fb_phi, frag0[1], cur[1])):
            for row_p, row_f, row_l in zip(phis, first, last):
                for p_, f_, l_ in zip(row_p, row_f, row_l):
                    p_.add_incoming(f_, pre)
                    p_.add_incoming(l_, end)
        for mi in range(mt):
            for ni in range(nt):
                for q in range(4):
                    acc_phi[mi][ni][q].add_incoming(nested[mi][ni][q], pre)
                    acc_phi[mi][ni][q].add_incoming(cur_acc[mi][ni][q], end)
        b.position_at_end(done)
        fin = [[[b.phi(F32) for _ in range(4)] for _ in range(nt)] for _ in range(mt)]
        for mi in range(mt):
            for ni in range(nt):
                for q in range(4):
                    fin[mi][ni][q].add_incoming(nested[mi][ni][q], pre)
                    fin[mi][ni][q].add_incoming(cur_acc[mi][ni][q], end)
        P.cp_async_wait(b, 0)
        P.barrier(b)  # the ring is free again
        return fin

    fast, slow, join = (b.function.append_basic_block(n) for n in ("mma_vec", "mma_scalar", "mma_join"))
    b.cbranch(vec_ok, fast, slow)
    arms = []
    for block, mode in ((fast, True), (slow, False)):
        b.position_at_end(block)
        arms.append((mainloop(mode), b.block))
        b.branch(join)
    b.position_at_end(join)
    out = []
    for mi in range(mt):
        for ni in range(nt):
            for q in range(4):
                ph = b.phi(F32)
                for vals, blk in arms:
                    ph.add_incoming(vals[mi][ni][q], blk)
                out.append(ph)
    return out

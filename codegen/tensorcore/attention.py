"""Fused attention forward on tensor cores (flash-attention 2 style) for the NVPTX target, sm_80+.

`emit_attention_tile` emits, into the caller's function, the code with which one block of
`num_warps * 32` threads computes the (BM, D) tile (tile_row, tile_col) of

    O = softmax(Q K[kv rows].T * scale) V[kv rows]        (per row, online over BN-key tiles)

for the tile attention form (codegen/tile/attention.py):

- each warp owns `mt` 16-row slices of the BM query rows (BM = 16 * mt * num_warps); its Q
  fragments are loaded once (`ldmatrix` from shared memory) and stay in registers;
- per key tile: S = Q K^T by `mma.sync.m16n8k16` (f16 in, f32 accumulate) into accumulator
  fragments; the online softmax runs on those fragments (the row max and sum over the four
  lanes that share a row by `shfl.sync.bfly`; exponentials as `ex2.approx` in the log2
  domain: s * scale * log2(e)); P is rounded to f16 and repacked, register to register, as
  the A operand of O += P V (m16n8k16 again, V through `ldmatrix.trans`);
- K and V stream through one shared buffer each by `cp.async` (16 bytes a copy, zero-filled
  past the operands' extents): V[j] is copied while S = Q K[j]^T computes, K[j+1] while the
  softmax and P V run;
- at the end O / l is stored as f16, masked at O's edges.

Shared rows are XOR-swizzled in 16-byte chunks (gemm.py's `_swizzle`), so every ldmatrix phase
hits 8 distinct bank groups.  `lower_tile_attention` lowers the `TileAttention` statement: it
checks the sizes fit the 32-bit indexing and picks the 16-byte copy path (aligned rows) or a
2-byte one at run time.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import llvmlite.ir as ir

from anodize.language.records import dataclass
from anodize.language.types import F32 as F32T, I64 as I64T

from ..llvm.registry import lowers
from ..llvm.types import add_attr
from ..tile.attention import TileAttention
from . import inline_ptx as P
from .attention_groups import bar_count, merge_groups
from .common import _as_i32, _as_i64, shared_buffer, store_fragments
from .gemm import _swizzle, _Tile
from .inline_ptx import F32, I32, I64, c32, c64, ex2, fmax, ldsm, ldsm_kstep

from anodize.language.attention_config import REG_BUDGET, AttnConfig  # noqa: F401,E402  (re-exported)

if TYPE_CHECKING:
    from ..llvm.lower import Lowerer

LOG2E = 1.4426950408889634
LIMIT = 2**31 - 4096


def _asm(b: ir.IRBuilder, ret: ir.Type, text: str, cons: str, args: list[ir.Value]) -> ir.Value:
    return b.asm(ir.FunctionType(ret, [a.type for a in args]), text, cons, args, False)


def shfl_xor(b: ir.IRBuilder, x: ir.Value, lane_mask: int) -> ir.Value:
    bits = b.bitcast(x, I32)
    r = b.asm(ir.FunctionType(I32, [I32]), f"shfl.sync.bfly.b32 $0, $1, {lane_mask}, 31, -1;", "=r,r", [bits], True)
    return b.bitcast(r, F32)


def ld_chunk_b16(b: ir.IRBuilder, addr: ir.Value, n: ir.Value) -> list[ir.Value]:
    """The first `n` (0..8) halves at global `addr` (2-byte aligned), zero past them, as 4 b32
    words: one asm, the per-half offsets and predicates inside it (no live predicate registers)."""
    loads = " ".join(f"setp.gt.s32 p, $5, {j}; @p ld.global.b16 h{j}, [$4+{2 * j}];" for j in range(8))
    text = ("{ .reg .pred p; .reg .b16 h<8>; mov.b16 h0, 0; mov.b16 h1, 0; mov.b16 h2, 0; mov.b16 h3, 0; "
            "mov.b16 h4, 0; mov.b16 h5, 0; mov.b16 h6, 0; mov.b16 h7, 0; " + loads +
            " mov.b32 $0, {h0, h1}; mov.b32 $1, {h2, h3}; mov.b32 $2, {h4, h5}; mov.b32 $3, {h6, h7}; }")
    st = ir.LiteralStructType([I32] * 4)
    r = b.asm(ir.FunctionType(st, [I64, I32]), text, "=r,=r,=r,=r,l,r,~{memory}", [addr, n], True)
    return [b.extract_value(r, i) for i in range(4)]


class _Narrow(_Tile):
    """The 2-byte copy path of `_Tile.load_tile` with one asm a 16-byte chunk (gemm.py's keeps
    8 predicates a chunk live across the key loop: registers the fragments need)."""

    def _copy_scalar(self, sbase, rows, cols, gbase, ld, row0, col0, row_lim, col_lim, blocked=False) -> None:  # type: ignore[no-untyped-def]
        b = self.b
        for r, c, off in self._chunks(rows, cols, blocked):
            grow = b.add(row0, r)
            gcol = b.add(col0, b.shl(c, c32(3)))
            left = b.sub(col_lim, gcol)
            left = b.select(b.icmp_signed("<", left, c32(8)), left, c32(8))
            n = b.select(b.icmp_signed("<", grow, row_lim), left, c32(0))
            elem = b.add(b.mul(b.sext(grow, I64), ld), b.sext(gcol, I64))
            addr = b.select(b.icmp_signed(">", n, c32(0)), b.add(gbase, b.shl(elem, c64(1))), gbase)
            P.st_shared_v4(b, b.add(sbase, off), ld_chunk_b16(b, addr, n))


    def _copy_async(self, sbase, rows, cols, gbase, ld, row0, col0, row_lim, col_lim, blocked=False) -> None:  # type: ignore[no-untyped-def]
        """gemm.py's 16-byte copy with the per-chunk values derived in the loop: a thread's chunks
        are one column chunk and rows `step` apart (threads a multiple of the row's chunks), so
        their shared offsets are one register plus immediates (the swizzle repeats every 8 rows)
        and their global addresses a chain of adds -- nothing per chunk for LLVM to hoist out of
        the key loop into registers the fragments need."""
        cpr = cols // 8
        t = self.cfg.threads
        step = t // cpr
        if blocked or t % cpr or step % 8:
            return super()._copy_async(sbase, rows, cols, gbase, ld, row0, col0, row_lim, col_lim, blocked)
        b = self.b
        r0 = b.lshr(self.tid, c32(cpr.bit_length() - 1))
        c = b.and_(self.tid, c32(cpr - 1))
        off0 = b.add(b.mul(r0, c32(cols * 2)), b.shl(b.xor(c, _swizzle(b, r0, cpr)), c32(4)))
        dst = b.add(sbase, off0)
        gcol = b.add(col0, b.shl(c, c32(3)))
        left = b.sub(col_lim, gcol)  # elements left in the row from gcol
        col_ok = b.icmp_signed(">", left, c32(0))
        full = b.shl(b.select(b.icmp_signed("<", left, c32(8)), left, c32(8)), c32(1))
        grow0 = b.add(row0, r0)
        rem = b.sub(row_lim, grow0)  # rows left from this thread's first one
        addr = b.add(gbase, b.shl(b.add(b.mul(b.sext(grow0, I64), ld), b.sext(gcol, I64)), c64(1)))
        stride = b.shl(b.mul(ld, c64(step)), c64(1))
        n = rows * cpr // t
        # every chunk of this thread inside the matrix (all but the edge tiles): plain 16-byte
        # copies, no per-chunk masks (a thread's own choice: no barrier inside)
        inside = b.and_(b.icmp_signed(">=", left, c32(8)), b.icmp_signed(">", rem, c32((n - 1) * step)))
        with b.if_else(inside, likely=True) as (fast, edge):
            with fast:
                a = addr
                for i in range(n):
                    _asm(b, ir.VoidType(), f"cp.async.cg.shared.global [$0+{i * step * cols * 2}], [$1], 16;", "r,l,~{memory}", [dst, a])
                    a = b.add(a, stride)
            with edge:
                a = addr
                for i in range(n):
                    ok = b.and_(col_ok, b.icmp_signed(">", rem, c32(i * step)))
                    src = b.select(ok, a, gbase)
                    _asm(b, ir.VoidType(), f"cp.async.cg.shared.global [$0+{i * step * cols * 2}], [$1], 16, $2;", "r,l,r,~{memory}",
                         [dst, src, b.select(ok, full, c32(0))])
                    a = b.add(a, stride)
        return None


class _Threads:
    def __init__(self, threads: int):
        self.threads = threads


def _rowmajor(b: ir.IRBuilder, row: ir.Value, chunk: ir.Value, cpr: int) -> ir.Value:
    phys = b.xor(chunk, _swizzle(b, row, cpr))
    return b.add(b.mul(row, c32(cpr * 16)), b.shl(phys, c32(4)))


def _tree(b: ir.IRBuilder, vals: list[ir.Value], op: Any) -> ir.Value:
    while len(vals) > 1:
        nxt = [op(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def _rescale(b: ir.IRBuilder, acc: list, alphas: dict, mt: int, d: int) -> None:  # type: ignore[type-arg]
    for mi in range(mt):
        for h in range(2):
            for nd in range(d // 8):
                acc[mi][nd][2 * h] = b.fmul(acc[mi][nd][2 * h], alphas[(mi, h)])
                acc[mi][nd][2 * h + 1] = b.fmul(acc[mi][nd][2 * h + 1], alphas[(mi, h)])


def emit_attention_tile(b: ir.IRBuilder, cfg: AttnConfig, *, q_g, k_g, v_g, o_g, q_rows, q_cols, k_rows, k_cols,
                        v_rows, v_cols, o_rows, o_cols, tile_row, tile_col, base, ntiles, scale, smem,
                        aligned: bool, separate_q: bool) -> None:
    """One block's (BM, D) tile of attention (see the module doc).  Sizes are i32 values (all
    below 2**31 - 4096, `base + ntiles * BN` too); q_g .. o_g i64 addresses; `scale` f32;
    `smem` an i32 shared offset of cfg.smem_bytes(..) bytes, 128-byte aligned; every thread of
    the block must reach the call (it holds barriers)."""
    bm, bn, d, mt = cfg.tile_m, cfg.tile_n, cfg.head_dim, cfg.mt
    cpr = d // 8
    gt = cfg.threads // cfg.groups  # threads of a warp group
    tq = _Narrow(b, _Threads(cfg.threads), aligned)  # type: ignore[arg-type]  # (only .threads is read)
    tq.tid = P.sreg(b, "tid.x")
    t = _Narrow(b, _Threads(gt), aligned)  # type: ignore[arg-type]  # K and V: the group's threads
    grp = b.lshr(tq.tid, c32(gt.bit_length() - 1)) if cfg.groups > 1 else c32(0)
    t.tid = b.and_(tq.tid, c32(gt - 1)) if cfg.groups > 1 else tq.tid
    warp = b.lshr(t.tid, c32(5))  # within the group
    lane = b.and_(t.tid, c32(31))
    gbar = (lambda: P.barrier(b)) if cfg.groups == 1 else (lambda: bar_count(b, b.add(grp, c32(1)), gt))
    k_s = b.add(smem, b.mul(grp, c32(cfg.stages * cfg.kv_bytes()))) if cfg.groups > 1 else smem
    v_s = b.add(k_s, c32(bn * d * 2))
    q_s = b.add(smem, c32(cfg.groups * cfg.stages * cfg.kv_bytes())) if separate_q else smem
    ring = cfg.stages == 2
    m0 = b.mul(tile_row, c32(bm))
    c0 = b.mul(tile_col, c32(d))
    ld_q, ld_k, ld_v = (b.sext(x, I64) for x in (q_cols, k_cols, v_cols))
    zero = c32(0)

    # Q: staged once, then in registers as A fragments for the whole key loop
    tq.load_tile(q_s, bm, d, q_g, ld_q, m0, c0, q_rows, q_cols)
    P.cp_async_commit(b)
    P.cp_async_wait(b, 0)
    P.barrier(b)
    wrow = b.mul(warp, c32(16 * mt))
    lr, hi = b.and_(lane, c32(15)), b.lshr(lane, c32(4))
    if cfg.q_regs:
        qf = [[P.ldmatrix_x4(b, b.add(q_s, _rowmajor(b, b.add(wrow, b.add(c32(mi * 16), lr)), b.add(c32(kk * 2), hi), cpr)), False)
               for kk in range(d // 16)] for mi in range(mt)]
    else:  # Q stays in shared (beside K and V): this lane's row offset; k-step kk is the chunk XOR 2 kk
        assert separate_q
        q_full = b.add(q_s, _rowmajor(b, b.add(wrow, lr), hi, cpr))

        def q_frag(mi: int, kk: int) -> list[ir.Value]:
            return ldsm_kstep(b, q_full, kk, mi * 16 * cpr * 16)
    if not separate_q:
        P.barrier(b)  # every warp has its Q fragments before K overwrites the staging

    def load_k(row0: ir.Value, row_lim: ir.Value, stage: ir.Value | None = None) -> None:
        """K's tile at row0 (V's too with the ring: into `stage`'s buffers), masked at row_lim."""
        ks = k_s if stage is None else b.add(k_s, stage)
        t.load_tile(ks, bn, d, k_g, ld_k, row0, zero, row_lim, k_cols)
        if ring:
            t.load_tile(b.add(v_s, stage), bn, d, v_g, ld_v, row0, zero, b.select(b.icmp_signed(">", row_lim, zero), v_rows, zero), v_cols)
        P.cp_async_commit(b)

    # per-lane shared offsets.  The swizzle of a row depends on the row mod 8 only, so the
    # 16-row steps are immediates of the ldmatrix address and the chunk steps an XOR: one
    # register per 16 columns (a register per fragment would be hoisted out of the loop and
    # cost d/16 * BN/16 of them).  K: rows (keys) of the non-transposed B of Q K^T;
    # V: rows (keys) of the transposed B of P V.
    j8 = b.lshr(lane, c32(3))
    krow = b.add(b.shl(b.lshr(j8, c32(1)), c32(3)), b.and_(lane, c32(7)))
    kx = b.xor(b.and_(j8, c32(1)), _swizzle(b, krow, cpr))
    k_off = [b.add(k_s, b.add(b.mul(krow, c32(cpr * 16)), b.shl(b.xor(kx, c32(kk * 2)), c32(4)))) for kk in range(d // 16)]
    vx = b.xor(hi, _swizzle(b, lr, cpr))
    v_off = [b.add(v_s, b.add(b.mul(lr, c32(cpr * 16)), b.shl(b.xor(vx, c32(dp * 2)), c32(4)))) for dp in range(d // 16)]
    step16 = 16 * cpr * 16  # bytes of 16 rows
    # with Q in shared (registers tight): one offset register per operand, the chunk XOR of a
    # k-step inside the ldmatrix's asm (the row part is a multiple of the row's bytes, so the XOR
    # of the chunk bits is the XOR of the offset's)
    k_lane = b.add(b.mul(krow, c32(cpr * 16)), b.shl(kx, c32(4)))
    v_lane = b.add(b.mul(lr, c32(cpr * 16)), b.shl(vx, c32(4)))

    c2 = b.fmul(scale, ir.Constant(F32, LOG2E))  # scores in the log2 domain: exp(x) = 2**(x log2 e)
    m_init = ir.Constant(F32, -1.0e30 * LOG2E)
    fzero = ir.Constant(F32, 0.0)
    # K[0] (when there is a key tile at all: with none, `base` may be anything)
    has = b.icmp_signed(">", ntiles, grp)  # (group g takes key tiles g, g + groups, ...)
    load_k(b.add(base, b.mul(grp, c32(bn))) if cfg.groups > 1 else base, b.select(has, k_rows, zero), zero if ring else None)

    fn = b.function
    pre = b.block
    loop = fn.append_basic_block("attn_loop")
    done = fn.append_basic_block("attn_done")
    b.cbranch(has, loop, done)
    b.position_at_end(loop)
    jt = b.phi(I32)
    m_phi = [[b.phi(F32) for _ in range(2)] for _ in range(mt)]
    l_phi = [[b.phi(F32) for _ in range(2)] for _ in range(mt)]
    acc_phi = [[[b.phi(F32) for _ in range(4)] for _ in range(d // 8)] for _ in range(mt)]

    P.cp_async_wait(b, 0)  # K[j] (and V[j] with the ring) has landed (this thread's copies) ...
    gbar()  # ... everyone's; and every warp is done with V[j-1] (with the ring: with stage j-1)
    kv0 = b.add(base, b.mul(jt, c32(bn)))
    jt1 = b.add(jt, c32(cfg.groups))
    more = b.icmp_signed("<", jt1, ntiles)
    if ring:  # tile j+1 into the other stage, while this one computes
        nth = b.lshr(jt, c32(cfg.groups.bit_length() - 1)) if cfg.groups > 1 else jt  # the group's count of tiles
        cur = b.mul(b.and_(nth, c32(1)), c32(cfg.kv_bytes()))
        load_k(b.add(kv0, c32(cfg.groups * bn)), b.select(more, k_rows, zero), b.xor(cur, c32(cfg.kv_bytes())))
        k_cur = [b.add(x, cur) for x in k_off]
        k_full, v_full = b.add(b.add(k_s, cur), k_lane), b.add(b.add(v_s, cur), v_lane)
    else:
        t.load_tile(v_s, bn, d, v_g, ld_v, kv0, zero, v_rows, v_cols)
        P.cp_async_commit(b)
        k_cur = k_off
        k_full, v_full = b.add(k_s, k_lane), b.add(v_s, v_lane)
    s = [[[fzero] * 4 for _ in range(bn // 8)] for _ in range(mt)]
    for kk in range(d // 16):
        qk = [qf[mi][kk] if cfg.q_regs else q_frag(mi, kk) for mi in range(mt)]
        for np_ in range(bn // 16):
            r = ldsm(b, k_cur[kk], np_ * step16, False) if cfg.q_regs else ldsm_kstep(b, k_full, kk, np_ * step16)
            for mi in range(mt):
                s[mi][2 * np_] = P.mma_16816(b, qk[mi], r[0:2], s[mi][2 * np_], "f16")
                s[mi][2 * np_ + 1] = P.mma_16816(b, qk[mi], r[2:4], s[mi][2 * np_ + 1], "f16")
    if not ring:
        P.cp_async_wait(b, 0)  # V[j] has landed ...
        gbar()  # ... everyone's; and every warp is done with K[j]
        load_k(b.add(kv0, c32(cfg.groups * bn)), b.select(more, k_rows, zero))

    # the online softmax on the fragments: lane holds rows g (h = 0) and g + 8 (h = 1) of each
    # 16-row slice, two neighbouring columns per 8-column n-tile
    m_new = [[None, None] for _ in range(mt)]
    l_new = [[None, None] for _ in range(mt)]
    acc = [[list(acc_phi[mi][nd]) for nd in range(d // 8)] for mi in range(mt)]
    p = [[[None] * 4 for _ in range(bn // 8)] for _ in range(mt)]
    alphas: dict = {}  # type: ignore[type-arg]
    for mi in range(mt):
        for h in range(2):
            x = [b.fmul(s[mi][nt][2 * h + e], c2) for nt in range(bn // 8) for e in range(2)]
            mx = _tree(b, list(x), lambda u, w: fmax(b, u, w))
            mx = fmax(b, mx, shfl_xor(b, mx, 1))
            mx = fmax(b, mx, shfl_xor(b, mx, 2))
            mn = fmax(b, m_phi[mi][h], mx)
            alpha = ex2(b, b.fsub(m_phi[mi][h], mn))
            ps = [ex2(b, b.fsub(v, mn)) for v in x]
            for nt in range(bn // 8):
                p[mi][nt][2 * h], p[mi][nt][2 * h + 1] = ps[2 * nt], ps[2 * nt + 1]
            rs = _tree(b, list(ps), b.fadd)
            l_new[mi][h] = b.fadd(b.fmul(l_phi[mi][h], alpha), rs)
            m_new[mi][h] = mn
            alphas[(mi, h)] = alpha
    # O * alpha; with `lazy`, skipped when no row of the warp has a new maximum (alpha = 2**0 = 1
    # for every row: the product would be O itself)
    if cfg.lazy:
        moved = None
        for mi in range(mt):
            for h in range(2):
                ne = b.fcmp_unordered("!=", m_new[mi][h], m_phi[mi][h])
                moved = ne if moved is None else b.or_(moved, ne)
        anyv = b.asm(ir.FunctionType(I32, [I32]), "{ .reg .pred p, q; setp.ne.b32 p, $1, 0; vote.sync.any.pred q, p, -1; "
                     "selp.b32 $0, 1, 0, q; }", "=r,r", [b.zext(moved, I32)], True)
        before = b.block
        kept = [[list(row) for row in acc_mi] for acc_mi in acc]
        with b.if_then(b.icmp_unsigned("!=", anyv, c32(0)), likely=False):
            _rescale(b, acc, alphas, mt, d)
            scaled = b.block
        for mi in range(mt):
            for nd in range(d // 8):
                for e in range(4):
                    ph = b.phi(F32)
                    ph.add_incoming(acc[mi][nd][e], scaled)
                    ph.add_incoming(kept[mi][nd][e], before)
                    acc[mi][nd][e] = ph
    else:
        _rescale(b, acc, alphas, mt, d)
    # P (f16) as A fragments: n-tiles 2kt, 2kt+1 of S are k-step kt of P V
    pk = [[[P.pack2(b, p[mi][2 * kt][0], p[mi][2 * kt][1], "f16"), P.pack2(b, p[mi][2 * kt][2], p[mi][2 * kt][3], "f16"),
            P.pack2(b, p[mi][2 * kt + 1][0], p[mi][2 * kt + 1][1], "f16"), P.pack2(b, p[mi][2 * kt + 1][2], p[mi][2 * kt + 1][3], "f16")]
           for kt in range(bn // 16)] for mi in range(mt)]
    v_cur = [b.add(x, cur) for x in v_off] if ring else v_off
    for kt in range(bn // 16):
        for dp in range(d // 16):
            r = ldsm(b, v_cur[dp], kt * step16, True) if cfg.q_regs else ldsm_kstep(b, v_full, dp, kt * step16, True)
            for mi in range(mt):
                acc[mi][2 * dp] = P.mma_16816(b, pk[mi][kt], r[0:2], acc[mi][2 * dp], "f16")
                acc[mi][2 * dp + 1] = P.mma_16816(b, pk[mi][kt], r[2:4], acc[mi][2 * dp + 1], "f16")
    end = b.block
    b.cbranch(more, loop, done)
    jt.add_incoming(grp, pre)
    jt.add_incoming(jt1, end)
    for mi in range(mt):
        for h in range(2):
            m_phi[mi][h].add_incoming(m_init, pre)
            m_phi[mi][h].add_incoming(m_new[mi][h], end)
            l_phi[mi][h].add_incoming(fzero, pre)
            l_phi[mi][h].add_incoming(l_new[mi][h], end)
        for nd in range(d // 8):
            for e in range(4):
                acc_phi[mi][nd][e].add_incoming(fzero, pre)
                acc_phi[mi][nd][e].add_incoming(acc[mi][nd][e], end)

    b.position_at_end(done)
    fin_l = [[b.phi(F32) for _ in range(2)] for _ in range(mt)]
    fin_m = [[b.phi(F32) for _ in range(2)] for _ in range(mt)]
    fin = [[[b.phi(F32) for _ in range(4)] for _ in range(d // 8)] for _ in range(mt)]
    for mi in range(mt):
        for h in range(2):
            fin_l[mi][h].add_incoming(fzero, pre)
            fin_l[mi][h].add_incoming(l_new[mi][h], end)
            fin_m[mi][h].add_incoming(m_init, pre)
            fin_m[mi][h].add_incoming(m_new[mi][h], end)
        for nd in range(d // 8):
            for e in range(4):
                fin[mi][nd][e].add_incoming(fzero, pre)
                fin[mi][nd][e].add_incoming(acc[mi][nd][e], end)
    P.cp_async_wait(b, 0)  # the last (empty) K copy is done too
    P.barrier(b)  # shared memory is free again (every group's)
    fin_l = [list(x) for x in fin_l]
    fin = [[list(x) for x in y] for y in fin]
    if cfg.groups > 1:  # group 1 hands its (m, l, O) to group 0, which merges them and stores
        merge_groups(b, cfg, smem, grp, t.tid, fin_m, fin_l, fin)
        with b.if_then(b.icmp_unsigned("==", grp, zero)):
            _finish(b, cfg, fin_l, fin, o_g, o_rows, o_cols, m0, wrow, c0, lane)
        return
    _finish(b, cfg, fin_l, fin, o_g, o_rows, o_cols, m0, wrow, c0, lane)


def _finish(b: ir.IRBuilder, cfg: AttnConfig, fin_l, fin, o_g, o_rows, o_cols, m0, wrow, c0, lane) -> None:  # type: ignore[no-untyped-def]
    """O / l (l summed over the row's 4 lanes), stored as f16 masked at O's edges."""
    mt, d = cfg.mt, cfg.head_dim
    out = [[[None] * 4 for _ in range(d // 8)] for _ in range(mt)]
    for mi in range(mt):
        for h in range(2):
            lt = b.fadd(fin_l[mi][h], shfl_xor(b, fin_l[mi][h], 1))
            lt = b.fadd(lt, shfl_xor(b, lt, 2))
            for nd in range(d // 8):
                for e in range(2):
                    out[mi][nd][2 * h + e] = b.fdiv(fin[mi][nd][2 * h + e], lt)
    store_fragments(b, "f16", out, mt, d // 8, o_g, b.sext(o_cols, I64), o_rows, o_cols, b.add(m0, wrow), c0, lane)


@lowers(TileAttention)
def lower_tile_attention(lw: Lowerer, s: TileAttention) -> None:
    """`TileAttention` (codegen/tile/attention.py) to LLVM inside the LLVM lowering's function."""
    b = lw.b
    bm, bn, d = s.tile
    cfg = AttnConfig(bm, bn, d, s.num_warps, s.stages, s.lazy, s.q_regs, s.groups)

    minb = int(os.environ.get("ANODIZE_ATTN_MINB", "0")) or cfg.min_blocks()
    if minb > 1:
        add_attr(b.function.attributes, f'"nvvm.minctasm"="{minb}"')
    sq, sk, sv, so = (lw.frame.slices[r.name] for r in (s.q, s.k, s.v, s.o))
    if s.smem:
        gv = lw.shared_gv[s.smem]
        gv.align = 128
    else:  # the compiler's dynamic shared buffer (CompiledKernel.dynamic_shared_bytes, 128-byte aligned)
        gv = lw.module.globals.get("__az_tc_smem") or shared_buffer(lw.module)
    dims = [b.sext(x, I64) if x.type.width < 64 else x for x in (*sq.dims, *sk.dims, *sv.dims, *so.dims)]
    lim = c64(LIMIT)
    fits = None
    for x in dims:
        ok = b.icmp_unsigned("<", x, lim)
        fits = ok if fits is None else b.and_(fits, ok)
    seq = lw.conv(lw.expr(s.seq), s.seq.ty, I64T)
    base = lw.conv(lw.expr(s.base), s.base.ty, I64T)
    scale = lw.conv(lw.expr(s.scale), s.scale.ty, F32T)
    pos = b.icmp_signed(">", seq, c64(0))
    kv_ok = b.and_(b.and_(b.icmp_signed(">=", base, c64(0)), b.icmp_signed("<", base, lim)), b.icmp_signed("<", seq, lim))
    kv_ok = b.and_(kv_ok, b.icmp_signed("<", b.add(base, seq), lim))
    fits = b.and_(fits, b.or_(b.not_(pos), kv_ok))
    with b.if_then(b.not_(fits), likely=False):
        lw.fault(s.site, c64(0), c64(0))
    row, col = lw.t.sreg(lw, "ctaid", "y"), lw.t.sreg(lw, "ctaid", "x")
    q_rows, q_cols, k_rows, k_cols, v_rows, v_cols, o_rows, o_cols = dims
    own = b.and_(b.icmp_signed("<", b.mul(b.zext(row, I64), c64(bm)), o_rows),
                 b.icmp_signed("<", b.mul(b.zext(col, I64), c64(d)), o_cols))
    with b.if_then(b.and_(fits, own), likely=True):
        ntiles = b.select(pos, b.sdiv(b.add(seq, c64(bn - 1)), c64(bn)), c64(0))
        ptrs = [_as_i64(b, x.ptr) for x in (sq, sk, sv, so)]
        # 16-byte copies need 16-byte aligned rows: every row length a multiple of 8 elements and
        # every base 16-byte aligned (block-uniform)
        bits = b.or_(b.or_(q_cols, k_cols), v_cols)
        bits = b.or_(bits, b.lshr(b.or_(b.or_(ptrs[0], ptrs[1]), ptrs[2]), c64(1)))
        vec_ok = b.icmp_unsigned("==", b.and_(bits, c64(7)), c64(0))
        args = dict(q_g=ptrs[0], k_g=ptrs[1], v_g=ptrs[2], o_g=ptrs[3],
                    q_rows=_as_i32(b, q_rows), q_cols=_as_i32(b, q_cols), k_rows=_as_i32(b, k_rows),
                    k_cols=_as_i32(b, k_cols), v_rows=_as_i32(b, v_rows), v_cols=_as_i32(b, v_cols),
                    o_rows=_as_i32(b, o_rows), o_cols=_as_i32(b, o_cols), tile_row=row, tile_col=col,
                    base=_as_i32(b, b.select(pos, base, c64(0))), ntiles=_as_i32(b, ntiles), scale=scale,
                    smem=b.ptrtoint(gv, I32), separate_q=s.separate_q)
        with b.if_else(vec_ok, likely=True) as (fast, slow):
            with fast:
                emit_attention_tile(b, cfg, aligned=True, **args)
            with slow:
                if cfg.q_regs:
                    emit_attention_tile(b, cfg, aligned=False, **args)
                else:
                    _call_out_of_line(b, cfg, args)


def _call_out_of_line(b: ir.IRBuilder, cfg: AttnConfig, args: dict) -> None:  # type: ignore[type-arg]
    """The 2-byte copy path as a call of its own function (noinline, convergent: it holds
    barriers, and every thread of the block calls it or none does), so that ptxas allocates its
    registers apart from the fast path's: at 32 query rows a warp and D 128 the two paths in one
    function spilled where the fast path alone did not."""
    keys = [k for k in args if k != "separate_q"]
    fty = ir.FunctionType(ir.VoidType(), [args[k].type for k in keys])
    mod = b.module
    name = f"{b.function.name}_attn_narrow"
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, fty, name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("convergent")
        inner = ir.IRBuilder(fn.append_basic_block("entry"))
        emit_attention_tile(inner, cfg, aligned=False, separate_q=args["separate_q"],
                            **{k: fn.args[i] for i, k in enumerate(keys)})
        inner.ret_void()
    call = b.call(fn, [args[k] for k in keys])
    call.attributes.add("convergent") if hasattr(call, "attributes") else None


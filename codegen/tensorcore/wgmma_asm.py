"""The Hopper GEMM tile as ONE inline-PTX block: `wgmma.mma_async` from shared memory, written
out as PTX text by Python (no LLVM work on it beyond placing the block).

The same contract as codegen/tensorcore/wgmma.py's `emit_wgmma_tile` (C = A @ B, A M x K and B K x N
row-major, f16/bf16 in, f32 accumulate, f16/bf16/f32 out, every load past an edge zero-filled,
every store past one dropped), for a block of `num_warps` warps = num_warps / 4 warpgroups, each
computing 64 rows x tile_n.  What differs is how it is built: the whole tile -- copies, the
pipelined K loop, the epilogue -- is one `asm` statement whose text this module writes, with
loops kept as PTX loops.  LLVM sees one opaque call (its O3 and instruction selection cost
nothing for it), and the PTX handed to ptxas is ~400 lines instead of ~3,000: the cold compile
of the tile GEMM is dominated by the rest of the toolchain, not by this body.

The pieces (docs/tiles.md "On tensor cores" shows the loop's PTX):

- one loop over j = 0 .. ktiles + L - 1 (L = stages - 2 tiles copied ahead): iteration j first
  (j >= L) waits for tile j - L (`cp.async.wait_group L-1`, `fence.proxy.async`, `bar.sync`),
  then copies tile j into stage j % S -- 16-byte `cp.async.cg` with the byte count clamped at the
  edges, or, when a leading dimension or base is not 16-byte aligned, a loop of predicated 2-byte
  loads and 16-byte shared stores -- and then (j >= L) multiplies tile j - L: four
  `wgmma.m64nNk16` on 128-byte-swizzled descriptors, committed as one group, with one group
  left in flight (`wgmma.wait_group 1`); the barrier of iteration j + 1 orders a stage's refill
  after every warpgroup's wait for the wgmma that read it (stages = L + 2);
- the epilogue rounds the accumulators to C's type into shared memory (rows padded so the
  fragment stores are free of bank conflicts), then copies C's tile out in 16-byte row chunks
  (coalesced), element by element only where a chunk crosses C's edge or C is not 16-byte
  aligned.

Every thread of the block must reach the block (it holds `bar.sync 0`); `smem` is the shared
window address of `smem_bytes()` bytes (rounded up to 1024 inside: the swizzle's period).
"""

from __future__ import annotations

import itertools
from anodize.language.records import dataclass

import llvmlite.ir as ir

from ..gpu import ptx as nvptx

from .common import _as_i32, _as_i64, shared_buffer, tile_order
from .inline_ptx import ELEM_BYTES, I32, PTX_IN, VOID, align_smem, asm_block, c32, declare_regs, ptx_block, scalar_copy, sreg, sw128_hi

BK = 64  # one 128-byte swizzle row of 2-byte elements
_ids = itertools.count()


@dataclass(frozen=True)
class AsmGemmConfig:
    tile_m: int = 128
    tile_n: int = 256
    num_warps: int = 8
    stages: int = 4
    in_dtype: str = "f16"
    out_dtype: str = "f16"
    wg_n: int = 0  # N of one wgmma instruction (0: tile_n); tile_n / wg_n of them a k16 step
    stmatrix: bool = True  # 16-bit C: fragments to shared memory with stmatrix.x4 (else st.shared.b32)
    # k16 steps written per pass of a loop over the k-tile's four (4: unrolled, no loop; 1 or 2: a
    # PTX loop, one group a pass): fewer wgmma written is less ptxas time, but each pass's fence
    # and group cost the GEMM (bench/RESULTS.md, 2026-12-01 session 7)
    k_unroll: int = 4

    def __post_init__(self) -> None:
        if self.in_dtype not in PTX_IN or self.out_dtype not in ELEM_BYTES:
            raise ValueError("in_dtype f16/bf16, out_dtype f16/bf16/f32")
        if self.num_warps % 4 or self.num_warps < 4 or self.tile_m != 16 * self.num_warps:
            raise ValueError("tile_m must be 64 per warpgroup of 4 warps")
        if self.tile_n % 64 or not 64 <= self.tile_n <= 256:
            raise ValueError("tile_n must be 64, 128, 192 or 256")
        if self.tile_n & (self.tile_n - 1) or self.tile_n > 2 * self.tile_m:
            raise ValueError("tile_n must be a power of two, at most 2 * tile_m (B's copies split over the block)")
        if self.wg_n and (self.tile_n % self.wg_n or self.wg_n % 64):
            raise ValueError("wg_n must divide tile_n, a multiple of 64")
        if self.k_unroll not in (1, 2, 4):
            raise ValueError("k_unroll must be 1, 2 or 4")
        if self.stages < 3:
            raise ValueError("stages must be at least 3 (a tile copied, one multiplied, one in wgmma)")

    @property
    def threads(self) -> int:
        return self.num_warps * 32

    @property
    def stage_bytes(self) -> int:
        return (self.tile_m + self.tile_n) * BK * 2

    @property
    def c_pitch(self) -> int:
        """Bytes per row of C's tile in shared memory: padded so that the 8 rows a warp's
        fragment store touches start in 8 distinct bank groups."""
        es = ELEM_BYTES[self.out_dtype]
        return self.tile_n * es + (16 if es == 2 else 32)

    def smem_bytes(self) -> int:
        return max(self.stages * self.stage_bytes, self.tile_m * self.c_pitch) + 1024


def smem_bytes_for(tile_m: int, tile_n: int, stages: int, out_dtype: str) -> int:
    es = ELEM_BYTES[out_dtype]
    return max(stages * (tile_m + tile_n) * BK * 2, tile_m * (tile_n * es + (16 if es == 2 else 32))) + 1024


def gemm_asm_text(cfg: AsmGemmConfig, uid: int = 0) -> str:
    """The PTX of one block's tile; operands $0.. as `emit_wgmma_asm` passes them."""
    BM, BN, S, T = cfg.tile_m, cfg.tile_n, cfg.stages, cfg.threads
    L = S - 2
    SB = cfg.stage_bytes
    a_bytes = BM * BK * 2
    ty = PTX_IN[cfg.in_dtype]
    out = cfg.out_dtype
    es = ELEM_BYTES[out]
    P = cfg.c_pitch
    nacc = BN // 2
    RA = T // 8  # A rows between one thread's chunks (8 chunks a row)
    cprB = BN // 8
    RB = T // cprB  # B rows between one thread's chunks
    nA, nB = BM * 8 // T, 8 * BN // T
    assert RB % 8 == 0 and RA % 8 == 0
    lg = lambda v: v.bit_length() - 1  # noqa: E731
    u = f"{uid}"
    lines: list[str] = []
    e = lines.append
    # operands: $0 a, $1 b, $2 c (u64 addresses), $3 lda, $4 ldb, $5 ldc (i64 elements),
    # $6 M, $7 N (C's extents), $8 K, $9 A's rows, $10 B's columns, $11 tile row, $12 tile col, $13 smem
    declare_regs(e, "w", 16, 8, 64, 24)
    e(f".reg .f32 %wf<{nacc}>;")
    r = lambda i: f"%wr{i}"  # noqa: E731
    d = lambda i: f"%wd{i}"  # noqa: E731
    # --- per-thread constants -------------------------------------------------------------
    tid, warp, lane, wg, m0, n0, s0 = (r(i) for i in range(7))
    e(f"mov.u32 {tid}, %tid.x;")
    e(f"shr.u32 {warp}, {tid}, 5;")
    e(f"and.b32 {lane}, {tid}, 31;")
    e(f"shr.u32 {wg}, {warp}, 2;")
    e(f"mul.lo.u32 {m0}, $11, {BM};")
    e(f"mul.lo.u32 {n0}, $12, {BN};")
    align_smem(e, s0, "$13")
    # 16-byte copies need 16-byte aligned rows: lda, ldb multiples of 8 and aligned bases
    e(f"or.b64 {d(0)}, $3, $4;")
    e(f"and.b64 {d(0)}, {d(0)}, 7;")
    e(f"or.b64 {d(1)}, $0, $1;")
    e(f"and.b64 {d(1)}, {d(1)}, 15;")
    e(f"or.b64 {d(0)}, {d(0)}, {d(1)};")
    e(f"setp.eq.u64 %wp0, {d(0)}, 0;")  # %wp0: the vector copy path
    # A: this thread copies rows rA0 + i*RA, chunk cA (of 8) of each: shared offset
    # sA + i*RA*128 (chunk cA ^ (row % 8)), global gA + i*strideA (+ 128 bytes a k-tile)
    cA, rA0, sA, aleft, kcA = (r(i) for i in range(7, 12))
    e(f"and.b32 {cA}, {tid}, 7;")
    e(f"shr.u32 {rA0}, {tid}, 3;")
    e(f"and.b32 {sA}, {rA0}, 7;")
    e(f"xor.b32 {sA}, {sA}, {cA};")
    e(f"shl.b32 {sA}, {sA}, 4;")
    e(f"mad.lo.u32 {sA}, {rA0}, 128, {sA};")
    e(f"sub.s32 {aleft}, $9, {m0};")
    e(f"sub.s32 {aleft}, {aleft}, {rA0};")  # chunk i's row is inside A when i*RA < aleft
    e(f"shl.b32 {kcA}, {cA}, 3;")
    e(f"sub.s32 {kcA}, $8, {kcA};")  # K - cA*8: elements left in the row at k0 = 0
    gA, strideA, gB, strideB, stepB = (d(i) for i in range(2, 7))
    e(f"add.u32 {r(12)}, {m0}, {rA0};")
    e(f"cvt.u64.u32 {gA}, {r(12)};")
    e(f"mul.lo.s64 {gA}, {gA}, $3;")
    e(f"mul.wide.u32 {d(7)}, {cA}, 8;")
    e(f"add.s64 {gA}, {gA}, {d(7)};")
    e(f"shl.b64 {gA}, {gA}, 1;")
    e(f"add.s64 {gA}, {gA}, $0;")
    e(f"mul.lo.s64 {strideA}, $3, {RA * 2};")
    # B (K x N, stored MN-major as BN/64 blocks of 64 k-rows x 128 bytes): rows rB0 + i*RB,
    # chunk cB (of BN/8); global gB + i*strideB (+ 64 rows a k-tile)
    cB, rB0, sB, bleft, kcB = (r(i) for i in range(13, 18))
    e(f"and.b32 {cB}, {tid}, {cprB - 1};")
    e(f"shr.u32 {rB0}, {tid}, {lg(cprB)};")
    e(f"and.b32 {sB}, {rB0}, 7;")
    e(f"and.b32 {r(18)}, {cB}, 7;")
    e(f"xor.b32 {sB}, {sB}, {r(18)};")
    e(f"shl.b32 {sB}, {sB}, 4;")
    e(f"mad.lo.u32 {sB}, {rB0}, 128, {sB};")
    e(f"shr.u32 {r(18)}, {cB}, 3;")
    e(f"mad.lo.u32 {sB}, {r(18)}, {BK * 128}, {sB};")
    e(f"add.u32 {sB}, {sB}, {a_bytes};")
    e(f"shl.b32 {r(18)}, {cB}, 3;")
    e(f"add.u32 {r(18)}, {r(18)}, {n0};")  # the chunk's first column
    e(f"sub.s32 {bleft}, $10, {r(18)};")  # columns left in B's row from there
    e(f"sub.s32 {kcB}, $8, {rB0};")  # chunk i's row is inside B when i*RB < kcB - k0
    e(f"cvt.u64.u32 {gB}, {rB0};")
    e(f"mul.lo.s64 {gB}, {gB}, $4;")
    e(f"cvt.u64.u32 {d(7)}, {r(18)};")
    e(f"add.s64 {gB}, {gB}, {d(7)};")
    e(f"shl.b64 {gB}, {gB}, 1;")
    e(f"add.s64 {gB}, {gB}, $1;")
    e(f"mul.lo.s64 {strideB}, $4, {RB * 2};")
    e(f"mul.lo.s64 {stepB}, $4, {BK * 2};")
    # B's column byte count is the same for every k-tile
    nbB = r(19)
    e(f"max.s32 {nbB}, {bleft}, 0;")
    e(f"min.s32 {nbB}, {nbB}, 8;")
    e(f"shl.b32 {nbB}, {nbB}, 1;")
    # the loop's state: j, the stages written / read (byte offsets), the trip count
    j, ws, rs, jend, k0 = (r(i) for i in range(20, 25))
    e(f"mov.u32 {j}, 0;")
    e(f"mov.u32 {ws}, 0;")
    e(f"mov.u32 {rs}, 0;")
    e(f"add.s32 {jend}, $8, {BK - 1};")
    e(f"shr.s32 {jend}, {jend}, 6;")
    e(f"max.s32 {jend}, {jend}, 1;")  # at least one k-tile (all zeros when K = 0): it initialises the accumulators
    e(f"add.s32 {jend}, {jend}, {L};")
    # no zero fill of the accumulators: the first k-tile's first wgmma of each part runs with
    # scale-d false (D = A B, D's old value unread); 128 movs fewer for ptxas
    e(f"setp.eq.u32 %wp13, {tid}, {tid};")  # scale-d true: accumulate
    # descriptor high bits: A K-major (8-row groups 1024 bytes apart), B MN-major (64-n blocks)
    hiA = sw128_hi(16)
    hiB = sw128_hi(BK * 128)
    e(f"AZW_LOOP_{u}:")
    e(f"setp.ge.s32 %wp1, {j}, {L};")  # %wp1: this iteration multiplies tile j - L
    e(f"@!%wp1 bra AZW_COPY_{u};")
    e(f"cp.async.wait_group {L - 1};")  # tile j - L has landed (this thread's copies) ...
    e("fence.proxy.async.shared::cta;")  # ... is visible to wgmma's async proxy ...
    e("bar.sync 0;")  # ... for every thread; every warpgroup's wgmma of tile j - L - 2 is done
    e(f"AZW_COPY_{u}:")
    st, la, kb, nbA = r(25), r(26), r(27), r(28)
    e(f"shl.b32 {k0}, {j}, 6;")
    e(f"add.u32 {st}, {s0}, {ws};")
    e(f"sub.s32 {la}, {kcA}, {k0};")  # A: elements left in the chunk's row
    e(f"sub.s32 {kb}, {kcB}, {k0};")  # B: rows left below the thread's first row
    e(f"max.s32 {nbA}, {la}, 0;")
    e(f"min.s32 {nbA}, {nbA}, 8;")
    e(f"shl.b32 {nbA}, {nbA}, 1;")
    e(f"setp.gt.s32 %wp2, {la}, 0;")
    e(f"setp.gt.s32 %wp3, {bleft}, 0;")
    e(f"@!%wp0 bra AZW_SCALAR_{u};")
    nb, sp = r(29), r(30)
    for i in range(nA):
        e(f"setp.gt.s32 %wp4, {aleft}, {i * RA};")
        e("and.pred %wp4, %wp4, %wp2;")
        e(f"selp.b32 {nb}, {nbA}, 0, %wp4;")
        e(f"add.s64 {d(9)}, {d(9)}, {strideA};" if i else f"mov.b64 {d(9)}, {gA};")
        e(f"selp.b64 {d(8)}, {d(9)}, $0, %wp4;")
        e(f"add.u32 {sp}, {st}, {sA};")
        e(f"cp.async.cg.shared.global [{sp}+{i * RA * 128}], [{d(8)}], 16, {nb};")
    for i in range(nB):
        e(f"setp.gt.s32 %wp4, {kb}, {i * RB};")
        e("and.pred %wp4, %wp4, %wp3;")
        e(f"selp.b32 {nb}, {nbB}, 0, %wp4;")
        e(f"add.s64 {d(9)}, {d(9)}, {strideB};" if i else f"mov.b64 {d(9)}, {gB};")
        e(f"selp.b64 {d(8)}, {d(9)}, $1, %wp4;")
        e(f"add.u32 {sp}, {st}, {sB};")
        e(f"cp.async.cg.shared.global [{sp}+{i * RB * 128}], [{d(8)}], 16, {nb};")
    e(f"bra.uni AZW_COPIED_{u};")
    e(f"AZW_SCALAR_{u}:")
    # the unaligned path: chunk by chunk, 2-byte loads where the element is inside
    scalar_copy(e, "AZW", f"A{u}", n=nA, g=gA, gstride=strideA, rowleft=aleft, rowstep=RA, colleft=la,
                dst=f"{st}", doff=sA, dstep=RA * 128, group=1)
    scalar_copy(e, "AZW", f"B{u}", n=nB, g=gB, gstride=strideB, rowleft=kb, rowstep=RB, colleft=bleft,
                dst=f"{st}", doff=sB, dstep=RB * 128, group=1)
    e(f"AZW_COPIED_{u}:")
    e("cp.async.commit_group;")
    e(f"add.s64 {gA}, {gA}, {BK * 2};")
    e(f"add.s64 {gB}, {gB}, {stepB};")
    e(f"add.u32 {ws}, {ws}, {SB};")
    e(f"setp.eq.u32 %wp4, {ws}, {S * SB};")
    e(f"selp.b32 {ws}, 0, {ws}, %wp4;")
    e(f"@!%wp1 bra AZW_NEXT_{u};")
    # multiply tile j - L from stage rs: 4 x wgmma m64nBNk16 over the 64-wide k-tile
    e(f"add.u32 {st}, {s0}, {rs};")
    e(f"mad.lo.u32 {r(31)}, {wg}, {64 * BK * 2}, {st};")
    e(f"and.b32 {r(31)}, {r(31)}, 262143;")
    e(f"shr.u32 {r(31)}, {r(31)}, 4;")
    e(f"cvt.u64.u32 {d(10)}, {r(31)};")
    e(f"or.b64 {d(10)}, {d(10)}, {hiA};")
    e(f"add.u32 {r(31)}, {st}, {a_bytes};")
    e(f"and.b32 {r(31)}, {r(31)}, 262143;")
    e(f"shr.u32 {r(31)}, {r(31)}, 4;")
    e(f"cvt.u64.u32 {d(11)}, {r(31)};")
    e(f"or.b64 {d(11)}, {d(11)}, {hiB};")
    e(f"setp.ne.s32 %wp5, {j}, {L};")  # scale-d of the k-tile's first k16 step: false for k-tile 0
    wn = cfg.wg_n or BN
    steps = BK // 16

    def step(scale_d: str) -> None:  # one k16 step: BN / wn wgmma, columns part*wn .. (B's 64-column blocks 8 KiB apart)
        for part in range(BN // wn):
            regs = ", ".join(f"%wf{i}" for i in range(part * wn // 2, (part + 1) * wn // 2))
            db = d(11)
            if part:
                e(f"add.s64 {d(12)}, {d(11)}, {part * wn // 64 * BK * 128 >> 4};")
                db = d(12)
            e(f"wgmma.mma_async.sync.aligned.m64n{wn}k16.f32.{ty}.{ty} {{{regs}}}, {d(10)}, {db}, {scale_d}, 1, 1, 0, 1;")

    ku = cfg.k_unroll
    if ku < steps:
        # the k16 steps as a PTX loop, one group committed a pass: ptxas's time grows with every
        # wgmma instruction of the module (its register tuples: ~9 ms each for m64n256 on the
        # dev VM), so one written wgmma instead of four is a third off its time -- but each
        # pass's fence and group cost the GEMM
        kk = r(63)
        e(f"mov.u32 {kk}, 0;")
        e(f"AZW_K_{u}:")
        e("wgmma.fence.sync.aligned;")  # (ptxas would insert it: the loop's back edge writes wgmma's operands)
        for k16 in range(ku):
            step("%wp5" if k16 == 0 else "%wp13")
            e(f"add.s64 {d(10)}, {d(10)}, 2;")  # 32 bytes further along K (16 elements)
            e(f"add.s64 {d(11)}, {d(11)}, {16 * 128 >> 4};")  # 16 k-rows further
            if k16 == 0:
                e("mov.pred %wp5, %wp13;")  # the next passes accumulate
        e("wgmma.commit_group.sync.aligned;")
        e(f"add.u32 {kk}, {kk}, 1;")
        e(f"setp.lt.u32 %wp14, {kk}, {steps // ku};")
        e(f"@%wp14 bra AZW_K_{u};")
        e(f"wgmma.wait_group.sync.aligned {steps // ku};")  # tile j - L - 1's groups are done, tile j - L's in flight
    else:
        e("wgmma.fence.sync.aligned;")
        for k16 in range(steps):
            if k16:
                e(f"add.s64 {d(10)}, {d(10)}, 2;")
                e(f"add.s64 {d(11)}, {d(11)}, {16 * 128 >> 4};")
            step("%wp5" if k16 == 0 else "%wp13")
        e("wgmma.commit_group.sync.aligned;")
        e("wgmma.wait_group.sync.aligned 1;")  # tile j - L - 1's wgmma is done
    e(f"add.u32 {rs}, {rs}, {SB};")
    e(f"setp.eq.u32 %wp4, {rs}, {S * SB};")
    e(f"selp.b32 {rs}, 0, {rs}, %wp4;")
    e(f"AZW_NEXT_{u}:")
    e(f"add.s32 {j}, {j}, 1;")
    e(f"setp.lt.s32 %wp4, {j}, {jend};")
    e(f"@%wp4 bra AZW_LOOP_{u};")
    e("wgmma.wait_group.sync.aligned 0;")  # the accumulators are final
    e("cp.async.wait_group 0;")  # the copies of tiles past K (all zero bytes) are done too
    e("bar.sync 0;")  # every thread is done with the pipeline's shared memory
    _epilogue(e, cfg, u, acc_names=[f"%wf{i}" for i in range(nacc)], tid=tid, warp=warp, lane=lane, wg=wg,
              m0=m0, n0=n0, s0=s0, r=r, d=d, P=P, es=es, T=T)
    e("bar.sync 0;")  # shared memory is the caller's again
    return ptx_block(lines)


def _epilogue(e, cfg: AsmGemmConfig, u: str, *, acc_names, tid, warp, lane, wg, m0, n0, s0, r, d, P, es, T) -> None:
    """Accumulators -> C's tile in shared memory (C's type) -> global in 16-byte row chunks."""
    BN = cfg.tile_n
    out = cfg.out_dtype
    # wgmma's D layout: warp w of a warpgroup holds rows 16 (w % 4) + lane / 4 (+ 8); n8 block j
    # in d[4j .. 4j+3], columns 8j + 2 (lane % 4) (+ 1)
    row, cth = r(32), r(33)
    e(f"and.b32 {row}, {warp}, 3;")
    e(f"shl.b32 {row}, {row}, 4;")
    e(f"mad.lo.u32 {row}, {wg}, 64, {row};")
    e(f"shr.u32 {r(34)}, {lane}, 2;")
    e(f"add.u32 {row}, {row}, {r(34)};")
    e(f"and.b32 {r(34)}, {lane}, 3;")
    e(f"mul.lo.u32 {r(34)}, {r(34)}, {2 * es};")
    e(f"mad.lo.u32 {cth}, {row}, {P}, {s0};")
    e(f"add.u32 {cth}, {cth}, {r(34)};")
    if out != "f32" and cfg.stmatrix:
        # stmatrix.x4: matrices (rows 0-7, n8 block j), (rows 8-15, j), (0-7, j+1), (8-15, j+1) of
        # the warp's 16 rows; lane i gives the address of row i % 8 of matrix i / 8
        sm = r(54)
        e(f"and.b32 {sm}, {warp}, 3;")
        e(f"shl.b32 {sm}, {sm}, 4;")
        e(f"mad.lo.u32 {sm}, {wg}, 64, {sm};")
        e(f"and.b32 {r(55)}, {lane}, 15;")  # 8 * ((lane >> 3) & 1) + (lane & 7)
        e(f"add.u32 {sm}, {sm}, {r(55)};")
        e(f"mad.lo.u32 {sm}, {sm}, {P}, {s0};")
        e(f"shr.u32 {r(55)}, {lane}, 4;")
        e(f"mad.lo.u32 {sm}, {r(55)}, 16, {sm};")
        for jj in range(0, BN // 8, 2):
            regs = []
            for j2 in (jj, jj + 1):
                for h in range(2):
                    v0, v1 = acc_names[4 * j2 + 2 * h], acc_names[4 * j2 + 2 * h + 1]
                    reg = r(56 + len(regs))
                    e(f"cvt.rn.{out}x2.f32 {reg}, {v1}, {v0};")
                    regs.append(reg)
            e(f"stmatrix.sync.aligned.m8n8.x4.shared.b16 [{sm}+{jj * 16}], {{{', '.join(regs)}}};")
    else:
        for jj in range(BN // 8):
            for h in range(2):
                v0, v1 = acc_names[4 * jj + 2 * h], acc_names[4 * jj + 2 * h + 1]
                off = h * 8 * P + jj * 8 * es
                if out == "f32":
                    e(f"st.shared.v2.f32 [{cth}+{off}], {{{v0}, {v1}}};")
                else:
                    e(f"cvt.rn.{out}x2.f32 {r(35)}, {v1}, {v0};")
                    e(f"st.shared.b32 [{cth}+{off}], {r(35)};")
    e("bar.sync 0;")
    cpr = BN * es // 16  # 16-byte chunks a row
    epc = 16 // es  # elements a chunk
    n = cfg.tile_m * cpr // T
    lg = lambda v: v.bit_length() - 1  # noqa: E731
    idx, crow, cch, src, left, it = r(36), r(37), r(38), r(39), r(47), r(48)
    # C's 16-byte stores need ldc * es and C's base 16-byte aligned
    e(f"mul.lo.s64 {d(13)}, $5, {es};")
    e(f"or.b64 {d(13)}, {d(13)}, $2;")
    e(f"and.b64 {d(13)}, {d(13)}, 15;")
    e(f"setp.eq.u64 %wp8, {d(13)}, 0;")
    e(f"mov.u32 {idx}, {tid};")
    e(f"mov.u32 {it}, 0;")
    e(f"AZW_OUT_{u}:")
    e(f"shr.u32 {crow}, {idx}, {lg(cpr)};")
    e(f"and.b32 {cch}, {idx}, {cpr - 1};")
    e(f"mad.lo.u32 {src}, {crow}, {P}, {s0};")
    e(f"shl.b32 {r(49)}, {cch}, 4;")
    e(f"add.u32 {src}, {src}, {r(49)};")
    e(f"ld.shared.v4.b32 {{%wr50, %wr51, %wr52, %wr53}}, [{src}];")
    e(f"add.u32 {crow}, {crow}, {m0};")  # C's row
    e(f"mad.lo.u32 {r(49)}, {cch}, {epc}, {n0};")  # C's first column of the chunk
    e(f"sub.s32 {left}, $7, {r(49)};")
    e(f"setp.lt.s32 %wp9, {crow}, $6;")
    e(f"cvt.u64.u32 {d(14)}, {crow};")
    e(f"mul.lo.s64 {d(14)}, {d(14)}, $5;")
    e(f"cvt.u64.u32 {d(15)}, {r(49)};")
    e(f"add.s64 {d(14)}, {d(14)}, {d(15)};")
    e(f"mul.lo.s64 {d(14)}, {d(14)}, {es};")
    e(f"add.s64 {d(14)}, {d(14)}, $2;")
    e(f"setp.ge.s32 %wp10, {left}, {epc};")
    e("and.pred %wp10, %wp10, %wp9;")
    e("and.pred %wp10, %wp10, %wp8;")
    e(f"@%wp10 st.global.v4.b32 [{d(14)}], {{%wr50, %wr51, %wr52, %wr53}};")
    e(f"@%wp10 bra AZW_OUTNEXT_{u};")
    # a chunk across C's edge (or C unaligned): element by element, a loop re-reading each from
    # shared memory (kept a loop, not unrolled: fewer instructions for ptxas)
    ek, es_, ea = "%wr60", "%wr61", "%wd17"
    bits = 8 * es
    e(f"mov.u32 {ek}, 0;")
    e(f"mov.u32 {es_}, {src};")
    e(f"mov.b64 {ea}, {d(14)};")
    e(f"AZW_OE_{u}:")
    e(f"setp.lt.s32 %wp11, {ek}, {left};")
    e("and.pred %wp11, %wp11, %wp9;")
    e(f"@%wp11 ld.shared.b{bits} {'%wr62' if es == 4 else '%wh0'}, [{es_}];")
    e(f"@%wp11 st.global.b{bits} [{ea}], {'%wr62' if es == 4 else '%wh0'};")
    e(f"add.u32 {es_}, {es_}, {es};")
    e(f"add.s64 {ea}, {ea}, {es};")
    e(f"add.u32 {ek}, {ek}, 1;")
    e(f"setp.lt.u32 %wp11, {ek}, {epc};")
    e(f"@%wp11 bra AZW_OE_{u};")
    e(f"AZW_OUTNEXT_{u}:")
    e(f"add.u32 {idx}, {idx}, {T};")
    e(f"add.u32 {it}, {it}, 1;")
    e(f"setp.lt.u32 %wp12, {it}, {n};")
    e(f"@%wp12 bra AZW_OUT_{u};")


def emit_wgmma_asm(builder: ir.IRBuilder, *, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, tile_row, tile_col,
                   smem, cfg: AsmGemmConfig, a_rows=None, b_cols=None) -> None:
    """Emit the block's C tile as one inline-PTX statement (see the module docstring).

    Pointers: global pointers or i64 addresses; sizes i32/i64 values (element counts, below
    2**31 - 4096); tile_row / tile_col i32; `smem` an addrspace(3) pointer or its i32 address."""
    b = builder
    a_rows = M if a_rows is None else a_rows
    b_cols = N if b_cols is None else b_cols
    s0 = b.ptrtoint(smem, ir.IntType(32)) if isinstance(smem.type, ir.PointerType) else _as_i32(b, smem)
    args = [_as_i64(b, a_ptr), _as_i64(b, b_ptr), _as_i64(b, c_ptr), _as_i64(b, lda), _as_i64(b, ldb), _as_i64(b, ldc),
            *(_as_i32(b, v) for v in (M, N, K, a_rows, b_cols, tile_row, tile_col)), s0]
    asm_block(b, VOID, gemm_asm_text(cfg, next(_ids)), ["l"] * 6 + ["r"] * 8, args)  # (convergent: bar.sync, .aligned wgmma)


def asm_gemm_module(cfg: AsmGemmConfig, name: str = "tc_gemm", grouped: bool = True) -> ir.Module:
    """A standalone kernel `name(A, B, C, M, N, K, lda, ldb, ldc)` (pointers global, the rest
    i32) over a 1-D grid of tiles in grouped order, with `cfg.smem_bytes()` of dynamic shared
    memory: for tests and the benchmark (runtime/tc_gemm.py loads it)."""
    mod = ir.Module(name=name)
    mod.triple = nvptx.TRIPLE
    mod.data_layout = nvptx.data_layout()
    gptr = ir.PointerType(addrspace=1)
    fn = ir.Function(mod, ir.FunctionType(VOID, [gptr, gptr, gptr] + [I32] * 6), name)
    fn.calling_convention = "ptx_kernel"
    set.add(fn.attributes, f'"nvvm.reqntid"="{cfg.threads},1,1"')
    set.add(fn.attributes, '"nvvm.minctasm"="1"')
    a, bp, c, M, N, K, lda, ldb, ldc = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    smem = shared_buffer(mod)
    if grouped:
        row, col = tile_order(b, M, N, cfg.tile_m, cfg.tile_n)
    else:  # row-major tile order
        tiles_n = b.udiv(b.add(N, c32(cfg.tile_n - 1)), c32(cfg.tile_n))
        pid = sreg(b, "ctaid.x")
        row, col = b.udiv(pid, tiles_n), b.urem(pid, tiles_n)
    emit_wgmma_asm(b, a_ptr=a, b_ptr=bp, c_ptr=c, M=M, N=N, K=K, lda=lda, ldb=ldb, ldc=ldc, tile_row=row,
                   tile_col=col, smem=smem, cfg=cfg)
    b.ret_void()
    return mod


def asm_gemm_ptx(cfg: AsmGemmConfig, name: str = "tc_gemm", opt: int = 3, grouped: bool = True) -> str:
    return nvptx.emit_ptx(str(asm_gemm_module(cfg, name, grouped)), name, "sm_90a", opt)[1]

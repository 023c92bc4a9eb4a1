"""Hopper's wgmma for a `TileMma` (codegen/tile/mma.py): the mainloop as ONE inline-PTX block
whose text this module writes (loops stay PTX loops, so LLVM and ptxas see ~200 lines, not an
unrolled pipeline), with the accumulators handed in and back as the block's tied operands: the
registers stay in LLVM's hands for whatever the kernel does with them next (an epilogue, another
matmul, a store), in the `MmaLayout` (warps, 1) that wgmma's m64nNk16 D fragments have.

The block (the codegen/tensorcore/wgmma_asm.py GEMM's mainloop, generalised to operands described by
operations): iteration j of one loop multiplies k-tile j - L (L = S - 1) with four
`wgmma.mma_async.m64nNk16` per warpgroup from 128-byte-swizzled descriptors, one group left in
flight, and copies k-tile j (64 wide: one 128-byte swizzle row) of A (K-major, M x 64) and B
(MN-major, 64 x N, 64-column blocks) into stage j % S with 16-byte `cp.async` (whole chunks where
none straddles an edge, else the byte count clamped at the edges; predicated 2-byte loads where
a row or a tile's first column is not 16-byte aligned).  `ANODIZE_TILE_LOAD_AHEAD=0` copies
first and multiplies k-tile j - (S - 2); `ANODIZE_TILE_WHOLE_CHUNKS=0` clamps every chunk.  An operand's rows past its slice (or before it) and K past the clamped range read as
zero; the loop runs `ceil(K / 64)` k-tiles (none when K = 0: the accumulators come back as they
went in).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import llvmlite.ir as llir

from ..tensorcore.common import shared_buffer
from ..tensorcore.inline_ptx import F32, I32, I64, align_smem, asm_block, c32, c64, declare_regs, ptx_block, scalar_copy, sw128_hi
from .layout import MmaLayout

__all__ = ["emit_wgmma", "load_ahead", "mainloop_text", "proxy_fence", "smem_bytes", "two_blocks_stages", "whole_chunks"]

BK = 64
_ids = itertools.count()


def load_ahead() -> bool:
    """The mainloop multiplies before it copies, keeping S - 1 k-tiles of copies in flight
    instead of S - 2 (Triton's order; `mainloop_text`).  The default (with `whole_chunks` and the
    staged epilogue, the H200 took the 128 x 256 GEMM from 0.325 to 0.234 ms);
    `ANODIZE_TILE_LOAD_AHEAD=0` (codegen/toolchain.py) restores the copy-first order."""
    return os.environ.get("ANODIZE_TILE_LOAD_AHEAD", "1") != "0"


def whole_chunks() -> bool:
    """A copy path of whole 16-byte chunks (`ignore-src` for one outside), taken when K and every
    MN-major operand's extent past its origin are multiples of 8, so no chunk straddles an edge
    (`_Op.copy`); the clamped path stays for the rest.  The default (measured on the H200 with
    `load_ahead`); `ANODIZE_TILE_WHOLE_CHUNKS=0` (codegen/toolchain.py) leaves only the clamped path."""
    return os.environ.get("ANODIZE_TILE_WHOLE_CHUNKS", "1") != "0"


def proxy_fence() -> bool:
    """False under `ANODIZE_TILE_UNSOUND_NO_PROXY_FENCE=1`: a MEASUREMENT switch (codegen/toolchain.py),
    never a default -- the mainloop then omits the `fence.proxy.async` between cp.async's
    generic-proxy writes and wgmma's async-proxy reads that the PTX memory model asks for (Triton
    omits it; ptxas makes it `MEMBAR.ALL.CTA` + `FENCE.VIEW.ASYNC.S` every k-tile).  What it
    costs says whether copies in the async proxy (TMA, no fence) are the next step."""
    return os.environ.get("ANODIZE_TILE_UNSOUND_NO_PROXY_FENCE", "") != "1"


def smem_bytes(lay: MmaLayout, stages: int) -> int:
    """The ring (stages of A's M x 64 and B's 64 x N) plus the slack aligning it to 1024 bytes."""
    return stages * (lay.m + lay.n) * BK * 2 + 1024


def two_blocks_stages(lay: MmaLayout, threads: int, block_limit: int, static: int) -> int | None:
    """The deepest ring (4 or 3 stages) with which two blocks share an SM -- each block's shared
    bytes (the ring, `static` bytes of the kernel's own tiles, the 1 KiB the driver reserves a
    block) within half of the SM's (`block_limit` + 1 KiB) and the accumulators plus ~40
    registers within half of the SM's 65,536 -- so one block's prologue and epilogue run beside
    the other's mainloop; None where no such ring exists (128 x 128 over 4 warps: 3 stages,
    97 KiB, 2 blocks; 128 x 256 over 8 warps: None).  The default since the H100 measured it
    (stacked 128 x 128 over 4 warps at 4096^3: 0.295 -> 0.237 ms; bench/RESULTS.md, session 16);
    `ANODIZE_TILE_TWO_BLOCKS=0` (codegen/toolchain.py) is the way back to the deepest ring that
    fits one block."""
    if os.environ.get("ANODIZE_TILE_TWO_BLOCKS", "1") == "0" or lay.count + 40 > 65536 // (2 * threads):
        return None
    half = (block_limit + 1024) // 2 - 1024 - static
    return next((st for st in (4, 3) if smem_bytes(lay, st) <= half), None)


class _Op:
    """One operand's copies in the mainloop text: K-major (rows along M or N, 64 K elements a
    128-byte row, 16-byte chunk c of row r at chunk c ^ (r % 8): A untransposed, B transposed)
    or MN-major (64 K rows, 64-column blocks of 128-byte rows: B untransposed, A transposed).
    `args`: the PTX operands (slice address, leading dimension, origin along M/N, origin along
    K, extent along M/N); `rb`/`db`: the first b32 / b64 registers it may use (8 and 3)."""

    def __init__(self, e: Any, tag: str, kmajor: bool, width: int, T: int, sbase: int, args: tuple[str, ...], rb: int,
                 db: int) -> None:
        self.e, self.tag, self.kmajor, self.width, self.T, self.sbase = e, tag, kmajor, width, T, sbase
        self.ptr, self.ld, self.mn0, self.k0, self.lim = args
        self.r = [f"%wr{rb + i}" for i in range(8)]
        self.g, self.stride, self.step = (f"%wd{db + i}" for i in range(3))
        if kmajor:
            self.cpr, self.rstep = 8, T // 8
        else:
            self.cpr = width // 8
            self.rstep = T // self.cpr
        self.n = width * 8 // T
        assert self.rstep % 8 == 0 and self.n * T == width * 8

    def setup(self, tid: str, K: str) -> None:
        e, r = self.e, self.r
        c, r0, soff, row, left = r[0], r[1], r[2], r[3], r[4]
        lg = self.cpr.bit_length() - 1
        e(f"and.b32 {c}, {tid}, {self.cpr - 1};")
        e(f"shr.u32 {r0}, {tid}, {lg};")
        e(f"and.b32 {soff}, {r0}, 7;")
        e(f"and.b32 {r[5]}, {c}, 7;")
        e(f"xor.b32 {soff}, {soff}, {r[5]};")
        e(f"shl.b32 {soff}, {soff}, 4;")
        e(f"mad.lo.u32 {soff}, {r0}, 128, {soff};")
        if not self.kmajor:
            e(f"shr.u32 {r[5]}, {c}, 3;")
            e(f"mad.lo.u32 {soff}, {r[5]}, {BK * 128}, {soff};")
        e(f"add.u32 {soff}, {soff}, {self.sbase};")
        if self.kmajor:  # row: M/N (inside when unsigned below the extent); K left in the chunk's row
            e(f"add.s32 {row}, {self.mn0}, {r0};")
            e(f"shl.b32 {left}, {c}, 3;")
            e(f"sub.s32 {left}, {K}, {left};")
            e(f"cvt.s64.s32 {self.g}, {row};")
            e(f"mul.lo.s64 {self.g}, {self.g}, {self.ld};")
            e(f"shl.b32 {r[5]}, {c}, 3;")
            e(f"add.s32 {r[5]}, {r[5]}, {self.k0};")
            e(f"cvt.s64.s32 %wd20, {r[5]};")
            e(f"add.s64 {self.g}, {self.g}, %wd20;")
            e(f"mov.b64 {self.step}, {BK * 2};")
        else:  # row: K (inside while below K); the chunk's columns left in the row (none before column 0)
            e(f"shl.b32 {r[5]}, {c}, 3;")
            e(f"add.s32 {r[5]}, {r[5]}, {self.mn0};")
            e(f"sub.s32 {left}, {self.lim}, {r[5]};")
            e(f"setp.lt.s32 %wp4, {r[5]}, 0;")
            e(f"selp.b32 {left}, 0, {left}, %wp4;")
            e(f"sub.s32 {row}, {K}, {r0};")
            e(f"add.s32 {r[6]}, {self.k0}, {r0};")
            e(f"cvt.s64.s32 {self.g}, {r[6]};")
            e(f"mul.lo.s64 {self.g}, {self.g}, {self.ld};")
            e(f"cvt.s64.s32 %wd20, {r[5]};")
            e(f"add.s64 {self.g}, {self.g}, %wd20;")
            e(f"mul.lo.s64 {self.step}, {self.ld}, {BK * 2};")
            e(f"max.s32 {r[7]}, {left}, 0;")  # the chunk's bytes (the same every k-tile)
            e(f"min.s32 {r[7]}, {r[7]}, 8;")
            e(f"shl.b32 {r[7]}, {r[7]}, 1;")
        e(f"shl.b64 {self.g}, {self.g}, 1;")
        e(f"add.s64 {self.g}, {self.g}, {self.ptr};")
        e(f"mul.lo.s64 {self.stride}, {self.ld}, {self.rstep * 2};")

    def copy(self, st: str, k0: str, whole: bool = False) -> None:
        """k-tile k0 (elements past the origin) into the stage at `st`: 16-byte cp.async, the byte
        count clamped at the edges and a masked chunk's address the slice's base.  `whole`: every
        chunk is wholly inside or wholly outside (`emit_wgmma`'s flag 2), where the clamped count
        is 16 or 0: the copy is a whole one with `ignore-src` set for a chunk outside (PTX: the
        source "ignored completely", zeros written), no byte count and no address to select --
        ptxas copies without the partial chunk's zero-fill arithmetic."""
        e, r = self.e, self.r
        row, left = r[3], r[4]
        la, nb = "%wr26", "%wr28"
        if whole:  # %wp2 / %wp4: the chunk is OUT (along K / this chunk)
            if self.kmajor:
                e(f"sub.s32 {la}, {left}, {k0};")
                e(f"setp.le.s32 %wp2, {la}, 0;")
            else:
                e(f"sub.s32 {la}, {row}, {k0};")
                e(f"setp.le.s32 %wp2, {left}, 0;")
            for i in range(self.n):
                if self.kmajor:
                    e(f"add.s32 %wr31, {row}, {i * self.rstep};")
                    e(f"setp.ge.u32 %wp4, %wr31, {self.lim};")
                else:
                    e(f"setp.le.s32 %wp4, {la}, {i * self.rstep};")
                e("or.pred %wp4, %wp4, %wp2;")
                e(f"add.s64 %wd9, %wd9, {self.stride};" if i else f"mov.b64 %wd9, {self.g};")
                e(f"add.u32 %wr30, {st}, {r[2]};")
                e(f"cp.async.cg.shared.global [%wr30+{i * self.rstep * 128}], [%wd9], 16, %wp4;")
            return
        if self.kmajor:
            e(f"sub.s32 {la}, {left}, {k0};")
            e(f"max.s32 {nb}, {la}, 0;")
            e(f"min.s32 {nb}, {nb}, 8;")
            e(f"shl.b32 {nb}, {nb}, 1;")
            e(f"setp.gt.s32 %wp2, {la}, 0;")
        else:
            e(f"sub.s32 {la}, {row}, {k0};")  # K rows left below the thread's first
            e(f"setp.gt.s32 %wp2, {left}, 0;")
        for i in range(self.n):
            if self.kmajor:
                e(f"add.s32 %wr31, {row}, {i * self.rstep};")
                e(f"setp.lt.u32 %wp4, %wr31, {self.lim};")
                e("and.pred %wp4, %wp4, %wp2;")
                e(f"selp.b32 %wr29, {nb}, 0, %wp4;")
            else:
                e(f"setp.gt.s32 %wp4, {la}, {i * self.rstep};")
                e("and.pred %wp4, %wp4, %wp2;")
                e(f"selp.b32 %wr29, {r[7]}, 0, %wp4;")
            e(f"add.s64 %wd9, %wd9, {self.stride};" if i else f"mov.b64 %wd9, {self.g};")
            e(f"selp.b64 %wd8, %wd9, {self.ptr}, %wp4;")
            e(f"add.u32 %wr30, {st}, {r[2]};")
            e(f"cp.async.cg.shared.global [%wr30+{i * self.rstep * 128}], [%wd8], 16, %wr29;")

    def copy_scalar(self, st: str, k0: str) -> None:
        r = self.r
        if self.kmajor:
            self.e(f"sub.s32 %wr26, {r[4]}, {k0};")
            scalar_copy(self.e, "AZM", self.tag, n=self.n, g=self.g, gstride=self.stride, rows=(r[3], self.lim),
                        rowstep=self.rstep, colleft="%wr26", dst=st, doff=r[2], dstep=self.rstep * 128)
        else:
            self.e(f"sub.s32 %wr27, {r[3]}, {k0};")
            scalar_copy(self.e, "AZM", self.tag, n=self.n, g=self.g, gstride=self.stride, rows=None, rowleft="%wr27",
                        rowstep=self.rstep, colleft=r[4], dst=st, doff=r[2], dstep=self.rstep * 128)

    def advance(self) -> None:
        self.e(f"add.s64 {self.g}, {self.g}, {self.step};")

    def desc_hi(self) -> int:
        """The descriptor's high bits: leading byte offset (the 64-column block stride of an
        MN-major tile; unused K-major), stride byte offset 1024 (8 rows), 128-byte swizzle."""
        return sw128_hi(16 if self.kmajor else BK * 128)

    def k16_step(self) -> int:
        """Descriptor increment (16-byte units) for 16 K: 32 bytes along a K-major row, 16 rows MN-major."""
        return 2 if self.kmajor else (16 * 128) >> 4


def mainloop_text(lay: MmaLayout, stages: int, ty: str, uid: int, a_trans: bool = False, b_trans: bool = False, *,
                  ahead: bool = False, whole: bool = False, fence: bool = True) -> str:
    """The PTX of the mainloop; operands as `emit_wgmma` passes them: $0 .. $(n-1) the
    accumulators (tied in and out), then at `base = 2 n`: per operand (A, then B) its slice
    address (u64), leading dimension (i64), origin along M (N), origin along K, extent along M
    (N); then K (the clamped length), the copy path (0: 2-byte loads, 1: 16-byte copies, 2:
    16-byte copies of whole chunks), smem.  A is K-major unless `a_trans` (MN-major, wgmma's
    transpose bit), B MN-major unless `b_trans` (K-major).

    `ahead` (`load_ahead()`): iteration j first multiplies k-tile j - L (L = S - 1), waits for
    k-tile j - L - 1's wgmma and, after a second barrier, copies k-tile j into that tile's stage
    (S - 1 k-tiles of copies in flight where the copy-first order, copies before the wgmma, keeps
    S - 2); the last L iterations commit empty groups instead of copying zero bytes.  `whole`
    (`whole_chunks()`): a third copy path, taken on flag 2, whose chunks are whole (`_Op.copy`).
    `fence` False: no proxy fence (`proxy_fence()`, a measurement switch only)."""
    BM, BN, S = lay.m, lay.n, stages
    T = lay.wm * 32
    L = S - 1 if ahead else S - 2
    SB = (BM + BN) * BK * 2
    a_bytes = BM * BK * 2
    nacc = lay.count
    mt = lay.mt if lay.stacked else 1  # m64 blocks a warpgroup
    assert nacc == mt * BN // 2
    base = 2 * nacc
    ops = [f"${base + i}" for i in range(13)]
    K, vec, smem = ops[10], ops[11], ops[12]
    u = f"{uid}"
    lines: list[str] = []
    e = lines.append
    declare_regs(e, "w", 18, 8, 64, 24)
    tid, warp, wg, s0 = "%wr0", "%wr1", "%wr3", "%wr6"
    e(f"mov.u32 {tid}, %tid.x;")
    e(f"shr.u32 {warp}, {tid}, 5;")
    e(f"shr.u32 {wg}, {warp}, 2;")
    align_smem(e, s0, smem)
    e(f"and.b32 %wr33, {vec}, 3;")
    e("setp.ne.u32 %wp0, %wr33, 0;")  # %wp0: the 16-byte copy path
    if whole:
        e("setp.eq.u32 %wp14, %wr33, 2;")  # %wp14: ... of whole chunks
    e(f"and.b32 %wr33, {vec}, 4;")
    e("setp.ne.u32 %wp16, %wr33, 0;")  # on the 2-byte path: A's rows are aligned after all (16-byte copies)
    e(f"and.b32 %wr33, {vec}, 8;")
    e("setp.ne.u32 %wp17, %wr33, 0;")  # ... B's
    A = _Op(e, f"A{u}", not a_trans, BM, T, 0, tuple(ops[0:5]), 8, 2)
    B = _Op(e, f"B{u}", b_trans, BN, T, a_bytes, tuple(ops[5:10]), 48, 5)
    A.setup(tid, K)
    B.setup(tid, K)
    j, ws, rs, jend, k0, st = "%wr20", "%wr21", "%wr22", "%wr23", "%wr24", "%wr25"
    e(f"mov.u32 {j}, 0;")
    e(f"mov.u32 {ws}, 0;")
    e(f"mov.u32 {rs}, 0;")
    e(f"add.s32 {jend}, {K}, {BK - 1};")
    e(f"shr.s32 {jend}, {jend}, 6;")
    if ahead:
        e(f"mov.u32 %wr32, {jend};")  # the k-tiles: iterations past them copy nothing (an empty group)
    e(f"add.s32 {jend}, {jend}, {L};")
    e(f"setp.eq.u32 %wp13, {tid}, {tid};")  # scale-d true: accumulate onto what came in

    def multiply() -> None:  # k-tile j - L from the stage at rs, one wgmma group left in flight
        e(f"add.u32 {st}, {s0}, {rs};")
        # A: this warpgroup's 64 rows a block (K-major: 64 rows of 128 bytes; MN-major: a 64-column block)
        e(f"mad.lo.u32 %wr31, {wg}, {mt * 64 * BK * 2}, {st};")
        e("and.b32 %wr31, %wr31, 262143;")
        e("shr.u32 %wr31, %wr31, 4;")
        e("cvt.u64.u32 %wd10, %wr31;")
        e(f"or.b64 %wd10, %wd10, {A.desc_hi()};")
        e(f"add.u32 %wr31, {st}, {a_bytes};")
        e("and.b32 %wr31, %wr31, 262143;")
        e("shr.u32 %wr31, %wr31, 4;")
        e("cvt.u64.u32 %wd11, %wr31;")
        e(f"or.b64 %wd11, %wd11, {B.desc_hi()};")
        e("wgmma.fence.sync.aligned;")
        for k16 in range(BK // 16):
            if k16:
                e(f"add.s64 %wd10, %wd10, {A.k16_step()};")
                e(f"add.s64 %wd11, %wd11, {B.k16_step()};")
            for mi in range(mt):  # block mi: accumulators mi BN/2 .., A's rows 64 mi further (8 KiB)
                regs = ", ".join(f"${i}" for i in range(mi * BN // 2, (mi + 1) * BN // 2))
                da = "%wd10"
                if mi:
                    e(f"add.s64 %wd12, %wd10, {mi * 64 * BK * 2 >> 4};")
                    da = "%wd12"
                e(f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.{ty}.{ty} {{{regs}}}, {da}, %wd11, %wp13, 1, 1, "
                  f"{1 if a_trans else 0}, {0 if b_trans else 1};")
        e("wgmma.commit_group.sync.aligned;")
        e("wgmma.wait_group.sync.aligned 1;")
        e(f"add.u32 {rs}, {rs}, {SB};")
        e(f"setp.eq.u32 %wp4, {rs}, {S * SB};")
        e(f"selp.b32 {rs}, 0, {rs}, %wp4;")

    e(f"AZM_LOOP_{u}:")
    e(f"setp.ge.s32 %wp1, {j}, {L};")
    e(f"@!%wp1 bra AZM_COPY_{u};")
    e(f"cp.async.wait_group {L - 1};")
    if fence:
        e("fence.proxy.async.shared::cta;")
    e("bar.sync 0;")
    if ahead:
        multiply()
        e("bar.sync 0;")  # every warpgroup's wgmma of k-tile j - L - 1 is done: its stage is free
    e(f"AZM_COPY_{u}:")
    e(f"shl.b32 {k0}, {j}, 6;")
    e(f"add.u32 {st}, {s0}, {ws};")
    if ahead:
        e(f"setp.ge.s32 %wp15, {j}, %wr32;")
        e(f"@%wp15 bra AZM_COPIED_{u};")
    e(f"@!%wp0 bra AZM_SCALAR_{u};")
    if whole:
        e(f"@%wp14 bra AZM_WHOLE_{u};")
    A.copy(st, k0)
    B.copy(st, k0)
    e(f"bra.uni AZM_COPIED_{u};")
    if whole:
        e(f"AZM_WHOLE_{u}:")
        A.copy(st, k0, whole=True)
        B.copy(st, k0, whole=True)
        e(f"bra.uni AZM_COPIED_{u};")
    e(f"AZM_SCALAR_{u}:")  # each operand on its own path: 16-byte copies where its rows are aligned
    for op, p in ((A, "%wp16"), (B, "%wp17")):
        e(f"@!{p} bra AZM_SC{op.tag};")
        op.copy(st, k0)
        e(f"bra.uni AZM_SD{op.tag};")
        e(f"AZM_SC{op.tag}:")
        op.copy_scalar(st, k0)
        e(f"AZM_SD{op.tag}:")
    e(f"AZM_COPIED_{u}:")
    e("cp.async.commit_group;")
    A.advance()
    B.advance()
    e(f"add.u32 {ws}, {ws}, {SB};")
    e(f"setp.eq.u32 %wp4, {ws}, {S * SB};")
    e(f"selp.b32 {ws}, 0, {ws}, %wp4;")
    if not ahead:
        e(f"@!%wp1 bra AZM_NEXT_{u};")
        multiply()
        e(f"AZM_NEXT_{u}:")
    e(f"add.s32 {j}, {j}, 1;")
    e(f"setp.lt.s32 %wp4, {j}, {jend};")
    e(f"@%wp4 bra AZM_LOOP_{u};")
    e("wgmma.wait_group.sync.aligned 0;")
    e("cp.async.wait_group 0;")
    e("bar.sync 0;")  # the ring is free again
    return ptx_block(lines)


def emit_wgmma(lw: Any, s: Any, acc: list[llir.Value], ops: list[Any], origins: list[list[llir.Value]],
               K: llir.Value) -> list[llir.Value]:
    """The mainloop of `s` (the (warps, 1) layout) on wgmma; returns the accumulator's registers
    after it.  An MN-major tile (B, or a transposed A) starting before column 0 but reaching past
    it records the statement's fault (its copies clamp whole 16-byte chunks)."""
    b = lw.b
    module = lw.module
    args: list[llir.Value] = []
    bad = None
    for (sv, dims, _, kax), origin, op, width in zip(ops, origins, (s.a, s.b), (s.layout.m, s.layout.n), strict=True):
        mn0, k0 = origin[1 - kax], origin[kax]
        if kax == 0:  # MN-major: a tile straddling column 0
            straddle = b.and_(b.icmp_signed("<", mn0, c32(0)), b.icmp_signed(">", b.add(mn0, c32(width)), c32(0)))
            bad = straddle if bad is None else b.or_(bad, straddle)
        args += [b.ptrtoint(sv.ptr, I64), dims[1], mn0, k0, b.trunc(dims[1 - kax], I32)]
    if bad is not None:
        with b.if_then(bad, likely=False):
            lw.fault(s.site, c64(0), c64(0))
    (_, da, _, _), (_, db, _, _) = ops
    a_g, b_g = args[0], args[5]
    # each operand's rows are 16-byte aligned when its leading dimension, address (in elements) and
    # first column are multiples of 8: flag bit 2 (A) and 3 (B); both: the 16-byte path (1)
    each = [b.icmp_unsigned("==", b.and_(b.or_(b.or_(ld[1], b.lshr(g, c64(1))), b.zext(org[1], I64)), c64(7)), c64(0))
            for ld, g, org in ((da, a_g, origins[0]), (db, b_g, origins[1]))]
    both = b.and_(each[0], each[1])
    vec = b.select(both, c32(1), b.or_(b.shl(b.zext(each[0], I32), c32(2)), b.shl(b.zext(each[1], I32), c32(3))))
    whole = whole_chunks()
    if whole:  # flag 2: no chunk straddles K's end or an MN-major operand's edge (its origin is a multiple of 8 here)
        edges = K
        for i, kax in ((0, ops[0][3]), (5, ops[1][3])):
            if kax == 0:  # MN-major: the extent along M (N) past the origin
                edges = b.or_(edges, b.sub(args[i + 4], args[i + 2]))
        even = b.icmp_unsigned("==", b.and_(edges, c32(7)), c32(0))
        vec = b.add(vec, b.zext(b.and_(both, even), I32))
    gv = module.globals.get("__az_tc_smem") or shared_buffer(module)
    args += [K, vec, b.ptrtoint(gv, I32)]
    n = len(acc)
    text = mainloop_text(s.layout, s.stages, s.elem, next(_ids), s.a.trans, s.b.trans, ahead=load_ahead(), whole=whole,
                         fence=proxy_fence())
    cons = ["=f"] * n + [str(i) for i in range(n)] + ["l", "l", "r", "r", "r"] * 2 + ["r"] * 3
    res = asm_block(b, llir.LiteralStructType([F32] * n), text, cons, [*acc, *args])
    return [b.extract_value(res, i) for i in range(n)]

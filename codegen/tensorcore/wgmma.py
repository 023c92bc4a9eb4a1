"""Hopper (sm_90a) tensor-core GEMM tile: `wgmma.mma_async` from shared memory.

The same contract as codegen/tensorcore/gemm.py's `emit_gemm_tile` (C = A @ B or A @ B.T, f16/bf16 in,
f32 accumulate, f16/bf16/f32 out, masked edges), for a block of `num_warps` warps = num_warps/4
warpgroups, each computing 64 rows x tile_n of the tile:

- global -> shared: the same `cp.async.cg` copies (gemm._Tile), into the layouts wgmma reads
  with the 128-byte swizzle: A (and an N x K B) K-major, 128-byte rows (tile_k = 64),
  16-byte chunk c of row r at chunk c ^ (r % 8); a K x N B MN-major, as tile_n/64 blocks of
  64 rows(k) x 64 n, same swizzle, read with the transpose bit;
- a ring of `stages` buffers, `stages - 2` tiles in flight ahead of the one being multiplied, and
  one k-tile of wgmma in flight behind it (`wgmma.wait_group 1`): a buffer is refilled only after
  the barrier that follows every warpgroup's wait for the wgmma that read it;
- `fence.proxy.async.shared::cta` after each thread's copies land and before the barrier, since
  wgmma reads shared memory through the async proxy.

The shared base is rounded up to 1024 bytes (the swizzle pattern's period): `smem_bytes()`
includes that slack.
"""

from __future__ import annotations

from anodize.language.records import dataclass

import llvmlite.ir as ir

from ..gpu import ptx as nvptx

from . import inline_ptx as P
from .common import _as_i32, _as_i64, shared_buffer, store_fragments, tile_order
from .gemm import _Tile
from .inline_ptx import F32, I32, c32, c64


@dataclass(frozen=True)
class WgmmaConfig:
    tile_m: int = 128
    tile_n: int = 256
    num_warps: int = 8
    stages: int = 4
    in_dtype: str = "f16"
    out_dtype: str = "f32"
    b_trans: bool = False
    tile_k: int = 64  # one 128-byte swizzle row of 2-byte elements
    min_blocks: int = 1  # blocks per SM ptxas must fit (2 caps registers at 128 a thread)
    in_flight: int = 1  # k-tiles of wgmma left running behind the one issued (0 or 1)

    def __post_init__(self) -> None:
        if self.in_dtype not in P.PTX_IN or self.out_dtype not in P.ELEM_BYTES:
            raise ValueError("in_dtype f16/bf16, out_dtype f16/bf16/f32")
        if self.tile_k != 64:
            raise ValueError("tile_k is 64 (128-byte swizzled rows)")
        if self.num_warps % 4 or self.tile_m != 64 * (self.num_warps // 4):
            raise ValueError("tile_m must be 64 per warpgroup of 4 warps")
        if self.tile_n % 64 or not 64 <= self.tile_n <= 256:
            raise ValueError("tile_n must be 64, 128, 192 or 256")
        if self.in_flight not in (0, 1) or self.stages < 2 + self.in_flight:
            raise ValueError("stages must be at least 2 + in_flight (a tile copied, one multiplied, in_flight in wgmma)")
        t = self.threads
        if (self.tile_m * 8) % t or (self.tile_n * 8) % t:
            raise ValueError("tiles do not split into 16-byte copies over the block")

    @property
    def threads(self) -> int:
        return self.num_warps * 32

    def stage_bytes(self) -> int:
        return (self.tile_m + self.tile_n) * self.tile_k * 2

    def smem_bytes(self) -> int:
        return self.stages * self.stage_bytes() + 1024


def wgmma_smem_bytes(*, tile_m: int = 128, tile_n: int = 256, stages: int = 4, **_: object) -> int:
    """Shared bytes `emit_wgmma_tile` needs (2-byte operands, tile_k 64, 1024 bytes of alignment slack)."""
    return stages * (tile_m + tile_n) * 64 * 2 + 1024


def emit_wgmma_tile(builder: ir.IRBuilder, module: ir.Module, *, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc,
                    tile_row, tile_col, smem, cfg: WgmmaConfig, aligned: bool | None = None) -> None:
    """Emit one block's C tile with wgmma (see the module docstring); every thread must reach it."""
    b = builder
    assert b.module is module
    S, L = cfg.stages, cfg.stages - 1 - cfg.in_flight  # L: tiles copied ahead of the one multiplied
    BM, BN, BK = cfg.tile_m, cfg.tile_n, cfg.tile_k
    t = _Tile(b, cfg, aligned)  # only its copy methods and cfg.threads are used
    a_g, b_g, c_g = _as_i64(b, a_ptr), _as_i64(b, b_ptr), _as_i64(b, c_ptr)
    M, N, K = _as_i32(b, M), _as_i32(b, N), _as_i32(b, K)
    lda, ldb, ldc = _as_i64(b, lda), _as_i64(b, ldb), _as_i64(b, ldc)
    tile_row, tile_col = _as_i32(b, tile_row), _as_i32(b, tile_col)
    s0 = b.ptrtoint(smem, I32) if isinstance(smem.type, ir.PointerType) else _as_i32(b, smem)
    s0 = P.round_up_1024(b, s0)
    t.tid = P.sreg(b, "tid.x")
    warp = b.lshr(t.tid, c32(5))
    lane = b.and_(t.tid, c32(31))
    wg = b.lshr(warp, c32(2))
    m0 = b.mul(tile_row, c32(BM))
    n0 = b.mul(tile_col, c32(BN))
    a_bytes = BM * BK * 2

    def load(stage: ir.Value, kt: ir.Value) -> None:
        base = b.add(s0, b.mul(stage, c32(cfg.stage_bytes())))
        k0 = b.mul(kt, c32(BK))
        t.load_tile(base, BM, BK, a_g, lda, m0, k0, M, K)
        bb = b.add(base, c32(a_bytes))
        if cfg.b_trans:
            t.load_tile(bb, BN, BK, b_g, ldb, n0, k0, N, K)
        else:
            t.load_tile(bb, BK, BN, b_g, ldb, k0, n0, K, N, blocked=True)

    a_hi = c64(P.sw128_hi(16))  # K-major: 8-row groups 1024 bytes apart
    b_hi = a_hi if cfg.b_trans else c64(P.sw128_hi(BK * 128))  # MN-major: 64-n blocks

    def desc(addr: ir.Value, hi: ir.Value) -> ir.Value:
        return P.smem_desc(b, addr, hi)

    def mainloop() -> list[ir.Value]:
        for s in range(L):
            load(c32(s), c32(s))
            P.cp_async_commit(b)
        ktiles = b.udiv(b.add(K, c32(BK - 1)), c32(BK))
        zero = ir.Constant(F32, 0.0)
        fn = b.function
        pre = b.block
        loop = fn.append_basic_block("wg_loop")
        done = fn.append_basic_block("wg_done")
        b.cbranch(b.icmp_signed(">", ktiles, c32(0)), loop, done)
        b.position_at_end(loop)
        kt = b.phi(I32)
        rs = b.phi(I32)
        acc_phi = [b.phi(F32) for _ in range(BN // 2)]
        P.cp_async_wait(b, L - 1)  # tile kt has landed (this thread's copies) ...
        P.fence_proxy_async(b)  # ... and is visible to the async proxy ...
        P.barrier(b)  # ... for every thread; every warpgroup's wgmma of tile kt-1-in_flight is done
        ws = b.add(rs, c32(L))
        ws = b.select(b.icmp_signed(">=", ws, c32(S)), b.sub(ws, c32(S)), ws)  # (kt + L) % S
        load(ws, b.add(kt, c32(L)))
        P.cp_async_commit(b)
        base = b.add(s0, b.mul(rs, c32(cfg.stage_bytes())))
        a_base = b.add(base, b.mul(wg, c32(64 * BK * 2)))
        b_base = b.add(base, c32(a_bytes))
        P.wgmma_fence(b)
        acc = list(acc_phi)
        for kk in range(BK // 16):
            da = desc(b.add(a_base, c32(kk * 32)), a_hi)
            db = desc(b.add(b_base, c32(kk * 32 if cfg.b_trans else kk * 16 * 128)), b_hi)
            acc = P.wgmma(b, acc, da, db, BN, cfg.in_dtype, trans_b=not cfg.b_trans)
        P.wgmma_commit(b)
        P.wgmma_wait(b, cfg.in_flight)  # tile kt-in_flight's wgmma done: its buffer is refilled after the next barrier
        kt1 = b.add(kt, c32(1))
        rs1 = b.select(b.icmp_signed("==", rs, c32(S - 1)), c32(0), b.add(rs, c32(1)))
        end = b.block
        b.cbranch(b.icmp_signed("<", kt1, ktiles), loop, done)
        kt.add_incoming(c32(0), pre)
        kt.add_incoming(kt1, end)
        rs.add_incoming(c32(0), pre)
        rs.add_incoming(rs1, end)
        for p_, v in zip(acc_phi, acc):
            p_.add_incoming(zero, pre)
            p_.add_incoming(v, end)
        b.position_at_end(done)
        fin = []
        for v in acc:
            ph = b.phi(F32)
            ph.add_incoming(zero, pre)
            ph.add_incoming(v, end)
            fin.append(ph)
        return fin

    if aligned is None:
        bits = b.or_(b.or_(lda, ldb), b.lshr(b.or_(a_g, b_g), c64(1)))
        vec_ok = b.icmp_unsigned("==", b.and_(bits, c64(7)), c64(0))
        fast, slow, join = (b.function.append_basic_block(n) for n in ("wg_vec", "wg_scalar", "wg_join"))
        b.cbranch(vec_ok, fast, slow)
        arms = []
        for block, mode in ((fast, True), (slow, False)):
            b.position_at_end(block)
            t.aligned = mode
            arms.append((mainloop(), b.block))
            b.branch(join)
        b.position_at_end(join)
        fin = []
        for i in range(BN // 2):
            ph = b.phi(F32)
            for vals, blk in arms:
                ph.add_incoming(vals[i], blk)
            fin.append(ph)
    else:
        fin = mainloop()
    P.wgmma_wait(b, 0)  # the accumulators are final
    P.cp_async_wait(b, 0)
    P.barrier(b)  # shared memory is the caller's again
    # wgmma's D layout: warp w of a warpgroup holds rows 16 (w % 4) .. +15, n8 block j in d[4j .. 4j+3],
    # the same per-thread layout as mma.m16n8's C
    acc = [[fin[4 * j : 4 * j + 4] for j in range(BN // 8)]]
    row0 = b.add(m0, b.add(b.mul(wg, c32(64)), b.mul(b.and_(warp, c32(3)), c32(16))))
    store_fragments(b, cfg.out_dtype, acc, 1, BN // 8, c_g, ldc, M, N, row0, n0, lane)


def emit_wgmma_kernel(module: ir.Module, name: str, cfg: WgmmaConfig, aligned: bool | None = None) -> ir.Function:
    """`name(A, B, C, M, N, K, lda, ldb, ldc)` over a 1-D grid of tiles, as gemm.emit_gemm_kernel."""
    gptr = ir.PointerType(addrspace=1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [gptr, gptr, gptr] + [I32] * 6), name)
    fn.calling_convention = "ptx_kernel"
    set.add(fn.attributes, f'"nvvm.reqntid"="{cfg.threads},1,1"')
    set.add(fn.attributes, f'"nvvm.minctasm"="{cfg.min_blocks}"')
    a, bp, c, M, N, K, lda, ldb, ldc = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    smem = module.globals.get("__az_tc_smem") or shared_buffer(module)
    tile_row, tile_col = tile_order(b, M, N, cfg.tile_m, cfg.tile_n)
    emit_wgmma_tile(b, module, a_ptr=a, b_ptr=bp, c_ptr=c, M=M, N=N, K=K, lda=lda, ldb=ldb, ldc=ldc,
                    tile_row=tile_row, tile_col=tile_col, smem=smem,
                    cfg=cfg, aligned=aligned)
    b.ret_void()
    return fn


def wgmma_ptx(cfg: WgmmaConfig, name: str = "tc_gemm", arch: str = "sm_90a", aligned: bool | None = None, opt: int = 3) -> str:
    mod = ir.Module(name=name)
    mod.triple = nvptx.TRIPLE
    mod.data_layout = nvptx.data_layout()
    emit_wgmma_kernel(mod, name, cfg, aligned)
    return nvptx.emit_ptx(str(mod), name, arch, opt)[1]

"""Tensor-core GEMM tiles for the NVPTX target (sm_80 and later; tuned on sm_90).

`emit_gemm_tile` emits, into the caller's function, the code with which one thread block computes
the output tile (tile_row, tile_col) of C = A @ B:

- A is M x K row-major (leading dimension lda); B is K x N row-major (ldb), or, with
  `b_trans=True`, N x K row-major (so C = A @ B.T, for attention's Q @ K.T).
- f16 or bf16 operands, f32 accumulation (`mma.sync.aligned.m16n8k16.row.col.f32.*`), an f16, bf16
  or f32 result; every load past the M/N/K edges is zero-filled and never issued, every store past
  them is predicated off.
- Global -> shared through `cp.async.cg` (16 bytes a thread a copy) in a `stages`-deep ring; shared
  -> registers through `ldmatrix.x4` (`.trans` for a K x N B); shared rows XOR-swizzled in
  16-byte chunks so that the 8 rows one `ldmatrix` phase reads fall in 8 distinct bank groups.
- When a leading dimension or a base pointer is not 16-byte aligned (K = 65, say), the copy falls
  back to predicated 2-byte loads and 16-byte shared stores; with `aligned=None` that choice is a
  block-uniform run-time test, `True`/`False` fix it at generation time.

The block is 1-D, `num_warps * 32` threads, and every thread of it must reach the call (it holds
`bar.sync 0`). `smem` is an addrspace(3) pointer to `gemm_smem_bytes(...)` bytes, aligned to
128; it is free again when the emitted code ends (a barrier closes it).

`emit_gemm_kernel` wraps the tile in a standalone kernel over a 1-D grid of tiles (grouped
along M for L2 reuse), for tests and the benchmark. docs/tc_gemm.md describes the pipeline and
shows the inner loop's PTX.
"""

from __future__ import annotations

from anodize.language.records import dataclass

import llvmlite.ir as ir

from ..gpu import ptx as nvptx

from anodize.language.tile_plan import gemm_warp_grid

from . import inline_ptx as P
from .common import _as_i32, _as_i64, shared_buffer, store_fragments, tile_order
from .inline_ptx import F32, I32, I64, c32, c64


def gemm_tile_problem(bm: int, bn: int, bk: int, warps: int, b_trans: bool = False) -> str | None:
    """Why this routine cannot take a (bm, bn, bk) tile over `warps` warps, or None."""
    if bk % 16 or bk < 16:
        return "tile_k must be a multiple of 16"
    for name, v in (("tile_m", bm), ("tile_n", bn), ("tile_k", bk)):
        if v <= 0 or v & (v - 1):
            return f"{name} must be a power of two, not {v}"
    if gemm_warp_grid(bm, bn, warps) is None:
        return f"no layout of {warps} warps over a {bm}x{bn} tile"
    threads = warps * 32
    for rows, cols in ((bm, bk), (bn, bk) if b_trans else (bk, bn)):
        if (rows * cols // 8) % threads:
            return f"a {rows}x{cols} tile does not split into 16-byte copies over {threads} threads"
    return None


def gemm_staging_bytes(*, tile_m: int = 128, tile_n: int = 128, tile_k: int = 32, stages: int = 3, **_: object) -> int:
    """Shared bytes of this routine's operand ring for a tile shape (2-byte operands)."""
    return stages * (tile_m * tile_k + tile_k * tile_n) * 2


@dataclass(frozen=True)
class GemmConfig:
    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 32
    num_warps: int = 8
    stages: int = 3
    in_dtype: str = "f16"
    out_dtype: str = "f32"
    b_trans: bool = False
    prefetch: bool = True  # register double-buffering of fragments (see emit_gemm_tile)

    def __post_init__(self) -> None:
        if self.in_dtype not in P.PTX_IN:
            raise ValueError(f"in_dtype must be f16 or bf16, not {self.in_dtype!r}")
        if self.out_dtype not in P.ELEM_BYTES:
            raise ValueError(f"out_dtype must be f16, bf16 or f32, not {self.out_dtype!r}")
        if self.stages < 2:
            raise ValueError("stages must be at least 2")
        problem = gemm_tile_problem(self.tile_m, self.tile_n, self.tile_k, self.num_warps, self.b_trans)
        if problem is not None:
            raise ValueError(problem)

    @property
    def threads(self) -> int:
        return self.num_warps * 32

    def warp_grid(self) -> tuple[int, int]:
        """(warps along M, warps along N): the layout with the fewest ldmatrix a k-step, ties to taller."""
        grid = gemm_warp_grid(self.tile_m, self.tile_n, self.num_warps)
        if grid is None:
            raise ValueError(f"no layout of {self.num_warps} warps over a {self.tile_m}x{self.tile_n} tile")
        return grid

    def _a_shape(self) -> tuple[int, int]:
        return self.tile_m, self.tile_k

    def _b_shape(self) -> tuple[int, int]:
        return (self.tile_n, self.tile_k) if self.b_trans else (self.tile_k, self.tile_n)

    def stage_bytes(self) -> int:
        return (self.tile_m * self.tile_k + self.tile_k * self.tile_n) * 2

    def smem_bytes(self) -> int:
        return self.stages * self.stage_bytes()


gemm_smem_bytes = gemm_staging_bytes


def _swizzle(b: ir.IRBuilder, row: ir.Value, cpr: int) -> ir.Value:
    """The XOR applied to a row's 16-byte chunk index: for rows of `cpr` chunks, the 8 rows an
    ldmatrix phase reads (same logical chunk) land in 8 distinct 16-byte bank groups.  None (0)
    where `cpr` is no power of two: the XOR would take a chunk past its row's end."""
    if cpr & (cpr - 1):
        return ir.Constant(ir.IntType(32), 0)
    rpl = max(1, 8 // cpr)  # rows per 128-byte line
    span = min(cpr, 8)
    x = b.lshr(row, c32(rpl.bit_length() - 1)) if rpl > 1 else row
    return b.and_(x, c32(span - 1))


class _Tile:
    """Emission state for one call of `emit_gemm_tile`."""

    def __init__(self, b: ir.IRBuilder, cfg: GemmConfig, aligned: bool | None):
        self.b = b
        self.cfg = cfg
        self.aligned = aligned

    # -- global -> shared ------------------------------------------------------------------
    def load_tile(self, sbase: ir.Value, rows: int, cols: int, gbase: ir.Value, ld: ir.Value,
                  row0: ir.Value, col0: ir.Value, row_lim: ir.Value, col_lim: ir.Value, blocked: bool = False) -> None:
        """Copy the rows x cols tile at (row0, col0) of a row-major matrix into shared memory at
        `sbase` (swizzled), zero past (row_lim, col_lim): 16-byte cp.async when `self.aligned`,
        else 2-byte loads. `blocked`: stored as cols/64 blocks of rows x 64 (wgmma.py's MN-major B)."""
        copy = self._copy_async if self.aligned else self._copy_scalar
        copy(sbase, rows, cols, gbase, ld, row0, col0, row_lim, col_lim, blocked)

    def _chunks(self, rows: int, cols: int, blocked: bool = False):
        """(row, chunk, shared offset) of each 16-byte chunk this thread copies."""
        b = self.b
        cpr = cols // 8
        t = self.cfg.threads
        total = rows * cpr
        for i in range(total // t):
            idx = b.add(self.tid, c32(i * t))
            r = b.lshr(idx, c32(cpr.bit_length() - 1))
            c = b.and_(idx, c32(cpr - 1))
            if blocked:  # block c // 8 of rows x 64 elements, 128-byte rows, chunk ^= row % 8
                phys = b.xor(b.and_(c, c32(7)), b.and_(r, c32(7)))
                blk = b.mul(b.lshr(c, c32(3)), c32(rows * 128))
                off = b.add(blk, b.add(b.mul(r, c32(128)), b.shl(phys, c32(4))))
            else:
                phys = b.xor(c, _swizzle(b, r, cpr))
                off = b.add(b.mul(r, c32(cols * 2)), b.shl(phys, c32(4)))
            yield r, c, off

    def _copy_async(self, sbase, rows, cols, gbase, ld, row0, col0, row_lim, col_lim, blocked=False) -> None:
        b = self.b
        for r, c, off in self._chunks(rows, cols, blocked):
            grow = b.add(row0, r)
            gcol = b.add(col0, b.shl(c, c32(3)))
            left = b.sub(col_lim, gcol)  # elements left in this row from gcol
            ok = b.and_(b.icmp_signed("<", grow, row_lim), b.icmp_signed(">", left, c32(0)))
            nbytes = b.select(ok, b.shl(b.select(b.icmp_signed("<", left, c32(8)), left, c32(8)), c32(1)), c32(0))
            elem = b.add(b.mul(b.sext(grow, I64), ld), b.sext(gcol, I64))
            addr = b.select(ok, b.add(gbase, b.shl(elem, c64(1))), gbase)
            P.cp_async_16(b, b.add(sbase, off), addr, nbytes)

    def _copy_scalar(self, sbase, rows, cols, gbase, ld, row0, col0, row_lim, col_lim, blocked=False) -> None:
        b = self.b
        for r, c, off in self._chunks(rows, cols, blocked):
            grow = b.add(row0, r)
            gcol = b.add(col0, b.shl(c, c32(3)))
            row_ok = b.icmp_signed("<", grow, row_lim)
            rowbase = b.mul(b.sext(grow, I64), ld)
            halves = []
            for j in range(8):
                col = b.add(gcol, c32(j))
                ok = b.and_(row_ok, b.icmp_signed("<", col, col_lim))
                elem = b.add(rowbase, b.sext(col, I64))
                addr = b.select(ok, b.add(gbase, b.shl(elem, c64(1))), gbase)
                halves.append(b.zext(P.ld_global_b16(b, addr, b.zext(ok, I32)), I32))
            words = [b.or_(halves[2 * k], b.shl(halves[2 * k + 1], c32(16))) for k in range(4)]
            P.st_shared_v4(b, b.add(sbase, off), words)

    # -- shared -> registers -> tensor cores -----------------------------------------------
    def load_frags(self, a_base: ir.Value, b_base: ir.Value, kk: int) -> tuple[list[list[ir.Value]], list[list[ir.Value]]]:
        """The A fragments (per m-tile, 4 regs) and B fragments (per n-tile, 2 regs) of k-step kk."""
        b = self.b
        afr = [P.ldmatrix_x4(b, b.add(a_base, self.a_off[mi][kk]), trans=False) for mi in range(self.mt)]
        bfr: list[list[ir.Value]] = []
        for npair in range(self.nt // 2):
            r = P.ldmatrix_x4(b, b.add(b_base, self.b_off[npair][kk]), trans=not self.cfg.b_trans)
            bfr += [[r[0], r[1]], [r[2], r[3]]]
        return afr, bfr

    def mmas(self, afr, bfr, acc):
        b, dt = self.b, self.cfg.in_dtype
        return [[P.mma_16816(b, afr[mi], bfr[ni], acc[mi][ni], dt) for ni in range(self.nt)] for mi in range(self.mt)]

    def fragment_offsets(self, warp_m: ir.Value, warp_n: ir.Value, lane: ir.Value) -> None:
        """Per-thread shared offsets (within a stage's A or B part) of every ldmatrix."""
        cfg, b = self.cfg, self.b
        wgm, wgn = cfg.warp_grid()
        wtm, wtn = cfg.tile_m // wgm, cfg.tile_n // wgn
        self.mt, self.nt = wtm // 16, wtn // 8
        lr = b.and_(lane, c32(15))
        hi = b.lshr(lane, c32(4))
        kcpr = cfg.tile_k // 8

        def rowmajor(row: ir.Value, chunk: ir.Value, cpr: int) -> ir.Value:
            phys = b.xor(chunk, _swizzle(b, row, cpr))
            return b.add(b.mul(row, c32(cpr * 16)), b.shl(phys, c32(4)))

        a_row0 = b.mul(warp_m, c32(wtm))
        self.a_off = [[rowmajor(b.add(a_row0, b.add(c32(mi * 16), lr)), b.add(c32(kk * 2), hi), kcpr)
                       for kk in range(cfg.tile_k // 16)] for mi in range(self.mt)]
        n0 = b.mul(warp_n, c32(wtn))
        self.b_off = []
        for npair in range(self.nt // 2):
            row = []
            for kk in range(cfg.tile_k // 16):
                if cfg.b_trans:  # shared B is N x K: rows n, non-transposed ldmatrix
                    j = b.lshr(lane, c32(3))
                    n = b.add(b.add(n0, c32(npair * 16)), b.add(b.shl(b.lshr(j, c32(1)), c32(3)), b.and_(lane, c32(7))))
                    chunk = b.add(c32(kk * 2), b.and_(j, c32(1)))
                    row.append(rowmajor(n, chunk, kcpr))
                else:  # shared B is K x N: rows k, ldmatrix.trans
                    k = b.add(c32(kk * 16), lr)
                    chunk = b.add(b.lshr(b.add(n0, c32(npair * 16)), c32(3)), hi)
                    row.append(rowmajor(k, chunk, cfg.tile_n // 8))
            self.b_off.append(row)


def emit_gemm_tile(builder: ir.IRBuilder, module: ir.Module, *, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc,
                   tile_row, tile_col, smem, in_dtype: str = "f16", out_dtype: str = "f32", tile_m: int = 128,
                   tile_n: int = 128, tile_k: int = 32, num_warps: int = 8, stages: int = 3, b_trans: bool = False,
                   aligned: bool | None = None, prefetch: bool = True, a_rows=None, b_cols=None) -> None:
    """Emit the code computing C[tile] = A @ B (or A @ B.T with b_trans) for one block's tile.

    `a_rows` / `b_cols` (default M / N): where A's rows and B's columns end when they differ
    from C's (a tile kernel's matmul: loads masked at the inputs' own extents,
    stores at the output's); past them the operands read as zero.

    Pointers are global pointers or i64 addresses; sizes and leading dimensions i32/i64 values or
    ints (element counts); tile_row/tile_col i32 values; `smem` an addrspace(3) pointer. The builder
    is left at the end of the emitted code."""
    cfg = GemmConfig(tile_m, tile_n, tile_k, num_warps, stages, in_dtype, out_dtype, b_trans, prefetch)
    b = builder
    assert b.module is module
    t = _Tile(b, cfg, aligned)
    S = cfg.stages
    a_g, b_g, c_g = _as_i64(b, a_ptr), _as_i64(b, b_ptr), _as_i64(b, c_ptr)
    M, N, K = _as_i32(b, M), _as_i32(b, N), _as_i32(b, K)
    a_rows = M if a_rows is None else _as_i32(b, a_rows)
    b_cols = N if b_cols is None else _as_i32(b, b_cols)
    lda, ldb, ldc = _as_i64(b, lda), _as_i64(b, ldb), _as_i64(b, ldc)
    tile_row, tile_col = _as_i32(b, tile_row), _as_i32(b, tile_col)
    s0 = b.ptrtoint(smem, I32) if isinstance(smem.type, ir.PointerType) else _as_i32(b, smem)

    t.tid = P.sreg(b, "tid.x")
    warp = b.lshr(t.tid, c32(5))
    lane = b.and_(t.tid, c32(31))
    wgm, wgn = cfg.warp_grid()
    warp_m, warp_n = b.udiv(warp, c32(wgn)), b.urem(warp, c32(wgn))
    t.fragment_offsets(warp_m, warp_n, lane)

    vec_ok = None
    if aligned is None:  # 16-byte copies need 16-byte aligned rows: ld % 8 == 0 and aligned bases
        bits = b.or_(b.or_(lda, ldb), b.lshr(b.or_(a_g, b_g), c64(1)))
        vec_ok = b.icmp_unsigned("==", b.and_(bits, c64(7)), c64(0))

    m0 = b.mul(tile_row, c32(cfg.tile_m))
    n0 = b.mul(tile_col, c32(cfg.tile_n))
    a_bytes = cfg.tile_m * cfg.tile_k * 2

    def load(stage: ir.Value, kt: ir.Value) -> None:
        base = b.add(s0, b.mul(stage, c32(cfg.stage_bytes())))
        k0 = b.mul(kt, c32(cfg.tile_k))
        t.load_tile(base, cfg.tile_m, cfg.tile_k, a_g, lda, m0, k0, a_rows, K)
        bb = b.add(base, c32(a_bytes))
        if cfg.b_trans:
            t.load_tile(bb, cfg.tile_n, cfg.tile_k, b_g, ldb, n0, k0, b_cols, K)
        else:
            t.load_tile(bb, cfg.tile_k, cfg.tile_n, b_g, ldb, k0, n0, K, b_cols)

    def mainloop(prefetch: bool) -> list:
        """Prologue and pipelined loop over K; returns the accumulators (f32 values).

        With `prefetch`, fragments are double-buffered in registers across k-steps and across
        iterations (more registers, the barrier overlapped with the last mma of a tile)."""
        # prologue: tiles 0 .. S-2 in flight, one commit group each; then (prefetch) tile 0
        # landed and its first k-step's fragments in registers
        for s in range(S - 1):
            load(c32(s), c32(s))
            P.cp_async_commit(b)
        KK = cfg.tile_k // 16
        if prefetch:
            P.cp_async_wait(b, S - 2)
            P.barrier(b)

        def stage_bases(stage: ir.Value) -> tuple[ir.Value, ir.Value]:
            base = b.add(s0, b.mul(stage, c32(cfg.stage_bytes())))
            return base, b.add(base, c32(a_bytes))

        frag0 = t.load_frags(*stage_bases(c32(0)), 0) if prefetch else ([], [])
        ktiles = b.udiv(b.add(K, c32(cfg.tile_k - 1)), c32(cfg.tile_k))
        zero = ir.Constant(F32, 0.0)
        fn = b.function
        pre = b.block
        loop = fn.append_basic_block("tc_loop")
        done = fn.append_basic_block("tc_done")
        b.cbranch(b.icmp_signed(">", ktiles, c32(0)), loop, done)

        # iteration kt: k-step kk loads the fragments of kk+1 before its mma; tile kt+S-1's copies
        # go out after the first k-step's loads; the last k-step waits for tile kt+1 and loads its
        # first fragments, so the barrier overlaps the last mma of tile kt.
        b.position_at_end(loop)
        kt = b.phi(I32)
        rs = b.phi(I32)  # the stage read this iteration (kt % S)
        acc_phi = [[[b.phi(F32) for _ in range(4)] for _ in range(t.nt)] for _ in range(t.mt)]
        fa_phi = [[b.phi(I32) for _ in range(4)] for _ in range(t.mt)] if prefetch else []
        fb_phi = [[b.phi(I32) for _ in range(2)] for _ in range(t.nt)] if prefetch else []
        acc, cur = acc_phi, (fa_phi, fb_phi)
        a_base, b_base = stage_bases(rs)
        rs1 = b.select(b.icmp_signed("==", rs, c32(S - 1)), c32(0), b.add(rs, c32(1)))

        def issue_copies() -> None:
            # stage (kt + S - 1) % S was last read in iteration kt-1, before that iteration's barrier
            ws = b.select(b.icmp_signed("==", rs, c32(0)), c32(S - 1), b.sub(rs, c32(1)))
            load(ws, b.add(kt, c32(S - 1)))
            P.cp_async_commit(b)

        if not prefetch:
            P.cp_async_wait(b, S - 2)  # tile kt has landed (for this thread) ...
            P.barrier(b)  # ... for every thread
            issue_copies()
            for kk in range(KK):
                acc = t.mmas(*t.load_frags(a_base, b_base, kk), acc)
        for kk in range(KK if prefetch else 0):
            if kk == 0 and KK == 1:
                issue_copies()
            if kk + 1 < KK:
                nxt = t.load_frags(a_base, b_base, kk + 1)
            else:
                P.cp_async_wait(b, S - 2)  # tile kt+1 has landed (for this thread) ...
                P.barrier(b)  # ... for every thread; every warp has issued its reads of stage kt % S
                nxt = t.load_frags(*stage_bases(rs1), 0)
            if kk == 0 and KK > 1:
                issue_copies()
            acc = t.mmas(cur[0], cur[1], acc)
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
        for mi in range(t.mt):
            for ni in range(t.nt):
                for q in range(4):
                    acc_phi[mi][ni][q].add_incoming(zero, pre)
                    acc_phi[mi][ni][q].add_incoming(acc[mi][ni][q], end)

        b.position_at_end(done)
        fin = [[[b.phi(F32) for _ in range(4)] for _ in range(t.nt)] for _ in range(t.mt)]
        for mi in range(t.mt):
            for ni in range(t.nt):
                for q in range(4):
                    fin[mi][ni][q].add_incoming(zero, pre)
                    fin[mi][ni][q].add_incoming(acc[mi][ni][q], end)
        P.cp_async_wait(b, 0)  # the copies of tiles past K (all zero-size) are done too
        P.barrier(b)  # shared memory is the caller's again
        return fin

    if aligned is None:  # one loop per copy path, chosen once: the two never share registers
        fast, slow, join = (b.function.append_basic_block(n) for n in ("tc_vec", "tc_scalar", "tc_join"))
        b.cbranch(vec_ok, fast, slow)
        arms = []
        for block, mode in ((fast, True), (slow, False)):
            b.position_at_end(block)
            t.aligned = mode
            arms.append((mainloop(prefetch and mode), b.block))  # the scalar arm: fewer registers
            b.branch(join)
        b.position_at_end(join)
        fin = [[[None] * 4 for _ in range(t.nt)] for _ in range(t.mt)]
        for mi in range(t.mt):
            for ni in range(t.nt):
                for q in range(4):
                    ph = b.phi(F32)
                    for vals, blk in arms:
                        ph.add_incoming(vals[mi][ni][q], blk)
                    fin[mi][ni][q] = ph
    else:
        fin = mainloop(prefetch)
    _epilogue(b, cfg, t, fin, c_g, ldc, M, N, m0, n0, warp_m, warp_n, lane)


def _epilogue(b, cfg: GemmConfig, t: _Tile, acc, c_g, ldc, M, N, m0, n0, warp_m, warp_n, lane) -> None:
    wgm, wgn = cfg.warp_grid()
    wtm, wtn = cfg.tile_m // wgm, cfg.tile_n // wgn
    row0 = b.add(m0, b.mul(warp_m, c32(wtm)))
    col0 = b.add(n0, b.mul(warp_n, c32(wtn)))
    store_fragments(b, cfg.out_dtype, acc, t.mt, t.nt, c_g, ldc, M, N, row0, col0, lane)


def emit_gemm_kernel(module: ir.Module, name: str, cfg: GemmConfig, aligned: bool | None = None) -> ir.Function:
    """A kernel `name(A, B, C, M, N, K, lda, ldb, ldc)` (pointers global, the rest i32) over a
    1-D grid of ceil(M/tile_m) * ceil(N/tile_n) blocks of cfg.threads threads, with
    cfg.smem_bytes() bytes of dynamic shared memory."""
    gptr = ir.PointerType(addrspace=1)
    fty = ir.FunctionType(ir.VoidType(), [gptr, gptr, gptr] + [I32] * 6)
    fn = ir.Function(module, fty, name)
    fn.calling_convention = "ptx_kernel"
    set.add(fn.attributes, f'"nvvm.reqntid"="{cfg.threads},1,1"')
    set.add(fn.attributes, '"nvvm.minctasm"="1"')
    a, bp, c, M, N, K, lda, ldb, ldc = fn.args
    for p in (a, bp, c):
        p.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    smem = module.globals.get("__az_tc_smem") or shared_buffer(module)
    tile_row, tile_col = tile_order(b, M, N, cfg.tile_m, cfg.tile_n)
    emit_gemm_tile(b, module, a_ptr=a, b_ptr=bp, c_ptr=c, M=M, N=N, K=K, lda=lda, ldb=ldb, ldc=ldc,
                   tile_row=tile_row, tile_col=tile_col, smem=smem, in_dtype=cfg.in_dtype, out_dtype=cfg.out_dtype,
                   tile_m=cfg.tile_m, tile_n=cfg.tile_n, tile_k=cfg.tile_k, num_warps=cfg.num_warps,
                   stages=cfg.stages, b_trans=cfg.b_trans, aligned=aligned, prefetch=cfg.prefetch)
    b.ret_void()
    return fn


def gemm_module(cfg: GemmConfig, name: str = "tc_gemm", aligned: bool | None = None) -> ir.Module:
    """A module holding one standalone GEMM kernel."""
    mod = ir.Module(name=name)
    mod.triple = nvptx.TRIPLE
    mod.data_layout = nvptx.data_layout()
    emit_gemm_kernel(mod, name, cfg, aligned)
    return mod


def gemm_ptx(cfg: GemmConfig, name: str = "tc_gemm", arch: str = "sm_90", aligned: bool | None = None, opt: int = 3) -> str:
    """PTX for a standalone GEMM kernel (LLVM O3 through codegen/gpu/ptx.py)."""
    return nvptx.emit_ptx(str(gemm_module(cfg, name, aligned)), name, arch, opt)[1]

"""`TileGemm` (codegen/tile_gemm.py) to LLVM: the tile GEMM form on tensor cores.

On sm_90 (`engine == "wgmma"`) one inline-PTX block of `tc_wgmma_asm.emit_wgmma_asm` (wgmma,
cp.async, a 64-wide K step, its operands staged in the compiler's dynamic shared buffer), elsewhere
one call of `tc_gemm.emit_gemm_tile` (mma.sync.m16n8k16, ldmatrix, cp.async in a `stages`-deep
ring), computes the program's (BM, BN) tile of C = A @ B in f32 and stores it as C's element
type, masked at C's edges.  The operand extents are the slices' own (rows of A, columns of B),
and K is where the generic lowering's masked loads stop contributing:
`min(cols of A, rows of B, ceil(max(stop, 0) / BK) * BK)`.  The tile row and column are
`ctaid.y` / `ctaid.x`, exactly the program id of the generic lowering -- or, when no other
statement of the kernel names C (`TileGemm.grouped`), that id in grouped order
(`tc_common.grouped_tile`, a bijection of the grid that keeps 8 tile rows sweeping the columns
together, for L2).

The emitter indexes with 32-bit integers: a launch with a dimension at or above
`2**31 - 4096` records the statement's fault and skips the tile, and a program whose tile
starts past C's edge skips it too (both the same on every thread of the block, so the
emitter's barriers stay matched).
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as llir

I64T = llir.IntType(64)
LIMIT = 2**31 - 4096


def lower_tile_gemm(lw: Any, s: Any) -> None:
    from anodize.language.types import I64

    b = lw.b
    sa, sb, sc = (lw.frame.slices[r.name] for r in (s.a, s.b, s.c))
    if not s.smem:  # the compiler's dynamic shared buffer (CompiledKernel.dynamic_shared_bytes)
        from .tc_common import shared_buffer

        gv = lw.module.globals.get("__az_tc_smem") or shared_buffer(lw.module)
    else:
        gv = lw.shared_gv[s.smem]
        gv.align = 128  # the emitter's swizzle assumes 128-byte rows of banks from the start
    dims = [b.sext(d, I64T) if d.type.width < 64 else d for d in (*sa.dims, *sb.dims, *sc.dims)]
    a_rows, a_cols, b_rows, b_cols, c_rows, c_cols = dims
    fits = None
    for d in dims:
        ok = b.icmp_unsigned("<", d, llir.Constant(I64T, LIMIT))
        fits = ok if fits is None else b.and_(fits, ok)
    bm, bn, bk = s.tile
    stop = lw.conv(lw.expr(s.k_stop), s.k_stop.ty, I64)
    stop = b.select(b.icmp_signed("<", stop, llir.Constant(I64T, 0)), llir.Constant(I64T, 0), stop)
    k_in = b.select(b.icmp_signed("<", a_cols, b_rows), a_cols, b_rows)
    # below k_in (< 2**31) the round-up cannot overflow
    small = b.icmp_signed("<", stop, k_in)
    up = b.mul(b.sdiv(b.add(b.select(small, stop, llir.Constant(I64T, 0)), llir.Constant(I64T, bk - 1)),
                      llir.Constant(I64T, bk)), llir.Constant(I64T, bk))
    up = b.select(b.icmp_signed("<", up, k_in), up, k_in)
    K = b.select(small, up, k_in)
    with b.if_then(b.not_(fits), likely=False):
        lw.fault(s.site, llir.Constant(I64T, 0), llir.Constant(I64T, 0))
    # a program past C's edge stores nothing (generic lowering: every store masked off); skipping
    # it keeps the emitter's 32-bit tile origin (ctaid * BM) from wrapping on a huge grid
    row, col = lw.t.sreg(lw, "ctaid", "y"), lw.t.sreg(lw, "ctaid", "x")
    if s.grouped:
        from .tc_common import grouped_tile

        row, col = grouped_tile(b, row, col, lw.t.sreg(lw, "nctaid", "y"), lw.t.sreg(lw, "nctaid", "x"))
    own = b.and_(b.icmp_signed("<", b.mul(b.zext(row, I64T), llir.Constant(I64T, bm)), c_rows),
                 b.icmp_signed("<", b.mul(b.zext(col, I64T), llir.Constant(I64T, bn)), c_cols))
    with b.if_then(b.and_(fits, own), likely=True):
        if s.engine == "wgmma":
            from .lower_llvm import add_attr
            from .tc_wgmma_asm import AsmGemmConfig, emit_wgmma_asm

            # its ring holds one block an SM anyway: ptxas may give the block all the registers
            add_attr(lw.fn.attributes, '"nvvm.minctasm"="1"')

            cfg = AsmGemmConfig(bm, bn, s.num_warps, s.stages, s.in_dtype, s.out_dtype)
            emit_wgmma_asm(b, a_ptr=sa.ptr, b_ptr=sb.ptr, c_ptr=sc.ptr, M=c_rows, N=c_cols, K=K, lda=a_cols,
                           ldb=b_cols, ldc=c_cols, a_rows=a_rows, b_cols=b_cols, tile_row=row, tile_col=col,
                           smem=gv, cfg=cfg)
            return
        from .tc_gemm import emit_gemm_tile

        emit_gemm_tile(
            b, lw.module, a_ptr=sa.ptr, b_ptr=sb.ptr, c_ptr=sc.ptr, M=c_rows, N=c_cols, K=K,
            lda=a_cols, ldb=b_cols, ldc=c_cols, a_rows=a_rows, b_cols=b_cols,
            tile_row=row, tile_col=col, smem=gv,
            in_dtype=s.in_dtype, out_dtype=s.out_dtype, tile_m=bm, tile_n=bn, tile_k=bk,
            num_warps=s.num_warps, stages=s.stages, prefetch=bm * bn / (32 * s.num_warps) < 128,
        )

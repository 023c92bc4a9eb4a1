"""Block-level pieces shared by the two tensor-core GEMM generators (codegen/tensorcore/gemm.py and
codegen/tensorcore/wgmma.py): value coercions, the accumulator store, the dynamic shared buffer and
the standalone kernels' tile order."""

from __future__ import annotations

import llvmlite.ir as ir

from . import inline_ptx as P
from .inline_ptx import I32, I64, c32, c64

GROUP_M = 8  # tiles along M that share one sweep over N in the standalone kernel's tile order


def _as_i32(b: ir.IRBuilder, v: ir.Value | int) -> ir.Value:
    if isinstance(v, int):
        return c32(v)
    if v.type == I32:
        return v
    return b.trunc(v, I32) if v.type.width > 32 else b.zext(v, I32)


def _as_i64(b: ir.IRBuilder, v: ir.Value | int) -> ir.Value:
    if isinstance(v, int):
        return c64(v)
    if isinstance(v.type, ir.PointerType):
        return b.ptrtoint(v, I64)
    if v.type == I64:
        return v
    return b.sext(v, I64)


def store_fragments(b, out_dtype: str, acc, mt: int, nt: int, c_g, ldc, M, N, row0, col0, lane) -> None:
    """Store a warp's accumulators in the m16n8 C layout (acc[mi][ni][4]: rows row0 + 16 mi,
    columns col0 + 8 ni): two neighbouring columns a thread, as one store when both are in range
    and the address is aligned for it, else one predicated store each."""
    es = P.ELEM_BYTES[out_dtype]
    g = b.lshr(lane, c32(2))
    tq = b.and_(lane, c32(3))
    row_w = b.add(row0, g)
    col_w = b.add(col0, b.shl(tq, c32(1)))
    pair_ok = b.icmp_unsigned("==", b.and_(b.or_(ldc, b.udiv(c_g, c64(es))), c64(1)), c64(0))
    pair_ok = b.and_(pair_ok, b.icmp_unsigned("==", b.urem(c_g, c64(es)), c64(0)))
    for mi in range(mt):
        for h in range(2):
            row = b.add(row_w, c32(mi * 16 + h * 8))
            row_ok = b.icmp_signed("<", row, M)
            rowbase = b.mul(b.sext(row, I64), ldc)
            for ni in range(nt):
                col = b.add(col_w, c32(ni * 8))
                v0, v1 = acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]
                ok0 = b.and_(row_ok, b.icmp_signed("<", col, N))
                ok1 = b.and_(row_ok, b.icmp_signed("<", b.add(col, c32(1)), N))
                both = b.and_(ok1, pair_ok)
                addr = b.add(c_g, b.mul(b.add(rowbase, b.sext(col, I64)), c64(es)))
                # out-of-range lanes keep a harmless address: their stores are predicated off
                if out_dtype == "f32":
                    P.st_global(b, addr, [v0, v1], "f32", b.zext(both, I32))
                    single = [v0, v1]
                    kind = "f32"
                else:
                    P.st_global(b, addr, [P.pack2(b, v0, v1, out_dtype)], "b32", b.zext(both, I32))
                    single = [P.cvt_f32_to(b, v0, out_dtype), P.cvt_f32_to(b, v1, out_dtype)]
                    kind = "b16"
                notboth = b.xor(both, ir.Constant(P.I1, 1))
                P.st_global(b, addr, [single[0]], kind, b.zext(b.and_(notboth, ok0), I32))
                P.st_global(b, b.add(addr, c64(es)), [single[1]], kind, b.zext(b.and_(notboth, ok1), I32))


def shared_buffer(module: ir.Module, name: str = "__az_tc_smem") -> ir.GlobalVariable:
    """The dynamic (extern) shared array of a kernel, 128-byte aligned."""
    gv = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), 0), name, addrspace=3)
    gv.linkage = "external"
    gv.align = 128
    return gv


def tile_order(b: ir.IRBuilder, M: ir.Value, N: ir.Value, tile_m: int, tile_n: int) -> tuple[ir.Value, ir.Value]:
    """(tile_row, tile_col) of this block (1-D grid): GROUP_M tile rows sweep N together, so the
    A rows they share stay in L2."""
    pid = P.sreg(b, "ctaid.x")
    tiles_m = b.udiv(b.add(M, c32(tile_m - 1)), c32(tile_m))
    tiles_n = b.udiv(b.add(N, c32(tile_n - 1)), c32(tile_n))
    per_group = b.mul(tiles_n, c32(GROUP_M))
    group = b.udiv(pid, per_group)
    first_m = b.mul(group, c32(GROUP_M))
    left = b.sub(tiles_m, first_m)
    gsize = b.select(b.icmp_signed("<", left, c32(GROUP_M)), left, c32(GROUP_M))
    inner = b.urem(pid, per_group)
    return b.add(first_m, b.urem(inner, gsize)), b.udiv(inner, gsize)


def grouped_tile(b: ir.IRBuilder, y: ir.Value, x: ir.Value, gy: ir.Value, gx: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(row, col) for block (y, x) of a gy x gx grid in grouped order: the linear block id
    y * gx + x walks GROUP_M rows down before moving one column right, a bijection of the
    grid (the last group may be shorter).  i32 values; gx * gy < 2**31 (a CUDA grid)."""
    pid = b.add(b.mul(y, gx), x)
    per_group = b.mul(gx, c32(GROUP_M))
    group = b.udiv(pid, per_group)
    first = b.mul(group, c32(GROUP_M))
    left = b.sub(gy, first)
    gsize = b.select(b.icmp_signed("<", left, c32(GROUP_M)), left, c32(GROUP_M))
    inner = b.urem(pid, per_group)
    return b.add(first, b.urem(inner, gsize)), b.udiv(inner, gsize)

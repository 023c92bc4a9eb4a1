"""The codegen-only nodes of codegen/tile/rows.py to LLVM: vector loads and stores of a
chunk of consecutive elements, and the alignment test that guards them.

A chunk of `lanes` elements is accessed in pieces of at most 16 bytes (`<4 x float>`, `<2 x
double>`, `<4 x i16>` for halves), each aligned to its own size: `ld.global.nc.v4.f32` /
`st.global.v4.f32` on the GPU.  `TileVecAligned` holds when each slice's base is aligned to
`min(16, lanes * element size)` bytes and a 2-D slice's column count is a multiple of
`lanes`, so every chunk (which starts at a column that is a multiple of `lanes`, tested by the
caller) is aligned too.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as llir

from ..llvm.registry import lowers
from ..llvm.types import mem_type
from .rows_plan import TileVecAligned, TileVecLoad, TileVecStore

I64T = llir.IntType(64)
I32T = llir.IntType(32)
VECTOR_BYTES = 16


def _piece(sv: Any, lanes: int) -> tuple[Any, int, int]:
    """(memory type, lanes per piece, bytes per piece) for a chunk of `lanes` elements of `sv`."""
    size = sv.ty.elem.info.mem_bits // 8
    nbytes = min(VECTOR_BYTES, lanes * size)
    return mem_type(sv.ty.elem), nbytes // size, nbytes


@lowers(TileVecAligned)
def aligned(lw: Any, e: TileVecAligned) -> llir.Value:
    b = lw.b
    ok: llir.Value = llir.Constant(llir.IntType(1), 1)
    for ref in e.slices:
        sv = lw.frame.slices[ref.name]
        _, per, nbytes = _piece(sv, e.lanes)
        low = b.and_(b.ptrtoint(sv.ptr, I64T), llir.Constant(I64T, nbytes - 1))
        ok = b.and_(ok, b.icmp_unsigned("==", low, llir.Constant(I64T, 0)))
        if len(sv.dims) == 2:
            cols = sv.dims[-1]
            cols = b.sext(cols, I64T) if cols.type.width < 64 else cols
            ok = b.and_(ok, b.icmp_unsigned("==", b.urem(cols, llir.Constant(I64T, e.lanes)), llir.Constant(I64T, 0)))
    return ok


@lowers(TileVecLoad)
def vec_load(lw: Any, s: TileVecLoad) -> None:
    b = lw.b
    sv = lw.frame.slices[s.slice.name]
    _, ptr, _, _ = lw.bounds.address(sv, s.index)
    mt, per, nbytes = _piece(sv, len(s.dests))
    vt = llir.VectorType(mt, per)
    for part in range(len(s.dests) // per):
        p = ptr if part == 0 else b.gep(ptr, [llir.Constant(I64T, part * per)], inbounds=True, source_etype=mt)
        v = b.load(p, typ=vt, align=nbytes)
        for j in range(per):
            slot, _ = lw.frame.vars[s.dests[part * per + j]]
            b.store(b.extract_element(v, llir.Constant(I32T, j)), slot)


@lowers(TileVecStore)
def vec_store(lw: Any, s: TileVecStore) -> None:
    b = lw.b
    sv = lw.frame.slices[s.slice.name]
    values = [lw.conv(lw.expr(x), x.ty, sv.ty.elem) for x in s.values]
    _, ptr, _, _ = lw.bounds.address(sv, s.index)
    mt, per, nbytes = _piece(sv, len(values))
    vt = llir.VectorType(mt, per)
    for part in range(len(values) // per):
        vec: llir.Value = llir.Constant(vt, None)
        for j in range(per):
            vec = b.insert_element(vec, values[part * per + j], llir.Constant(I32T, j))
        p = ptr if part == 0 else b.gep(ptr, [llir.Constant(I64T, part * per)], inbounds=True, source_etype=mt)
        b.store(vec, p, align=nbytes)

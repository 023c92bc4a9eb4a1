"""`TileStagedStore`: `tile.store(dst, pid, value)` of a register tile through shared memory,
the epilogue the tensor-core GEMMs of CUTLASS and Triton use.

The fragment loop (codegen/tile/lower.py `store_registers`) computes each register's value
into a local of `dst`'s element type; this statement then writes the thread's fragments into a
row-padded copy of the tile in the compiler's dynamic shared buffer (`stmatrix.x4` for 16-bit
elements where a warp's n8 blocks pair up on sm_90, else `st.shared.b32` / `.v2.f32` a register pair)
and copies the tile out row by row in 16-byte chunks, consecutive threads on consecutive
chunks (coalesced `st.global.v4`), element by element only where a chunk crosses `dst`'s edge
or `dst` is not 16-byte aligned.  The elements stored are exactly the per-element store's:
`(pid.row * M + r, pid.col * N + c)` where inside `dst`.

The block is one inline-PTX statement between two `bar.sync 0` (the buffer is the one the
matmul rings use; the first barrier waits for whatever read it last).  Every thread of the
block reaches a tile store (tile programs branch only on uniform scalars), as it reaches a
`TileMma`.

`ANODIZE_TILE_EPILOGUE` (codegen/toolchain.py): `staged` (the default) this statement, `direct`
the per-element predicated stores (`TilePredStore`), the way back.
"""

from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.records import dataclass

from ..llvm.registry import lowers
from ..llvm.types import mem_type, value_type
from ..tensorcore.common import shared_buffer
from ..tensorcore.inline_ptx import I16, I32, I64, align_smem, asm_block, declare_regs, ptx_block
from .layout import MmaLayout

if TYPE_CHECKING:
    from ..llvm.lower import Lowerer

__all__ = ["LOAD_KINDS", "TilePredLoad", "pred_load_kind", "lower_pred_load", "TileStageStart", "TileStageWrite", "TileStagedStore", "stage_groups", "staged_bytes", "staged_epilogue", "staged_text",
           "lower_stage_start", "lower_stage_write", "lower_staged_store"]

_ids = itertools.count()
ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4}


def staged_epilogue() -> bool:
    """Whether register tiles are stored through shared memory: the default, checked and
    measured on the H200; `ANODIZE_TILE_EPILOGUE=direct` keeps the per-element stores.  A store
    whose staged tile does not fit the block's shared budget takes the per-element stores
    anyway (codegen/tile/lower.py `_staged`)."""
    return os.environ.get("ANODIZE_TILE_EPILOGUE", "staged") != "direct"


def pitch(lay: MmaLayout, es: int) -> int:
    """Bytes a row of the staged tile takes: padded so that the 8 rows one fragment store (or
    one stmatrix matrix) touches start 16 (or 32) bytes apart, in distinct banks."""
    return lay.n * es + (16 if es == 2 else 32)


def staged_bytes(lay: MmaLayout, es: int) -> int:
    """Dynamic shared bytes the staged tile takes, with the slack aligning it to 1024 bytes."""
    return lay.m * pitch(lay, es) + 1024


@dataclass(frozen=True)
class TilePredLoad:
    """`dest = slice[index] if index is inside slice else other`, as one predicated load (no
    branch): the fragment loops' masked loads (an epilogue's bias, residual or accumulator).
    The load is an inline-PTX statement with side effects: it stays where the fragment loop
    put it (a batch of loads, then their arithmetic and the stores), so LLVM neither hoists a
    tile's worth of loads ahead of the stores nor spends its strength reduction on branches."""

    dest: str
    slice: ir.SliceRef
    index: tuple[Any, ...]
    other: Any
    nc: bool  # the slice is read-only in the kernel: the non-coherent (texture) path
    span: Any = None
    row: Any = None  # an i64 local: the flat index of the element `offset` columns to its left (wrapping)
    offset: int = 0


LOAD_KINDS = {"f32": ("f32", "f", 32), "f16": ("b16", "h", 16), "bf16": ("b16", "h", 16), "i32": ("b32", "r", 32)}


def pred_load_kind(elem: str) -> bool:
    """Does `TilePredLoad` take elements of this type?"""
    return elem in LOAD_KINDS


@dataclass(frozen=True)
class TileStageStart:
    """The staged store's start: a barrier (the buffer is free), then `addr` (an i32 local) the
    thread's shared address its `TileStageWrite`s add their offsets to."""

    addr: str
    layout: MmaLayout
    es: int
    stmatrix: bool
    span: Any = None


@dataclass(frozen=True)
class TileStageWrite:
    """A group of the thread's registers into the staged tile at `addr + offset`: `values` the
    locals (the slice's element type), 8 registers for one `stmatrix.x4` (kind "stmatrix"),
    else a register pair (kind "b32": 16-bit, "v2f32")."""

    addr: str
    values: tuple[str, ...]
    offset: int
    kind: str
    span: Any = None


@dataclass(frozen=True)
class TileStagedStore:
    """The staged tile (written by the `TileStageWrite`s before it) into `slice` at `row0`,
    `col0` (i64 plain-IR expressions: the tile's first row and column), where inside."""

    slice: ir.SliceRef
    layout: MmaLayout
    row0: Any
    col0: Any
    threads: int
    elem: str  # f16 / bf16 / f32
    dynamic_smem: int
    span: Any = None


def stage_groups(lay: MmaLayout, es: int, stmatrix: bool) -> list[tuple[list[int], int, str]]:
    """The `TileStageWrite`s of a layout: (registers, offset, kind), registers ascending."""
    P = pitch(lay, es)
    out = []
    if stmatrix and es == 2 and lay.nt % 2 == 0:
        # stmatrix.x4: matrices (rows 0-7, n8 block j), (8-15, j), (0-7, j+1), (8-15, j+1) of an
        # m16 block, registers 4j .. 4j + 7 of it (pairs in that order)
        for mi in range(lay.mt):
            for jj in range(0, lay.nt, 2):
                i0 = (mi * lay.nt + jj) * 4
                out.append((list(range(i0, i0 + 8)), mi * lay.mstep * P + jj * 16, "stmatrix"))
        return out
    for mi in range(lay.mt):
        for ni in range(lay.nt):
            for h in range(2):
                i0 = (mi * lay.nt + ni) * 4 + 2 * h
                out.append(([i0, i0 + 1], (lay.mstep * mi + 8 * h) * P + 8 * ni * es, "v2f32" if es == 4 else "b32"))
    return out


def start_text(lay: MmaLayout, es: int, stmatrix: bool) -> str:
    """$0 (out): the thread's shared address for its writes; $1: the shared buffer's address."""
    P = pitch(lay, es)
    lines: list[str] = []
    e = lines.append
    e(".reg .b32 %er<8>;")
    e("mov.u32 %er0, %tid.x;")
    e("shr.u32 %er1, %er0, 5;")  # warp
    e("and.b32 %er2, %er0, 31;")  # lane
    align_smem(e, "%er3", "$1")
    e(f"div.u32 %er4, %er1, {lay.wn};")
    e(f"rem.u32 %er5, %er1, {lay.wn};")
    if lay.stacked:  # warp w of warpgroup g: rows 64 mt g + 16 w (wn = 1)
        e("and.b32 %er6, %er4, 3;")
        e("shr.u32 %er4, %er4, 2;")
        e(f"mul.lo.u32 %er4, %er4, {64 * lay.mt};")
        e("mad.lo.u32 %er4, %er6, 16, %er4;")
    else:
        e(f"mul.lo.u32 %er4, %er4, {lay.m // lay.wm};")  # the warp's first row of the tile
    e(f"mul.lo.u32 %er5, %er5, {lay.n // lay.wn * es};")  # its first column, in bytes
    if stmatrix and es == 2 and lay.nt % 2 == 0:  # lane i: row i % 8 of matrix i / 8
        e("and.b32 %er6, %er2, 15;")
        e("add.u32 %er6, %er6, %er4;")
        e(f"mad.lo.u32 %er6, %er6, {P}, %er3;")
        e("add.u32 %er6, %er6, %er5;")
        e("shr.u32 %er7, %er2, 4;")
        e("mad.lo.u32 $0, %er7, 16, %er6;")
    else:  # lane l: row l / 4, columns 2 (l % 4) (+ 1)
        e("shr.u32 %er6, %er2, 2;")
        e("add.u32 %er6, %er6, %er4;")
        e(f"mad.lo.u32 %er6, %er6, {P}, %er3;")
        e("add.u32 %er6, %er6, %er5;")
        e("and.b32 %er7, %er2, 3;")
        e(f"mad.lo.u32 $0, %er7, {2 * es}, %er6;")
    e("bar.sync 0;")  # the buffer is free: whoever used it last is done
    return ptx_block(lines)


def write_text(kind: str, offset: int) -> str:
    """$0: the address; then the values (4 packed b32 for stmatrix, 1 packed b32, 2 f32)."""
    if kind == "stmatrix":
        return f"stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0+{offset}], {{$1, $2, $3, $4}};"
    if kind == "b32":
        return f"st.shared.b32 [$0+{offset}], $1;"
    return f"st.shared.v2.f32 [$0+{offset}], {{$1, $2}};"


def staged_text(lay: MmaLayout, es: int, threads: int, uid: int) -> str:
    """The copy out of the staged tile; operands: the slice's address, its rows, its columns,
    the tile's first row and column (u64 each), and the shared buffer's address (u32)."""
    base, rows, cols, row0, col0, smem = (f"${i}" for i in range(6))
    P = pitch(lay, es)
    cpr = lay.n * es // 16  # 16-byte chunks a row
    epc = 16 // es
    u = f"{uid}"
    lines: list[str] = []
    e = lines.append
    declare_regs(e, "e", 8, 2, 40, 12)
    e("mov.u32 %er0, %tid.x;")
    align_smem(e, "%er3", smem)
    e("bar.sync 0;")
    # 16-byte stores need the slice's base and its row pitch 16-byte aligned
    e(f"mul.lo.s64 %ed0, {cols}, {es};")
    e(f"or.b64 %ed0, %ed0, {base};")
    e("and.b64 %ed0, %ed0, 15;")
    e("setp.eq.u64 %ep0, %ed0, 0;")
    e("mov.u32 %er20, %er0;")
    e(f"setp.ge.u32 %ep5, %er20, {lay.m * cpr};")  # (a tile of fewer chunks than threads)
    e(f"@%ep5 bra AZE_DONE_{u};")
    e(f"AZE_OUT_{u}:")
    e(f"div.u32 %er21, %er20, {cpr};")  # the chunk's row of the tile
    e(f"rem.u32 %er22, %er20, {cpr};")  # its chunk in the row
    e(f"mad.lo.u32 %er23, %er21, {P}, %er3;")
    e("shl.b32 %er24, %er22, 4;")
    e("add.u32 %er23, %er23, %er24;")
    e("ld.shared.v4.b32 {%er25, %er26, %er27, %er28}, [%er23];")
    e("cvt.u64.u32 %ed1, %er21;")
    e(f"add.s64 %ed1, %ed1, {row0};")  # the slice's row
    e(f"mul.wide.u32 %ed2, %er22, {epc};")
    e(f"add.s64 %ed2, %ed2, {col0};")  # the chunk's first column
    e(f"sub.s64 %ed3, {cols}, %ed2;")  # columns left in the row from there
    e(f"setp.lt.u64 %ep1, %ed1, {rows};")
    e(f"mad.lo.s64 %ed4, %ed1, {cols}, %ed2;")
    e(f"mul.lo.s64 %ed4, %ed4, {es};")
    e(f"add.s64 %ed4, %ed4, {base};")
    e(f"setp.ge.s64 %ep2, %ed3, {epc};")
    e("and.pred %ep2, %ep2, %ep1;")
    e("and.pred %ep2, %ep2, %ep0;")
    e("@%ep2 st.global.v4.b32 [%ed4], {%er25, %er26, %er27, %er28};")
    e(f"@%ep2 bra AZE_NEXT_{u};")
    # a chunk across the slice's edge (or an unaligned slice): element by element
    e("mov.u32 %er29, 0;")
    e("mov.u32 %er30, %er23;")
    e("mov.b64 %ed5, %ed4;")
    e(f"AZE_E_{u}:")
    e("cvt.u64.u32 %ed6, %er29;")
    e("setp.lt.s64 %ep3, %ed6, %ed3;")
    e("and.pred %ep3, %ep3, %ep1;")
    if es == 2:
        e("@%ep3 ld.shared.b16 %eh0, [%er30];")
        e("@%ep3 st.global.b16 [%ed5], %eh0;")
    else:
        e("@%ep3 ld.shared.b32 %er31, [%er30];")
        e("@%ep3 st.global.b32 [%ed5], %er31;")
    e(f"add.u32 %er30, %er30, {es};")
    e(f"add.s64 %ed5, %ed5, {es};")
    e("add.u32 %er29, %er29, 1;")
    e(f"setp.lt.u32 %ep4, %er29, {epc};")
    e(f"@%ep4 bra AZE_E_{u};")
    e(f"AZE_NEXT_{u}:")
    e(f"add.u32 %er20, %er20, {threads};")
    e(f"setp.lt.u32 %ep5, %er20, {lay.m * cpr};")
    e(f"@%ep5 bra AZE_OUT_{u};")
    e(f"AZE_DONE_{u}:")
    e("bar.sync 0;")  # the buffer is the next user's
    return ptx_block(lines)


@lowers(TilePredLoad)
def lower_pred_load(lw: Lowerer, s: TilePredLoad) -> None:
    """`s_TilePredLoad`: the bounds test and the address as the generic read forms them, the
    load predicated on the test over a move of `other`."""
    b = lw.b
    sv = lw.frame.slices[s.slice.name]
    elem = sv.ty.elem
    kind, reg, bits = LOAD_KINDS[elem.name]
    disp = 0
    if s.row is None:
        ok, ptr, _, _ = lw.bounds.address(sv, s.index)
    else:  # the same bounds test; the address from the row's flat index plus a displacement
        idx = lw.bounds.index_values(s.index)
        ok = b.icmp_unsigned("<", idx[0], sv.dims[0])
        for i, d in zip(idx[1:], sv.dims[1:], strict=True):
            ok = b.and_(ok, b.icmp_unsigned("<", i, d))
        ptr = b.gep(sv.ptr, [lw.expr(s.row)], inbounds=True, source_etype=mem_type(elem))
        disp = s.offset * bits // 8
    slot, ty = lw.frame.vars[s.dest]
    want = value_type(ty)
    other = lw.conv(lw.expr(s.other), s.other.ty, ty)
    raw = llir.IntType(bits) if kind != "f32" else want
    if other.type != raw:
        other = b.bitcast(other, raw)
    text = (f"{{ .reg .pred p; setp.ne.b32 p, $2, 0; mov.b{bits} $0, $3; "
            f"@p ld.global{'.nc' if s.nc else ''}.{kind} $0, [$1{f'+{disp}' if disp else ''}]; }}")
    fty = llir.FunctionType(raw, [I64, I32, raw])
    v = b.call(llir.InlineAsm(fty, text, f"={reg},l,r,{reg}", side_effect=True),
               [b.ptrtoint(ptr, I64), b.zext(ok, I32), other])
    b.store(v if v.type == want else b.bitcast(v, want), slot)


@lowers(TileStageStart)
def lower_stage_start(lw: Lowerer, s: TileStageStart) -> None:
    """`s_TileStageStart`: the barrier and the thread's shared address (`start_text`)."""
    b = lw.b
    gv = lw.module.globals.get("__az_tc_smem") or shared_buffer(lw.module)
    addr = asm_block(b, I32, start_text(s.layout, s.es, s.stmatrix), ["=r", "r"], [b.ptrtoint(gv, I32)])
    b.store(addr, lw.frame.vars[s.addr][0])


@lowers(TileStageWrite)
def lower_stage_write(lw: Lowerer, s: TileStageWrite) -> None:
    """`s_TileStageWrite`: one shared store (`write_text`); 16-bit values packed in pairs (the
    even register in the low half)."""
    b = lw.b
    vals = [b.load(lw.frame.vars[name][0]) for name in s.values]
    if s.kind != "v2f32":
        vals = [_pack(lw, lo, hi) for lo, hi in zip(vals[::2], vals[1::2])]
    args = [b.load(lw.frame.vars[s.addr][0]), *vals]
    asm_block(b, llir.VoidType(), write_text(s.kind, s.offset), ["r"] + ["f" if s.kind == "v2f32" else "r"] * len(vals), args)


def _pack(lw: Lowerer, lo: llir.Value, hi: llir.Value) -> llir.Value:
    """Two f16/bf16 elements as one b32, `lo` in the low half.  f32 values (the fragment loop
    keeps an f16 tile's values f32 until here) are rounded as a pair, `fptrunc <2 x float>`:
    one `cvt.rn.f16x2.f32` where two conversions, a shift and an or were six instructions for
    ptxas (the same rounding: to nearest even, as the scalar conversion)."""
    b = lw.b
    if lo.type == llir.FloatType():
        if not lw.t.native_f16_convert:
            lo, hi = lw.half_from(lo, "f16"), lw.half_from(hi, "f16")
        else:
            v = llir.Constant(llir.VectorType(lo.type, 2), None)
            v = b.insert_element(b.insert_element(v, lo, llir.Constant(I32, 0)), hi, llir.Constant(I32, 1))
            return b.bitcast(b.fptrunc(v, llir.VectorType(llir.HalfType(), 2)), I32)
    half = [x if x.type == I16 else b.bitcast(x, I16) for x in (lo, hi)]
    return b.or_(b.zext(half[0], I32), b.shl(b.zext(half[1], I32), llir.Constant(I32, 16)))


@lowers(TileStagedStore)
def lower_staged_store(lw: Lowerer, s: TileStagedStore) -> None:
    """`s_TileStagedStore` of the LLVM lowering: one inline-PTX call (`staged_text`)."""
    b = lw.b
    sv = lw.frame.slices[s.slice.name]
    es = ELEM_BYTES[s.elem]
    dims = [b.sext(d, I64) if d.type.width < 64 else d for d in sv.dims]
    row0, col0 = lw.expr(s.row0), lw.expr(s.col0)
    gv = lw.module.globals.get("__az_tc_smem") or shared_buffer(lw.module)
    args: list[llir.Value] = [b.ptrtoint(sv.ptr, I64), dims[0], dims[1], row0, col0, b.ptrtoint(gv, I32)]
    asm_block(b, llir.VoidType(), staged_text(s.layout, es, s.threads, next(_ids)), ["l"] * 5 + ["r"], args)

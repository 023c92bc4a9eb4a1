"""Paired epilogue loads: a fragment loop's loads of one row's two adjacent columns (the
accumulator layout's columns `2 (l % 4)` and `+ 1`) as one load of twice the width
(`ld.global.nc.b32` for f16 / bf16, `.v2.f32` / `.v2.b32` for 32-bit elements) in the loop's
fast copy, the copy that runs where the whole tile is inside every slice it loads and those
slices are aligned for pairs.

A fragment loop (codegen/tile/lower.py `_fragment_loop`) over a tree that loads tiles runs as

    if fast_condition:      (the same on every thread of the block: tested once a tile)
        the loop, each pair of a row's adjacent columns one `TilePairLoad` (no predicate)
    else:
        the loop as before: one predicated `TilePredLoad` an element (`other` outside)

`fast_condition` (`pair_condition`): every loaded tile inside its slice (`all_inside`, as the
element loops' fast copy tests it), each slice's base aligned to a pair and its row pitch even
(`TileVecAligned` with 2 lanes) and each load's column offset even.  A pair is two loads of one
slice from the same fragment row (the same row local) at the displacements `d` and `d + 1`,
the first from an even layout column (`2 (l % 4) + 8 ni`) read at the load's column offset plus
the fragment's column (no transpose): its column is then even, its address a multiple of twice
the element size, and both elements inside.  Odd pitches, unaligned bases and edge tiles take
the per-element loads: the same values read in every case.  A bias row (an (N,) tile broadcast
along the rows) pairs the same way; a loop that loads nothing, or nothing that pairs (a
transposed tile: a thread holds no two adjacent rows), has no second copy.

(Predicating each pair's wide load inside one copy -- the wide load where aligned and inside,
else the per-element loads -- made ptxas -O1 gather a GELU + residual tile's loads ahead of its
arithmetic and spill, 255 registers and 432-812 bytes, at 128 x 256 over 8 warps: the copy is
what keeps both halves straight-line code of the shape ptxas schedules well.)

`ANODIZE_TILE_PAIR_LOADS=0` (codegen/toolchain.py) keeps one copy, one load an element.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.records import dataclass
from anodize.language.types import I64 as I64_TY

from ..llvm.registry import lowers
from ..llvm.types import mem_type, value_type
from ..tensorcore.inline_ptx import I32, I64
from .compute import _and, _bin, _c, _eq
from .epilogue import LOAD_KINDS, TilePredLoad
from .rows_plan import TileVecAligned

if TYPE_CHECKING:
    from ..llvm.lower import Lowerer

__all__ = ["TilePairLoad", "pair_loads", "pair_condition", "pair_up", "wide_text", "lower_pair_load"]


def pair_loads() -> bool:
    """Whether fragment loops read adjacent columns in pairs where the tile allows: the
    default; `ANODIZE_TILE_PAIR_LOADS=0` keeps one load an element."""
    return os.environ.get("ANODIZE_TILE_PAIR_LOADS", "1") != "0"


def pair_condition(low: Any, tree: Any) -> ir.Expr | None:
    """The fast copy's condition for a fragment loop over `tree` (None: no second copy): every
    loaded tile inside its slice, every slice aligned for pairs, every column offset even."""
    if not pair_loads():
        return None
    loads = [ld for ld in low.loads_in(tree) if LOAD_KINDS.get(ld.ty.elem.name) and len(ld.offset) <= 2]
    if not loads or len(loads) != len(low.loads_in(tree)):
        return None  # (a load of another kind or rank: no pairs, `frag_load`)
    inside = low.all_inside(tree)
    uniq: dict[str, ir.SliceRef] = {}
    for ld in loads:
        uniq.setdefault(ld.slice.name, ld.slice)
    conds: list[ir.Expr] = [inside, TileVecAligned(tuple(uniq.values()), 2)]  # type: ignore[list-item]
    conds += [_eq(_bin("%", ld.offset[-1], _c(2)), _c(0), I64_TY) for ld in loads]
    return _and(*conds)


@dataclass(frozen=True)
class TilePairLoad:
    """`lo`, `hi` = slice elements `lo_index`, `hi_index` (the next column of the same row),
    read as one wide load at `row` (the row local's flat index) plus `offset` elements: only in
    a fast copy, where the pair is inside and aligned (`pair_condition`)."""

    lo: str
    hi: str
    slice: ir.SliceRef
    lo_index: tuple[Any, ...]
    hi_index: tuple[Any, ...]
    nc: bool
    row: Any
    offset: int
    span: Any = None


def pair_up(stmts: list[Any], even: dict[str, bool]) -> list[Any]:
    """`stmts` (a batch of a fast copy's loads) with each two `TilePredLoad`s of one row's
    adjacent columns made one `TilePairLoad` at the place of the first: the first's
    destination in `even` (it reads an even layout column at the load's column offset plus
    the fragment's column).  Only loads and their row locals' assignments may lie between
    the two (so the second moves before nothing it reads)."""
    rows = {s.row.name for s in stmts if isinstance(s, TilePredLoad) and s.row is not None}
    out: list[Any] = []
    pending: dict[tuple[Any, ...], int] = {}  # (slice, row, nc, displacement) -> the first's place in out
    for s in stmts:
        if not isinstance(s, TilePredLoad):
            if not (isinstance(s, ir.Assign) and s.name in rows):
                pending.clear()
            out.append(s)
            continue
        key = (s.slice.name, s.row.name if s.row is not None else None, s.nc)
        at = pending.pop((*key, s.offset - 1), None) if s.row is not None else None
        if at is not None:
            a = out[at]
            out[at] = TilePairLoad(a.dest, s.dest, a.slice, a.index, s.index, a.nc, a.row, a.offset, a.span)
            continue
        if s.row is not None and even.get(s.dest, False):
            pending[(*key, s.offset)] = len(out)
        out.append(s)
    return out


def wide_text(kind: str, bits: int, nc: bool, disp: int) -> str:
    """One pair's load, `disp` bytes past the row address (16-bit elements: $0 the pair as one
    b32, the first in the low half, the address $1; 32-bit: $0, $1 the two, the address $2)."""
    ld = f"ld.global{'.nc' if nc else ''}"
    if bits == 16:
        return f"{ld}.b32 $0, [$1+{disp}];" if disp else f"{ld}.b32 $0, [$1];"
    return f"{ld}.v2.{kind} {{$0, $1}}, [$2+{disp}];" if disp else f"{ld}.v2.{kind} {{$0, $1}}, [$2];"


@lowers(TilePairLoad)
def lower_pair_load(lw: Lowerer, p: TilePairLoad) -> None:
    """`s_TilePairLoad`: the row's address (as `TilePredLoad` forms it), one inline-PTX load
    (`wide_text`, a side effect: it stays in its batch), the halves into `lo` and `hi`."""
    b = lw.b
    sv = lw.frame.slices[p.slice.name]
    kind, reg, bits = LOAD_KINDS[sv.ty.elem.name]
    ptr = b.ptrtoint(b.gep(sv.ptr, [lw.expr(p.row)], inbounds=True, source_etype=mem_type(sv.ty.elem)), I64)
    text = wide_text(kind, bits, p.nc, p.offset * bits // 8)
    _, ty = lw.frame.vars[p.lo]
    want = value_type(ty)
    raw = llir.IntType(bits) if kind != "f32" else want
    if bits == 16:  # one b32 register, split: the halves feed their conversions directly
        w = b.call(llir.InlineAsm(llir.FunctionType(I32, [I64]), text, "=r,l", side_effect=True), [ptr])
        halves = [b.trunc(w, raw), b.trunc(b.lshr(w, llir.Constant(I32, 16)), raw)]
    else:
        fty = llir.FunctionType(llir.LiteralStructType([raw, raw]), [I64])
        v = b.call(llir.InlineAsm(fty, text, f"={reg},={reg},l", side_effect=True), [ptr])
        halves = [b.extract_value(v, k) for k in range(2)]
    for x, name in zip(halves, (p.lo, p.hi), strict=True):
        b.store(x if x.type == want else b.bitcast(x, want), lw.frame.vars[name][0])

"""`TileLoadBatch`: a fragment loop's batch of masked loads with each pair of adjacent columns
of one row (the accumulator layout's columns `2 (l % 4)` and `+ 1`) read as one load of twice
the width where the pair is aligned to that width and both its elements are inside the slice.

A fragment loop (codegen/tile/lower.py `_fragment_loop`) issues a batch of elements' masked
loads ahead of their arithmetic, one `TilePredLoad` (codegen/tile/epilogue.py) an element.
`pair_up` finds in a batch the two loads of one slice whose flat indices differ by one along
the row (the same row local, displacements `d` and `d + 1`: a `TilePairLoad`) and makes the
batch one `TileLoadBatch`.  Each pair's test: both elements inside (each as the per-element
load tests it) and its address a multiple of twice the element size (the slice's base, its
row pitch and the column together; LLVM folds the constant displacement away, so that test
is one a row address, not one a pair).  Two lowerings:

- `ANODIZE_TILE_PAIR_LOADS=1`: a pair is one predicated block (`pair_text`, no branch):
  `@wide ld.global.nc.b32` (`.v2.f32` / `.v2.b32` for 32-bit elements) over the two
  per-element loads predicated on `inside and not wide`, over moves of `other`;
- `ANODIZE_TILE_PAIR_LOADS=branch`: one test for the whole batch, then either every pair's
  wide load (`wide_text`) or every element's predicated load (a branch a batch).

Both read exactly the values the per-element loads read (`other` outside): one access a pair
in every interior tile with an even row pitch, the per-element loads at the slice's edges and
for odd pitches.  A bias row (an (N,) tile broadcast along the rows) pairs the same way.

Off by default (unset or `0`: one load an element): ptxas -O1 (the wgmma kernels' level)
spills with the wide loads in the GELU + residual GEMM at 128 x 256 over 8 warps (255
registers, 812 bytes; 200 and none without), and no GPU has timed either form yet.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.records import dataclass

from ..llvm.registry import lowers
from ..llvm.types import mem_type, value_type
from ..tensorcore.inline_ptx import I32, I64
from .epilogue import LOAD_KINDS, TilePredLoad, lower_pred_load

if TYPE_CHECKING:
    from ..llvm.lower import Lowerer

__all__ = ["TilePairLoad", "TileLoadBatch", "pair_loads", "pair_up", "wide_text", "lower_load_batch"]


def pair_loads() -> bool:
    """Whether fragment loops pair adjacent columns' loads: `ANODIZE_TILE_PAIR_LOADS=1` (one
    predicated block a pair) or `=branch` (one branch a batch); unset, one load an element."""
    return os.environ.get("ANODIZE_TILE_PAIR_LOADS", "") in ("1", "branch")


@dataclass(frozen=True)
class TilePairLoad:
    """`lo`, `hi` = slice elements `lo_index`, `hi_index` (the next column of the same row),
    each `other` outside the slice: the pair of `TilePredLoad`s it replaces (same slice, row
    local, `other` and path), `offset` the displacement of `lo` from `row`."""

    lo: str
    hi: str
    slice: ir.SliceRef
    lo_index: tuple[Any, ...]
    hi_index: tuple[Any, ...]
    other: Any
    nc: bool
    row: Any
    offset: int
    span: Any = None

    def elements(self) -> tuple[TilePredLoad, TilePredLoad]:
        """The two per-element loads."""
        return (TilePredLoad(self.lo, self.slice, self.lo_index, self.other, self.nc, self.span, self.row, self.offset),
                TilePredLoad(self.hi, self.slice, self.hi_index, self.other, self.nc, self.span, self.row, self.offset + 1))


@dataclass(frozen=True)
class TileLoadBatch:
    """A batch's loads: `pairs` wide where all are aligned and inside, `singles` per element."""

    pairs: tuple[TilePairLoad, ...]
    singles: tuple[TilePredLoad, ...]
    span: Any = None


def pair_up(stmts: list[Any]) -> list[Any]:
    """`stmts` (a batch of a fragment loop's loads and their row locals' assignments) as the
    assignments, then one `TileLoadBatch` of its loads with each two of one row's adjacent
    columns paired; unchanged where no two pair or anything else lies among them."""
    rows = {s.row.name for s in stmts if isinstance(s, TilePredLoad) and s.row is not None}
    if not all(isinstance(s, TilePredLoad) or (isinstance(s, ir.Assign) and s.name in rows) for s in stmts):
        return stmts
    loads: list[Any] = []
    pending: dict[tuple[Any, ...], int] = {}  # (slice, row, nc, other, displacement) -> its place in loads
    for s in stmts:
        if not isinstance(s, TilePredLoad) or s.row is None:
            if isinstance(s, TilePredLoad):
                loads.append(s)
            continue
        key = (s.slice.name, s.row.name, s.nc, repr(s.other))
        for lo_d, mate in ((s.offset - 1, True), (s.offset + 1, False)):
            at = pending.pop((*key, lo_d), None)
            if at is not None:
                a, b = (loads[at], s) if mate else (s, loads[at])
                loads[at] = TilePairLoad(a.dest, b.dest, a.slice, a.index, b.index, a.other, a.nc, a.row, a.offset, a.span)
                break
        else:
            pending[(*key, s.offset)] = len(loads)
            loads.append(s)
    pairs = tuple(x for x in loads if isinstance(x, TilePairLoad))
    if not pairs:
        return stmts
    assigns = [s for s in stmts if not isinstance(s, TilePredLoad)]
    return [*assigns, TileLoadBatch(pairs, tuple(x for x in loads if isinstance(x, TilePredLoad)))]


def pair_text(kind: str, bits: int, nc: bool, disp: int) -> str:
    """One pair's predicated block (no branch).  32-bit elements: $0, $1 (out) the two elements,
    then $2 the row address (u64, `disp` bytes to the first element), $3, $4 each element's
    bounds test, $5 the pair's alignment (u32, non-zero: holds), $6 `other`.  16-bit elements:
    $0 (out) the pair packed (the first in the low half, as one b32 load reads it), the inputs
    one place earlier."""
    ld = f"ld.global{'.nc' if nc else ''}"
    o = 1 if bits == 16 else 2  # the first input
    at = f"[${o}+{disp}]" if disp else f"[${o}]"
    at1 = f"[${o}+{disp + bits // 8}]"
    lines = ["{ .reg .pred %azq<3>;"]
    if bits == 16:
        lines.append(".reg .b16 %azh<2>;")
    lines += [
        f"setp.ne.b32 %azq0, ${o + 1}, 0;",
        f"setp.ne.b32 %azq1, ${o + 2}, 0;",
        f"setp.ne.b32 %azq2, ${o + 3}, 0;",
        "and.pred %azq2, %azq2, %azq0;",
        "and.pred %azq2, %azq2, %azq1;",  # wide: both inside, aligned
        "xor.pred %azq0, %azq0, %azq2;",  # (wide implies each test: inside and not wide)
        "xor.pred %azq1, %azq1, %azq2;"]
    if bits == 16:
        lines += [f"mov.b16 %azh0, ${o + 4};",
                  f"mov.b16 %azh1, ${o + 4};",
                  f"@%azq0 {ld}.b16 %azh0, {at};",
                  f"@%azq1 {ld}.b16 %azh1, {at1};",
                  "mov.b32 $0, {%azh0, %azh1};",
                  f"@%azq2 {ld}.b32 $0, {at};"]
    else:
        lines += [f"mov.b{bits} $0, ${o + 4};",
                  f"mov.b{bits} $1, ${o + 4};",
                  f"@%azq0 {ld}.{kind} $0, {at};",
                  f"@%azq1 {ld}.{kind} $1, {at1};",
                  f"@%azq2 {ld}.v2.{kind} {{$0, $1}}, {at};"]
    return "\n".join(lines + ["}"])


def wide_text(kind: str, bits: int, nc: bool, disp: int) -> str:
    """One pair's load, `disp` bytes past the row address $1 (16-bit elements: $0 the pair as
    one b32, the first in the low half; 32-bit: $0, $1 the two, the address $2)."""
    ld = f"ld.global{'.nc' if nc else ''}"
    if bits == 16:
        return f"{ld}.b32 $0, [$1+{disp}];" if disp else f"{ld}.b32 $0, [$1];"
    return f"{ld}.v2.{kind} {{$0, $1}}, [$2+{disp}];" if disp else f"{ld}.v2.{kind} {{$0, $1}}, [$2];"


def _inside(lw: Lowerer, sv: Any, index: tuple[Any, ...]) -> llir.Value:
    """The element's bounds test, as `TilePredLoad`'s (unsigned: a negative index is outside)."""
    b = lw.b
    idx = lw.bounds.index_values(index)
    ok = b.icmp_unsigned("<", idx[0], sv.dims[0])
    for i, d in zip(idx[1:], sv.dims[1:], strict=True):
        ok = b.and_(ok, b.icmp_unsigned("<", i, d))
    return ok


@lowers(TileLoadBatch)
def lower_load_batch(lw: Lowerer, s: TileLoadBatch) -> None:
    """`s_TileLoadBatch`: the batch's test (every pair inside, aligned), then the wide loads
    (`wide_text`) or the per-element ones (`lower_pred_load`)."""
    b = lw.b
    fast: llir.Value | None = None
    addrs: list[llir.Value] = []
    tests: list[list[llir.Value]] = []
    aligns: list[llir.Value] = []
    branch = os.environ.get("ANODIZE_TILE_PAIR_LOADS", "") == "branch"
    for p in s.pairs:
        sv = lw.frame.slices[p.slice.name]
        bits = LOAD_KINDS[sv.ty.elem.name][2]
        ptr = b.ptrtoint(b.gep(sv.ptr, [lw.expr(p.row)], inbounds=True, source_etype=mem_type(sv.ty.elem)), I64)
        addrs.append(ptr)
        disp = p.offset * bits // 8
        low_bits = b.and_(b.add(ptr, llir.Constant(I64, disp)), llir.Constant(I64, 2 * bits // 8 - 1))
        oks = [_inside(lw, sv, p.lo_index), _inside(lw, sv, p.hi_index)]
        aligned = b.icmp_unsigned("==", low_bits, llir.Constant(I64, 0))
        tests.append(oks)
        aligns.append(aligned)
        ok = b.and_(b.and_(oks[0], oks[1]), aligned)
        fast = ok if fast is None or not branch else b.and_(fast, ok)
    assert fast is not None
    if not branch:
        for p, ptr, aligned, oks in zip(s.pairs, addrs, aligns, tests, strict=True):
            _predicated(lw, p, ptr, aligned, oks)
        for one in s.singles:
            lower_pred_load(lw, one)
        return
    with b.if_else(fast) as (wide, narrow):
        with wide:
            for p, ptr in zip(s.pairs, addrs, strict=True):
                _wide(lw, p, ptr)
            for one in s.singles:
                lower_pred_load(lw, one)
        with narrow:
            for p in s.pairs:
                for one in p.elements():
                    lower_pred_load(lw, one)
            for one in s.singles:
                lower_pred_load(lw, one)


def _predicated(lw: Lowerer, p: TilePairLoad, ptr: llir.Value, aligned: llir.Value, oks: list[llir.Value]) -> None:
    b = lw.b
    sv = lw.frame.slices[p.slice.name]
    kind, reg, bits = LOAD_KINDS[sv.ty.elem.name]
    text = pair_text(kind, bits, p.nc, p.offset * bits // 8)
    _, ty = lw.frame.vars[p.lo]
    want = value_type(ty)
    other = lw.conv(lw.expr(p.other), p.other.ty, ty)
    raw = llir.IntType(bits) if kind != "f32" else want
    if other.type != raw:
        other = b.bitcast(other, raw)
    args = [ptr, *(b.zext(x, I32) for x in (*oks, aligned)), other]
    if bits == 16:  # one b32 register, split: the halves feed their conversions directly
        fty = llir.FunctionType(I32, [I64, I32, I32, I32, raw])
        w = b.call(llir.InlineAsm(fty, text, "=r,l,r,r,r,h", side_effect=True), args)
        halves = [b.trunc(w, raw), b.trunc(b.lshr(w, llir.Constant(I32, 16)), raw)]
    else:
        fty = llir.FunctionType(llir.LiteralStructType([raw, raw]), [I64, I32, I32, I32, raw])
        v = b.call(llir.InlineAsm(fty, text, f"={reg},={reg},l,r,r,r,{reg}", side_effect=True), args)
        halves = [b.extract_value(v, k) for k in range(2)]
    for x, name in zip(halves, (p.lo, p.hi), strict=True):
        b.store(x if x.type == want else b.bitcast(x, want), lw.frame.vars[name][0])


def _wide(lw: Lowerer, p: TilePairLoad, ptr: llir.Value) -> None:
    b = lw.b
    sv = lw.frame.slices[p.slice.name]
    kind, reg, bits = LOAD_KINDS[sv.ty.elem.name]
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

"""The plan of codegen/tile/rows.py: which tile kernels keep their tiles in registers
(`row_plan`), the layout of the main shape over the block (`RowLayout`), and the codegen-only
plain-IR nodes of that lowering (vector accesses and their alignment test, lowered by
`rows_llvm.py`).  docs/tiles.md, "Row-shaped kernels in registers"."""

from __future__ import annotations

from anodize.language.records import dataclass
from typing import Any

from anodize.language import ir, tile_ir
from anodize.language.ir_walk import walk
from anodize.language.tile_ir import (
    TileArange,
    TileElem,
    TileFull,
    TileId,
    TileIdPart,
    TileLoad,
    TileReduce,
    TileReshape,
    TileStore,
    TileTy,
    TileWitnessTy,
)
from anodize.language.types import BOOL, I32, I64, ScalarTy

from .compute import _and, _bin, _c, _eq
from .ops import COMPUTES, ELEMENTWISE
from .rows_form import row_form

__all__ = ["RowLayout", "row_plan", "load_sig", "sig", "TileVecLoad", "TileVecStore", "TileVecAligned", "MAX_PER_THREAD"]

MAX_PER_THREAD = 64  # elements of S per thread (registers per full-shape tile); more: the generic lowering
# the tile IR rows.py lowers: a kernel with any other tile node (a matmul, a transpose, a node added to
# language/tile_ir.py since) runs the generic lowering, so a new node needs its plain.py lowering only
ROW_NODES = (TileTy, TileWitnessTy, TileId, TileIdPart, TileLoad, TileFull, TileElem, TileReduce, TileReshape, TileArange, TileStore)


# ---- codegen-only plain-IR nodes (lowered by rows_llvm.py; emitted for the GPU only) ---------


@dataclass(frozen=True)
class TileVecLoad:
    """`dests[v] = slice[index + (0, .., v)]` for every lane v, as one vector access per 16 bytes
    (the caller has checked the chunk inside and aligned)."""

    slice: ir.SliceRef
    index: tuple[ir.Expr, ...]
    dests: tuple[str, ...]
    elem: ScalarTy
    span: Any = None


@dataclass(frozen=True)
class TileVecStore:
    slice: ir.SliceRef
    index: tuple[ir.Expr, ...]
    values: tuple[ir.Expr, ...]
    span: Any = None


@dataclass(frozen=True)
class TileVecAligned:
    """True when every slice's base is aligned for `lanes`-element vector accesses (16 bytes at
    most) and, for a 2-D slice, its column count is a multiple of `lanes` (every row aligned)."""

    slices: tuple[ir.SliceRef, ...]
    lanes: int
    ty: ScalarTy = BOOL
    span: Any = None


# ---- the layout ------------------------------------------------------------------------------------


class RowLayout:
    """The distribution of main shape `shape` over `T` threads in chunks of `V` lanes.

    A *ragged* layout (`ragged`: a row length C that is neither a multiple of T * V nor a
    divisor of it, say 5000 over 256 threads) spans the block like a multiple does, with
    m = ceil(C / (T * V)) passes a row: in the last pass of each row thread t's chunk holds
    columns past C when `(m - 1) * T * V + t * V >= C` (C a multiple of V: a chunk is all in or
    all out).  Those positions exist in registers only: `valid(i)` is the condition, and the
    lowering never loads, stores or reduces them."""

    def __init__(self, shape: tuple[int, ...], T: int, V: int):
        self.shape = shape
        self.rank = len(shape)
        self.R, self.C = (1, shape[0]) if self.rank == 1 else shape
        self.T, self.V = T, V
        self.ragged = self.C % (T * V) != 0 and not self.divides(self.C, T, V)
        self.spans = self.C % (T * V) == 0 or self.ragged  # a row spans whole passes of the block
        if self.spans:
            self.m, self.G, self.P = -(-self.C // (T * V)), T, 0
            self.K = self.R * self.m
        else:
            self.m, self.G, self.P = 0, self.C // V, T * V // self.C
            self.K = self.R * self.C // (T * V)

    @staticmethod
    def divides(C: int, T: int, V: int) -> bool:
        """Does a pass of the block hold whole rows, G = C / V threads a row (G a power of two
        up to 32, or a multiple of 32)?"""
        if (T * V) % C or C % V:
            return False
        G = C // V
        return (G <= 32 and G & (G - 1) == 0) or G % 32 == 0

    @staticmethod
    def fits(shape: tuple[int, ...], T: int, V: int) -> bool:
        R, C = (1, shape[0]) if len(shape) == 1 else shape
        if C % V:
            return False
        if C % (T * V) == 0 or RowLayout.divides(C, T, V):
            return (R * C) % (T * V) == 0 and R * C >= T * V and R * C // T <= MAX_PER_THREAD
        # ragged: m passes a row, every element a register (no padding to a power of two)
        return R * -(-C // (T * V)) * V <= MAX_PER_THREAD

    def valid(self, i: int) -> ir.Expr | None:
        """The condition under which this thread's chunk i is inside the main shape (None:
        always); only the last pass of a row of a ragged layout has one."""
        if not self.ragged or i % self.m != self.m - 1:
            return None
        first = (self.m - 1) * self.T * self.V
        return ir.Compare(("<",), (_bin("+", _c(first), _bin("*", self.tid(), _c(self.V))), _c(self.C)), BOOL, None, (I64,))

    def tid(self) -> ir.Expr:
        return ir.Cast(ir.RawId("tid", "x", I32), I64)

    def row(self, i: int) -> ir.Expr:
        if self.spans:
            return _c(i // self.m)
        return _bin("+", _c(i * self.P), _bin("//", self.tid(), _c(self.G)))

    def col(self, i: int, v: int) -> ir.Expr:
        if self.spans:
            return _bin("+", _bin("*", self.tid(), _c(self.V)), _c((i % self.m) * self.T * self.V + v))
        return _bin("+", _bin("*", _bin("%", self.tid(), _c(self.G)), _c(self.V)), _c(v))

    def row_key(self, i: int) -> int:
        return i // self.m if self.spans else i

    def col_key(self, i: int, v: int) -> tuple[int, int]:
        return (i % self.m if self.spans else 0, v)

    def axes_of(self, shape: tuple[int, ...]) -> tuple[bool, bool]:
        """(varies along S's rows, varies along S's columns) for a tile of `shape`."""
        if self.rank == 1 or len(shape) == 1:
            return False, shape[-1] > 1
        return shape[0] > 1, shape[1] > 1

    def key(self, shape: tuple[int, ...], i: int, v: int) -> tuple[Any, Any]:
        r, c = self.axes_of(shape)
        return (self.row_key(i) if r else None, self.col_key(i, v) if c else None)

    def coords(self, shape: tuple[int, ...], i: int, v: int) -> list[ir.Expr]:
        r, c = self.axes_of(shape)
        col = self.col(i, v) if c else _c(0)
        if len(shape) == 1:
            return [col]
        return [self.row(i) if r else _c(0), col]

    def positions(self, shape: tuple[int, ...]) -> list[tuple[Any, tuple[int, int]]]:
        """(key, first position (i, v) holding it) for every element of `shape` this thread holds."""
        seen: dict[Any, tuple[int, int]] = {}
        for i in range(self.K):
            for v in range(self.V):
                seen.setdefault(self.key(shape, i, v), (i, v))
        return list(seen.items())

    def owner(self, shape: tuple[int, ...], i: int, v: int) -> ir.Expr | None:
        """The condition under which this thread stores the element of `shape` it holds at
        position (i, v) (the first position of its key): coordinate 0 on every broadcast axis."""
        r, c = self.axes_of(shape)
        conds = []
        if self.rank == 2 and not r:
            row = self.row(i)
            if not isinstance(row, ir.Const):  # a constant row is 0 here (the key's first position)
                conds.append(_eq(row, _c(0), I64))
        if not c:
            conds.append(_eq(self.col(i, v), _c(0), I64))
        return _and(*conds) if conds else None


# ---- the plan: is every tile of the kernel one main shape or a broadcast of it? ------------------


def _broadcasts(d: tuple[int, ...], s: tuple[int, ...]) -> bool:
    if len(d) > len(s):
        return False
    return all(a == b or a == 1 for a, b in zip(d[::-1], s[::-1]))


def row_plan(k: ir.KernelIR, threads: int) -> RowLayout | None:
    """The register layout for tile kernel `k` on `threads` threads, or None when the generic
    lowering must run it (a tile node other than `ROW_NODES`: a matmul, a transpose; a reduction of another shape than S, a shape that does not broadcast to the largest, too many elements per thread,
    a load from an output that is not the program's own tile of S, a reshape that its row
    form (rows_form.py) keeps, other than a unit axis added to `tile.arange`, a 3-D or
    0-D tile).  `k` is read in its row form, which the lowering is then given."""
    if threads <= 1:
        return None
    k = row_form(k)
    nodes = list(walk(k.body, stop=(ir.FuncIR,)))
    shapes = {t.shape for _, t in k.locals if isinstance(t, TileTy)}
    stores: dict[str, set[tuple[int, ...]]] = {}
    under: set[int] = set()  # the aranges that reshapes give their axis (their own shape is moot)
    for n in nodes:
        if type(n).__module__ == tile_ir.__name__ and not isinstance(n, ROW_NODES) or type(n) in ELEMENTWISE or type(n) in COMPUTES:
            return None
        if isinstance(n, TileReshape):
            if not arange_axis(n):
                return None
            under.add(id(n.value))
        ty = getattr(n, "ty", None)
        if isinstance(ty, TileTy) and id(n) not in under:
            shapes.add(ty.shape)
        if isinstance(n, TileStore):
            shapes.add(n.value.ty.shape)
            stores.setdefault(n.slice.name, set()).add(n.value.ty.shape)
    if not shapes or any(not 1 <= len(s) <= 2 for s in shapes):
        return None
    main = max(shapes, key=lambda s: (_size(s), len(s)))
    if any(not _broadcasts(s, main) for s in shapes):
        return None
    for n in nodes:
        if isinstance(n, TileReduce):
            vt = n.value.ty
            full = len(n.axes) == vt.rank
            rows = vt.rank == 2 and len(n.axes) == 1  # along the rows, or down the columns
            if vt.shape != main or not (full or rows) or n.ty.elem.bits not in (32, 64) or n.ty.elem.is_bool:
                return None
        if isinstance(n, TileLoad) and n.slice.ty.kind.output:
            if n.ty.shape != main or not n.own or stores.get(n.slice.name, {main}) != {main}:
                return None
    for V in (4, 2, 1):
        if RowLayout.fits(main, threads, V):
            return RowLayout(main, threads, V)
    return None


def arange_axis(n: TileReshape) -> bool:
    """Is `n` a `tile.arange` with axes of extent 1 added (`rows[:, None]`)?"""
    return isinstance(n.value, TileArange) and [d for d in n.ty.shape if d != 1] == list(n.value.ty.shape)


def sig(e: Any) -> Any:
    """A structural key of a scalar expression made of constants, program ids and extents (None
    for anything that may change value during the kernel)."""
    if isinstance(e, ir.Const):
        return ("c", e.value, e.ty.name)
    if isinstance(e, TileIdPart):
        return ("pid", e.rank, e.axis)
    if isinstance(e, ir.Len):
        return ("len", e.slice.name, e.axis)
    if isinstance(e, ir.RawId):
        return ("raw", e.reg, e.axis)
    if isinstance(e, ir.Cast):
        inner = sig(e.value)
        return None if inner is None else ("cast", inner, e.ty.name)
    if isinstance(e, ir.BinOp):
        a, b = sig(e.left), sig(e.right)
        return None if a is None or b is None else ("bin", e.op, a, b, e.ty.name)
    return None


def load_sig(ld: TileLoad) -> Any:
    offs = tuple(sig(o) for o in ld.offset)
    if any(o is None for o in offs):
        return None
    return (ld.slice.name, offs, ld.ty.shape, ld.ty.elem.name)


def _size(s: tuple[int, ...]) -> int:
    n = 1
    for d in s:
        n *= d
    return n



"""The Tile model's types and typed-IR nodes (built by `typer_tiles.py`, lowered by
`codegen/tile/plain.py` into the plain kernel IR before `codegen/llvm/lower.py` sees it).

A tile value has a constant shape (rank 0 to 3; rank 0 is what a reduction over every axis
leaves, rank 3 a batched tile) and an element type: `TileTy`.  Tile
expressions are trees; element-wise operations are `TileElem` nodes whose `template` is an
ordinary *scalar* IR expression (typed by the scalar typer itself, so promotion, weak literals
and half-precision rounding are exactly those of scalar code) over placeholder locals, one per
tile input.  A program's tile witness (`tile.program_id_1d/2d/3d()`) has type `TileWitnessTy`;
it can only come from those calls, so `tile.store(dst, pid, v)` writes exactly the tile the
program owns.
"""

from __future__ import annotations

from anodize.language.records import dataclass

from anodize.language.diagnostics import Span
from anodize.language.ir import Expr, SliceRef
from anodize.language.types import I64, ScalarTy


@dataclass(frozen=True)
class TileTy:
    elem: ScalarTy
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __str__(self) -> str:
        return f"Tile[{self.elem}, {self.shape if self.rank != 1 else '(' + str(self.shape[0]) + ',)'}]"


@dataclass(frozen=True)
class TileWitnessTy:
    rank: int

    def __str__(self) -> str:
        return f"TileId{self.rank}D"


# ---- expressions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TileId:
    """`tile.program_id_1d()` / `program_id_2d()` / `program_id_3d()`: this program's tile
    coordinates."""

    rank: int
    ty: TileWitnessTy
    span: Span | None = None


@dataclass(frozen=True)
class TileIdPart:
    """`pid.get()`, `pid.row`, `pid.col`, `pid.layer`: a tile coordinate (i64).  `axis` counts
    from the outermost: for rank 2, 0 is the row (CUDA's y), 1 the column (x); for rank 3, 0 is
    the layer (z), 1 the row (y), 2 the column (x)."""

    rank: int
    axis: int
    ty: ScalarTy = I64
    span: Span | None = None


@dataclass(frozen=True)
class TileLoad:
    """`tile.load(src, offset, shape, other=)`: element `e` of the tile is `src[offset + e]`,
    or `other` where that is outside `src` (`own`: the offset is the program's own tile of an
    output, `pid * shape`)."""

    slice: SliceRef
    offset: tuple[Expr, ...]  # one i64 per axis
    other: Expr  # a scalar of the element type
    own: bool
    ty: TileTy
    span: Span | None = None


@dataclass(frozen=True)
class TileFull:
    value: Expr  # a scalar of the element type
    ty: TileTy
    span: Span | None = None


@dataclass(frozen=True)
class TileElem:
    """An element-wise operation: element `e` is `template` with each placeholder local of
    `inputs` bound to element `e` of its tile (broadcast NumPy-style to `ty.shape`)."""

    template: Expr
    inputs: tuple[tuple[str, Expr], ...]  # (placeholder local name, tile expression)
    ty: TileTy
    span: Span | None = None


@dataclass(frozen=True)
class TileTrans:
    value: Expr
    ty: TileTy
    span: Span | None = None


@dataclass(frozen=True)
class TileReduce:
    """`tile.sum/max/min(x, axis=, keepdims=True)`: the reduced axes are kept with extent 1 (so
    the result broadcasts against `x`); without `axis` every axis is reduced.  The language's
    default, `keepdims=False`, is this node under a `TileReshape` that drops the reduced axes
    (the typer builds it): a reduction node always has its operand's rank."""

    op: str  # "sum" | "max" | "min"
    value: Expr
    axes: tuple[int, ...]
    ty: TileTy
    span: Span | None = None


@dataclass(frozen=True)
class TileReshape:
    """`x.reshape(shape)`, `tile.expand_dims(x, axis)`, `x[:, None]`, and a reduction without
    `keepdims`: the elements of `value` in row-major order, as a tile of `ty.shape` (the same
    size, the same element type)."""

    value: Expr
    ty: TileTy
    span: Span | None = None


@dataclass(frozen=True)
class TileArange:
    """`tile.arange(n)`: the 1-D i32 tile `0, 1, .., n - 1` (`ty` is `Tile[i32, (n,)]`)."""

    ty: TileTy
    span: Span | None = None


@dataclass(frozen=True)
class TileMatmul:
    """`tile.matmul(x, y, acc)`: `acc + x @ y` in f32 (x: (M, K), y: (K, N), acc: (M, N) f32)."""

    x: Expr
    y: Expr
    acc: Expr | None
    allow_tf32: bool
    ty: TileTy
    span: Span | None = None


# ---- statements ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TileStore:
    """`tile.store(dst, pid, value)`: the tile the program owns, `pid * value.shape`, masked
    at the edges of `dst`."""

    slice: SliceRef
    value: Expr
    span: Span | None = None


TILE_EXPRS = (TileId, TileIdPart, TileLoad, TileFull, TileElem, TileTrans, TileReduce, TileReshape, TileArange, TileMatmul)


def is_tile(e: object) -> bool:
    return isinstance(getattr(e, "ty", None), TileTy)

"""The Tile model (`az.tile`, also `from anodize import tile`): tile kernels.

A tile kernel (`@az.tile_kernel`, stacked with `@az.launch_contract(domain=1|2|3)`, no `block`)
runs one *program* per tile of its output: `tile.program_id_1d()` / `program_id_2d()` /
`program_id_3d()` give the program's tile id, `tile.load` reads a tile of an input at any offset (masked at the
edges), and `tile.store(dst, pid, value)` writes the one tile of an output the program owns.
The compiler picks the threads, shared memory and (for `tile.matmul`) the instructions.
Launch with `az.LaunchConfig.for_tiles(shape, tile_shape)`.

Every function here is a device intrinsic: calling it from host Python raises TypeError.
The classes are for type checkers (a `Tile` is element-wise like a float).  Each function's
arity, keywords and typing are declared once, in anodize/language/tile_ops.py (its typing
function's `@declare` row); tests/language/test_tile_ops.py holds these stubs to those rows.
"""

from __future__ import annotations

from typing import Any, NoReturn

from anodize.types import DisjointSlice, DisjointSlice2D, DisjointSlice3D, Slice, Slice2D, Slice3D

__all__ = [
    "Tile", "TileId1D", "TileId2D", "TileId3D", "program_id_1d", "program_id_2d", "program_id_3d", "load", "store",
    "zeros", "full", "arange", "sum", "max", "min", "where", "matmul", "expand_dims",
]

Shape = int | tuple[int] | tuple[int, int] | tuple[int, int, int]


def _device_only(name: str) -> NoReturn:
    raise TypeError(f"`tile.{name}` can only be called inside an anodize tile kernel")


class Tile(float):
    """A tile value: a constant shape (0-D to 3-D) of one element type.  Arithmetic, comparisons
    and `math.*` apply element-wise, NumPy-style broadcasting included."""

    def __add__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __radd__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __sub__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __rsub__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __mul__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __rmul__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __truediv__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __rtruediv__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __pow__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __neg__(self) -> Tile: ...
    def __abs__(self) -> Tile: ...
    def __lt__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __le__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __gt__(self, other: float) -> Tile: ...  # type: ignore[override]
    def __ge__(self, other: float) -> Tile: ...  # type: ignore[override]

    @property
    def T(self) -> Tile:  # noqa: N802 - NumPy's spelling
        """The transpose of a 2-D tile."""
        _device_only("Tile.T")

    def astype(self, dtype: type[Any]) -> Tile:
        """The tile converted element-wise to `dtype` (as `dtype(x)` converts a scalar)."""
        _device_only("Tile.astype")

    def reshape(self, shape: int | tuple[int, ...]) -> Tile:
        """The same elements in row-major order as a tile of `shape` (one axis may be -1)."""
        _device_only("Tile.reshape")

    def __getitem__(self, index: None | slice | tuple[None | slice, ...]) -> Tile:
        """`x[:, None]`, `x[None, :]`: the tile with an axis of extent 1 added at each `None`
        (the only indexing of a tile)."""
        _device_only("Tile.__getitem__")


class TileId1D:
    """A program's tile id in a 1-D launch (no public constructor)."""

    def get(self) -> int:
        """The tile's index (the grid's x)."""
        _device_only("TileId1D.get")


class TileId2D:
    """A program's tile id in a 2-D launch: `.row` (grid y) and `.col` (grid x)."""

    @property
    def row(self) -> int:
        """The tile's row (the grid's y)."""
        _device_only("TileId2D.row")

    @property
    def col(self) -> int:
        """The tile's column (the grid's x)."""
        _device_only("TileId2D.col")


class TileId3D:
    """A program's tile id in a 3-D launch: `.layer` (grid z), `.row` (grid y), `.col` (grid x)."""

    @property
    def layer(self) -> int:
        """The tile's layer (the grid's z): the batch index of batched work."""
        _device_only("TileId3D.layer")

    @property
    def row(self) -> int:
        """The tile's row (the grid's y)."""
        _device_only("TileId3D.row")

    @property
    def col(self) -> int:
        """The tile's column (the grid's x)."""
        _device_only("TileId3D.col")


def program_id_1d() -> TileId1D:
    """This program's tile id (1-D launches)."""
    _device_only("program_id_1d")


def program_id_2d() -> TileId2D:
    """This program's tile id (2-D launches): `(row, col)` of the tile it owns."""
    _device_only("program_id_2d")


def program_id_3d() -> TileId3D:
    """This program's tile id (3-D launches): `(layer, row, col)` of the tile it owns."""
    _device_only("program_id_3d")


def load(
    src: Slice[Any] | Slice2D[Any] | Slice3D[Any] | DisjointSlice[Any] | DisjointSlice2D[Any] | DisjointSlice3D[Any],
    offset: int | tuple[int, int] | tuple[int, int, int] | TileId1D | TileId2D | TileId3D,
    shape: Shape,
    other: float = 0,
) -> Tile:
    """The tile of `shape` whose first element is `src[offset]` (a program id: its own tile,
    `pid * shape`); elements outside `src` read as `other`.  From an output, only the program's
    own tile."""
    _device_only("load")


def store(dst: DisjointSlice[Any] | DisjointSlice2D[Any] | DisjointSlice3D[Any], pid: TileId1D | TileId2D | TileId3D, value: Tile) -> None:
    """Write `value` to the tile `pid` owns: `pid * value.shape`, masked at the edges of `dst`."""
    _device_only("store")


def zeros(shape: Shape, dtype: type[Any]) -> Tile:
    """A tile of zeros."""
    _device_only("zeros")


def full(shape: Shape, value: float, dtype: type[Any]) -> Tile:
    """A tile with every element `value`."""
    _device_only("full")


def arange(n: int) -> Tile:
    """The 1-D i32 tile `0, 1, .., n - 1` (`n` a compile-time int)."""
    _device_only("arange")


def expand_dims(x: Tile, axis: int) -> Tile:
    """`x` with an axis of extent 1 inserted at `axis` (as NumPy's `expand_dims`)."""
    _device_only("expand_dims")


def sum(x: Tile, axis: int | None = None, keepdims: bool = False) -> Tile:  # noqa: A001 - the tile vocabulary's name
    """The sum along `axis`, or of every element; the reduced axes are dropped (kept with
    extent 1 under `keepdims=True`), as in NumPy; f16/bf16 sum in f32."""
    _device_only("sum")


def max(x: Tile, axis: int | None = None, keepdims: bool = False) -> Tile:  # noqa: A001
    """The maximum along `axis`, or of every element (`keepdims` as for `sum`)."""
    _device_only("max")


def min(x: Tile, axis: int | None = None, keepdims: bool = False) -> Tile:  # noqa: A001
    """The minimum along `axis`, or of every element (`keepdims` as for `sum`)."""
    _device_only("min")


def where(cond: float, x: float, y: float) -> Tile:
    """Element-wise `x if cond else y`."""
    _device_only("where")


def matmul(x: Tile, y: Tile, acc: Tile | None = None, allow_tf32: bool = False) -> Tile:
    """`acc + x @ y`: (M, K) @ (K, N) tiles of f16, bf16 or f32, accumulated in f32."""
    _device_only("matmul")

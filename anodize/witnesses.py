"""The index witnesses of the kernel language: `Index1D`, `Index2D`, `Index3D`, `BlockWitness1D`,
the block-local `LocalIndex` / `LocalIndex2D`, and a thread's `Tile2D`.  Only the intrinsics
that make them may construct one; their public home is `anodize.types` (and `anodize`),
which re-export them.  `_device_only` is what every kernel-only name does when Python
calls it."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn, final

if TYPE_CHECKING:
    from anodize.types import DisjointSlice2D, LocalArray, Slice2D, T


def _device_only(name: str) -> NoReturn:
    raise TypeError(
        f"`{name}` only has meaning inside a kernel compiled by anodize; "
        "launch the kernel with `kernel[config](...)` instead of calling it from Python"
    )


@final
class Tile2D:
    """This thread's tile of every 2-D output: only `thread.tile_2d(TR, TC[, GR, GC])` makes
    one, and `t.at(r, s)` names its element (r, s), r in [0, TR), s in [0, TC).  A tile is
    not itself an index."""

    __slots__ = ("_Tile2D__value",)

    def __init__(self) -> None:
        _device_only("Tile2D")

    def at(self, r: int, s: int) -> "Index2D":
        """The `Index2D` of this thread's element (r, s) (checked in range unless proven)."""
        _device_only("Tile2D.at")

    def load(self, x: "Slice2D[T]", v: "LocalArray[T]", fill: float) -> None:
        """v[r, s] = x[self.at(r, s)] for every element of the tile (`fill` outside `x`), runs
        of consecutive columns 16 bytes at a time where they can."""
        _device_only("Tile2D.load")

    def store(self, out: "DisjointSlice2D[T]", v: "LocalArray[T]") -> None:
        """out[self.at(r, s)] = v[r, s] for every element of the tile inside `out`."""
        _device_only("Tile2D.store")


@final
class BlockWitness1D:
    """This block's index into a `DisjointSlice` with one element per block; only
    `thread.block_witness_1d()` makes one, and only the block's leader may use it
    (`if thread.is_block_leader(): out[b] = v`)."""

    __slots__ = ("_BlockWitness1D__value",)

    def __init__(self) -> None:
        _device_only("BlockWitness1D")

    def get(self) -> int:
        """This block's x index in the grid, a plain int."""
        _device_only("BlockWitness1D.get")


@final
class Index1D:
    """This thread's global x index; only `thread.index_1d()` and
    `thread.grid_stride()` make one.  Arithmetic on it gives a plain int."""

    __slots__ = ("_Index1D__value",)

    def __init__(self) -> None:
        _device_only("Index1D")

    def get(self) -> int:
        """The witness as a plain int (which no longer indexes a disjoint slice)."""
        _device_only("Index1D.get")

    def __index__(self) -> int:
        _device_only("Index1D")

    def __int__(self) -> int:
        _device_only("Index1D")

    def __add__(self, other: int) -> int:
        _device_only("Index1D")

    def __radd__(self, other: int) -> int:
        _device_only("Index1D")

    def __sub__(self, other: int) -> int:
        _device_only("Index1D")

    def __rsub__(self, other: int) -> int:
        _device_only("Index1D")

    def __mul__(self, other: int) -> int:
        _device_only("Index1D")

    def __rmul__(self, other: int) -> int:
        _device_only("Index1D")

    def __floordiv__(self, other: int) -> int:
        _device_only("Index1D")

    def __mod__(self, other: int) -> int:
        _device_only("Index1D")

    def __lt__(self, other: int) -> bool:
        _device_only("Index1D")

    def __le__(self, other: int) -> bool:
        _device_only("Index1D")

    def __gt__(self, other: int) -> bool:
        _device_only("Index1D")

    def __ge__(self, other: int) -> bool:
        _device_only("Index1D")


@final
class LocalIndex:
    """This thread's slot in its block: the linear thread index over x, y and z
    (`tid.x + bdim.x * (tid.y + bdim.y * tid.z)`); only `thread.index_in_block()` makes one.
    It indexes shared arrays only (`buf[w] = v` is the write the safe tier allows between
    two barriers).  Arithmetic on it gives a plain int."""

    __slots__ = ("_LocalIndex__value",)

    def __init__(self) -> None:
        _device_only("LocalIndex")

    def get(self) -> int:
        """The slot as a plain int."""
        _device_only("LocalIndex.get")

    def __index__(self) -> int:
        _device_only("LocalIndex")

    def __int__(self) -> int:
        _device_only("LocalIndex")

    def __add__(self, other: int) -> int:
        _device_only("LocalIndex")

    def __radd__(self, other: int) -> int:
        _device_only("LocalIndex")

    def __sub__(self, other: int) -> int:
        _device_only("LocalIndex")

    def __rsub__(self, other: int) -> int:
        _device_only("LocalIndex")

    def __mul__(self, other: int) -> int:
        _device_only("LocalIndex")

    def __rmul__(self, other: int) -> int:
        _device_only("LocalIndex")

    def __floordiv__(self, other: int) -> int:
        _device_only("LocalIndex")

    def __mod__(self, other: int) -> int:
        _device_only("LocalIndex")

    def __lt__(self, other: int) -> bool:
        _device_only("LocalIndex")

    def __le__(self, other: int) -> bool:
        _device_only("LocalIndex")

    def __gt__(self, other: int) -> bool:
        _device_only("LocalIndex")

    def __ge__(self, other: int) -> bool:
        _device_only("LocalIndex")


@final
class LocalIndex2D:
    """This thread's (row, col) = (tid.y, tid.x) slot in its block (block z must be 1); only
    `thread.index_in_block_2d()` makes one.  It indexes 2-D shared arrays: `tile[w] = v`."""

    __slots__ = ("_LocalIndex2D__row", "_LocalIndex2D__col")

    def __init__(self) -> None:
        _device_only("LocalIndex2D")

    @property
    def row(self) -> int:
        """The row (tid.y), a plain int."""
        _device_only("LocalIndex2D.row")

    @property
    def col(self) -> int:
        """The column (tid.x), a plain int."""
        _device_only("LocalIndex2D.col")


@final
class Index2D:
    """This thread's global (row, col) = (y, x) index; only `thread.index_2d()` makes one."""

    __slots__ = ("_Index2D__row", "_Index2D__col")

    def __init__(self) -> None:
        _device_only("Index2D")

    @property
    def row(self) -> int:
        """The row (y) of the witness, a plain int."""
        _device_only("Index2D.row")

    @property
    def col(self) -> int:
        """The column (x) of the witness, a plain int."""
        _device_only("Index2D.col")


@final
class Index3D:
    """This thread's global (layer, row, col) = (z, y, x) index; only `thread.index_3d()` makes one."""

    __slots__ = ("_Index3D__layer", "_Index3D__row", "_Index3D__col")

    def __init__(self) -> None:
        _device_only("Index3D")

    @property
    def layer(self) -> int:
        """The layer (z) of the witness, a plain int."""
        _device_only("Index3D.layer")

    @property
    def row(self) -> int:
        """The row (y) of the witness, a plain int."""
        _device_only("Index3D.row")

    @property
    def col(self) -> int:
        """The col (x) of the witness, a plain int."""
        _device_only("Index3D.col")

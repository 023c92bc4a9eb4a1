"""Index witnesses and, in the unsafe tier, raw thread ids.

Every function here is a device intrinsic: the compiler replaces the call, and
calling it from host Python raises TypeError.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NoReturn, TypeVar

from anodize.types import AtomicSlice, BlockWitness1D, DisjointSlice, Index1D, Index2D, Index3D, LocalIndex, LocalIndex2D, Slice, Tile2D

T = TypeVar("T")

__all__ = [
    "index_1d",
    "index_2d",
    "index_3d",
    "grid_stride",
    "block_witness_1d",
    "tile_2d",
    "is_block_leader",
    "index_in_block",
    "index_in_block_2d",
    "tid_x",
    "tid_y",
    "tid_z",
    "block_idx_x",
    "block_idx_y",
    "block_idx_z",
    "block_dim_x",
    "block_dim_y",
    "block_dim_z",
    "grid_dim_x",
    "grid_dim_y",
    "grid_dim_z",
    "lane_id",
]


def _device_only(name: str) -> NoReturn:
    raise TypeError(f"`thread.{name}()` can only be called inside an anodize kernel")


def index_1d() -> Index1D:
    """This thread's global x index: `blockIdx.x * blockDim.x + threadIdx.x`."""
    _device_only("index_1d")


def index_2d() -> Index2D:
    """This thread's global `(row, col)`: row from y, col from x."""
    _device_only("index_2d")


def index_3d() -> Index3D:
    """This thread's global `(layer, row, col)`: layer from z, row from y, col from x."""
    _device_only("index_3d")


def grid_stride(c: DisjointSlice[T] | Slice[T] | AtomicSlice[T]) -> Iterator[Index1D]:  # type: ignore[type-var]
    """Yield this thread's indices of a grid-stride loop over `c`; each one is in bounds."""
    _device_only("grid_stride")


def block_witness_1d() -> BlockWitness1D:
    """This block's witness over a `DisjointSlice` with one element per block (its index is
    the block's x index).  1-D grids only (checked at launch, and on the device for
    kernels without a contract).  Every access through it must be under
    `if thread.is_block_leader():`, so exactly one thread of the block makes it."""
    _device_only("block_witness_1d")


def tile_2d(rows: int, cols: int, group_rows: int = 1, group_cols: int = 1) -> Tile2D:
    """This thread's `rows` x `cols` tile of every 2-D output (constants; groups of
    `group_rows` x `group_cols` consecutive elements, the groups of a block's threads
    interleaved): `t.at(r, s)` is the `Index2D` of its element (r, s).  Block (bx, by) owns
    the (blockDim.y * rows) x (blockDim.x * cols) block tile at (by, bx).  2-D launches only
    (checked at launch, and on the device for kernels without a contract)."""
    _device_only("tile_2d")


def index_in_block() -> LocalIndex:
    """This thread's slot in its block: the linear thread index over x, y and z.  Between two
    barriers, a safe-tier kernel writes a shared array only at this slot (`buf[w] = v`)."""
    _device_only("index_in_block")


def index_in_block_2d() -> LocalIndex2D:
    """This thread's (row, col) = (tid.y, tid.x) slot in its block, for 2-D shared arrays
    (`tile[w] = v`).  The block must have z = 1 (checked at launch and on the device)."""
    _device_only("index_in_block_2d")


def is_block_leader() -> bool:
    """True on exactly one thread of the block: the one with thread index (0, 0, 0)."""
    _device_only("is_block_leader")


def tid_x() -> int:
    """This thread's x index within its block (`threadIdx.x`); unsafe tier."""
    _device_only("tid_x")


def tid_y() -> int:
    """This thread's y index within its block (`threadIdx.y`); unsafe tier."""
    _device_only("tid_y")


def tid_z() -> int:
    """This thread's z index within its block (`threadIdx.z`); unsafe tier."""
    _device_only("tid_z")


def block_idx_x() -> int:
    """This block's x index within the grid (`blockIdx.x`); unsafe tier."""
    _device_only("block_idx_x")


def block_idx_y() -> int:
    """This block's y index within the grid (`blockIdx.y`); unsafe tier."""
    _device_only("block_idx_y")


def block_idx_z() -> int:
    """This block's z index within the grid (`blockIdx.z`); unsafe tier."""
    _device_only("block_idx_z")


def block_dim_x() -> int:
    """The block's x extent in threads (`blockDim.x`); unsafe tier."""
    _device_only("block_dim_x")


def block_dim_y() -> int:
    """The block's y extent in threads (`blockDim.y`); unsafe tier."""
    _device_only("block_dim_y")


def block_dim_z() -> int:
    """The block's z extent in threads (`blockDim.z`); unsafe tier."""
    _device_only("block_dim_z")


def grid_dim_x() -> int:
    """The grid's x extent in blocks (`gridDim.x`); unsafe tier."""
    _device_only("grid_dim_x")


def grid_dim_y() -> int:
    """The grid's y extent in blocks (`gridDim.y`); unsafe tier."""
    _device_only("grid_dim_y")


def grid_dim_z() -> int:
    """The grid's z extent in blocks (`gridDim.z`); unsafe tier."""
    _device_only("grid_dim_z")


def lane_id() -> int:
    """This thread's lane within its warp, 0 to 31; unsafe tier."""
    _device_only("lane_id")

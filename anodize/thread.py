"""Index witnesses and, in the unsafe tier, raw thread ids.

Every function here is a device intrinsic: the compiler replaces the call, and
calling it from host Python raises TypeError.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NoReturn, TypeVar

from anodize.types import AtomicSlice, BlockWitness1D, DisjointSlice, Index1D, Index2D, Slice

T = TypeVar("T")

__all__ = [
    "index_1d",
    "index_2d",
    "grid_stride",
    "block_witness_1d",
    "is_block_leader",
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


def grid_stride(c: DisjointSlice[T] | Slice[T] | AtomicSlice[T]) -> Iterator[Index1D]:  # type: ignore[type-var]
    """Yield this thread's indices of a grid-stride loop over `c`; each one is in bounds."""
    _device_only("grid_stride")


def block_witness_1d() -> BlockWitness1D:
    """This block's witness over a `DisjointSlice` with one element per block (its index is
    the block's x index).  1-D grids only (checked at launch, and on the device for
    kernels without a contract).  Every access through it must be under
    `if thread.is_block_leader():`, so exactly one thread of the block makes it."""
    _device_only("block_witness_1d")


def is_block_leader() -> bool:
    """True on exactly one thread of the block: the one with thread index (0, 0, 0)."""
    _device_only("is_block_leader")


def tid_x() -> int:
    _device_only("tid_x")


def tid_y() -> int:
    _device_only("tid_y")


def tid_z() -> int:
    _device_only("tid_z")


def block_idx_x() -> int:
    _device_only("block_idx_x")


def block_idx_y() -> int:
    _device_only("block_idx_y")


def block_idx_z() -> int:
    _device_only("block_idx_z")


def block_dim_x() -> int:
    _device_only("block_dim_x")


def block_dim_y() -> int:
    _device_only("block_dim_y")


def block_dim_z() -> int:
    _device_only("block_dim_z")


def grid_dim_x() -> int:
    _device_only("grid_dim_x")


def grid_dim_y() -> int:
    _device_only("grid_dim_y")


def grid_dim_z() -> int:
    _device_only("grid_dim_z")


def lane_id() -> int:
    _device_only("lane_id")

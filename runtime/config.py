"""Launch configurations, typed by rank.

Block and grid tuples are in CUDA order `(x, y, z)`; shapes are `(rows, cols)` or
`(layers, rows, cols)`.  `for_shape((rows, cols), block=(bx, by))` launches
`grid = (ceil(cols / bx), ceil(rows / by))`, so `index_2d` maps x to the column
and y to the row; `for_shape((layers, rows, cols), block=(bx, by, bz))` launches
`grid = (ceil(cols / bx), ceil(rows / by), ceil(layers / bz))` (`index_3d`: z is the layer).

A config's rank is the number of extents it was built with: `LaunchConfig(g, b)` with
ints is rank 1, with tuples the longer tuple's length (`(x, y, 1)` is rank 3).
"""

from __future__ import annotations

from anodize.language.records import dataclass
from typing import Any, Generic, Literal, TypeVar

from anodize.language.errors import LaunchError

R = TypeVar("R", Literal[1], Literal[2], Literal[3])

Dim3 = tuple[int, int, int]


def _dim3(v: int | tuple[int, ...], what: str) -> Dim3:
    t = (v,) if isinstance(v, int) else tuple(v)
    if not 1 <= len(t) <= 3 or not all(isinstance(x, int) and not isinstance(x, bool) for x in t):
        raise LaunchError(f"`{what}` must be an int or a tuple of 1 to 3 ints, got {v!r}")
    if any(x < 1 for x in t):
        raise LaunchError(f"every dimension of `{what}` must be at least 1, got {v!r}")
    return (t + (1, 1))[:3]  # type: ignore[return-value]


@dataclass(frozen=True, init=False)
class LaunchConfig(Generic[R]):
    """`grid` and `block` in CUDA order; `rank` is the launch's index-space rank (1, 2 or 3):
    the number of extents it was built with."""

    grid: Dim3
    block: Dim3
    shared_mem: int = 0
    rank: int = 1

    def __init__(self, grid: int | tuple[int, ...], block: int | tuple[int, ...], shared_mem: int = 0):
        g = _dim3(grid, "grid")
        b = _dim3(block, "block")
        if not isinstance(shared_mem, int) or shared_mem < 0:
            raise LaunchError(f"`shared_mem` must be a non-negative int, got {shared_mem!r}")
        given = max(
            1 if isinstance(grid, int) else len(grid),
            1 if isinstance(block, int) else len(block),
        )
        object.__setattr__(self, "grid", g)
        object.__setattr__(self, "block", b)
        object.__setattr__(self, "shared_mem", shared_mem)
        object.__setattr__(self, "rank", given)

    @staticmethod
    def for_num_elems(n: int, block: int = 256, shared_mem: int = 0) -> LaunchConfig[Literal[1]]:
        """A 1-D launch with at least one thread per element."""
        if not isinstance(n, int) or n < 0:
            raise LaunchError(f"`n` must be a non-negative int, got {n!r}")
        if not isinstance(block, int) or block < 1:
            raise LaunchError(f"`block` must be a positive int, got {block!r}")
        return LaunchConfig(max(1, -(-n // block)), block, shared_mem)

    @staticmethod
    def for_shape(
        shape: tuple[int, int] | tuple[int, int, int], block: tuple[int, ...] | None = None, shared_mem: int = 0
    ) -> LaunchConfig[Any]:
        """A 2-D launch over `(rows, cols)` with `block` in CUDA order `(bx, by)` (default
        (16, 16)), or a 3-D launch over `(layers, rows, cols)` with `block=(bx, by, bz)`
        (default (8, 8, 4)).  The config's rank is the number of extents of `shape`."""
        if (
            not isinstance(shape, tuple)
            or len(shape) not in (2, 3)
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
        ):
            raise LaunchError(
                f"`shape` must be a (rows, cols) or (layers, rows, cols) tuple of non-negative ints, got {shape!r}"
            )
        if block is None:
            block = (16, 16) if len(shape) == 2 else (8, 8, 4)
        if not isinstance(block, tuple) or len(block) != len(shape):
            want = "(bx, by)" if len(shape) == 2 else "(bx, by, bz)"
            raise LaunchError(f"`block` must be a {want} tuple for a {len(shape)}-D shape, got {block!r}")
        extents = shape[::-1]  # CUDA order: cols (x), rows (y), layers (z)
        grid = tuple(max(1, -(-n // b)) for n, b in zip(extents, block, strict=True))
        return LaunchConfig(grid, block, shared_mem)

    @staticmethod
    def for_tiles(shape: int | tuple[int, ...], tile_shape: int | tuple[int, ...]) -> LaunchConfig[Any]:
        """One program per tile of `shape` (`(n,)` or `(rows, cols)`) cut into `tile_shape`
        tiles: `grid = (ceil(cols / tile_cols), ceil(rows / tile_rows))` in CUDA order.  For
        `@az.tile_kernel` kernels, which fill in their own block."""
        s = (shape,) if isinstance(shape, int) else tuple(shape)
        t = (tile_shape,) if isinstance(tile_shape, int) else tuple(tile_shape)
        ok = lambda v, lo: isinstance(v, int) and not isinstance(v, bool) and v >= lo  # noqa: E731
        if not 1 <= len(s) <= 2 or len(t) != len(s) or not all(ok(v, 0) for v in s) or not all(ok(v, 1) for v in t):
            raise LaunchError(
                f"`for_tiles` takes a 1-D or 2-D shape and a tile shape of the same rank (positive ints), got {shape!r} and {tile_shape!r}"
            )
        grid = tuple(max(1, -(-n // b)) for n, b in zip(s[::-1], t[::-1], strict=True))
        return LaunchConfig(grid if len(grid) > 1 else grid[0], (1,) * len(grid) if len(grid) > 1 else 1)

    @property
    def threads_per_block(self) -> int:
        """The block's thread count (x * y * z)."""
        return self.block[0] * self.block[1] * self.block[2]

    def __repr__(self) -> str:
        return f"LaunchConfig(grid={self.grid}, block={self.block}, shared_mem={self.shared_mem}, rank={self.rank})"

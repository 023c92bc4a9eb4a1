"""Distributed layouts of register tiles: which thread holds which (row, col) in which register.

`MmaLayout` is the tensor-core accumulator layout (Triton's NvidiaMma v2/v3): the (M, N) tile
is cut over a `wm x wn` grid of warps, each warp's (M / wm, N / wn) part into m16 x n8 blocks,
and within a block lane l holds rows `l // 4` and `l // 4 + 8`, columns `2 * (l % 4)` and
`+ 1`: register `i = (mi * nt + ni) * 4 + q` of a thread is element

    row = warp_m * (M / wm) + 16 mi + l // 4 + 8 (q // 2)
    col = warp_n * (N / wn) + 8 ni + 2 (l % 4) + q % 2

(warp = tid // 32, warp_m = warp // wn, warp_n = warp % wn).  mma.sync m16n8k16's C/D
fragments are exactly this; so are wgmma m64nNk16's for the grid (warps, 1) (a warpgroup's 4
warps own 16 rows each, n8 block ni in registers 4 ni .. 4 ni + 3), so one layout serves both
instructions and a register tile never moves between them.
"""

from __future__ import annotations

import os

from anodize.language.records import dataclass
from anodize.language.tile_plan import gemm_warp_grid

__all__ = ["MmaLayout", "RowLayout", "choose_layout", "row_of", "stacked_enabled", "wgmma_shape_ok", "wgmma_stacked_ok"]


@dataclass(frozen=True)
class MmaLayout:
    m: int
    n: int
    wm: int  # warps along M
    wn: int  # warps along N
    # rows between a warp's m16 blocks: 16 (a warp's rows contiguous), or 64 for wgmma with
    # several m64 blocks a warpgroup (`stacked`: warp w of warpgroup g holds rows
    # 64 (g mt + mi) + 16 w + ..., one m64nNk16 a block)
    mstep: int = 16

    @property
    def mt(self) -> int:
        return self.m // self.wm // 16

    @property
    def nt(self) -> int:
        return self.n // self.wn // 8

    @property
    def count(self) -> int:
        """Registers a thread holds."""
        return self.mt * self.nt * 4

    def offset(self, i: int) -> tuple[int, int]:
        """(row, col) of register i relative to the thread's origin (`origin_exprs`)."""
        mi, rest = divmod(i, self.nt * 4)
        ni, q = divmod(rest, 4)
        return mi * self.mstep + (q >> 1) * 8, ni * 8 + (q & 1)

    @property
    def stacked(self) -> bool:
        return self.mstep != 16

    def warp_row(self, w: int) -> int:
        """The first row of warp w's registers (warp_m = w // wn)."""
        wm = w // self.wn
        if self.stacked:
            return (wm // 4) * 64 * self.mt + (wm % 4) * 16
        return wm * (self.m // self.wm)


@dataclass(frozen=True)
class RowLayout:
    """The slice of an (M, N) accumulator layout over a (wm, 1) grid that an axis-1 reduction
    leaves (Triton's SliceEncodingAttr of NvidiaMma, dim 1): an (M, 1) row tile, each thread
    holding the rows it holds of the accumulator, register `j = 2 mi + h` row
    `warp * (M / wm) + 16 mi + l // 4 + 8 h` (the four lanes of a quad hold the same rows, each
    a copy of the value).  Accumulator register `(mi * nt + ni) * 4 + q` broadcasts from row
    register `2 mi + q // 2` (`row_of`)."""

    m: int
    wm: int

    @property
    def mt(self) -> int:
        return self.m // self.wm // 16

    @property
    def count(self) -> int:
        return self.mt * 2

    def offset(self, j: int) -> tuple[int, int]:
        return (j >> 1) * 16 + (j & 1) * 8, 0


def row_of(lay: MmaLayout, i: int) -> int:
    """The row-tile register of the rows slice that accumulator register i of `lay` reads."""
    mi, rest = divmod(i, lay.nt * 4)
    return mi * 2 + (rest % 4) // 2


def wgmma_shape_ok(m: int, n: int, warps: int) -> bool:
    """Does Hopper's wgmma take an (m, n) accumulator over `warps` warps (64 rows a warpgroup,
    one m64nNk16 over the whole N)?"""
    return warps % 4 == 0 and m == 16 * warps and n in (64, 128, 256) and n <= 2 * m


def wgmma_stacked_ok(m: int, n: int, warps: int) -> bool:
    """Does wgmma take an (m, n) accumulator over `warps` warps as two m64 blocks a warpgroup
    (128 x 128 over 4 warps, Triton's common tile; at most 128 accumulators a thread)?"""
    return warps % 4 == 0 and m == 32 * warps and n in (64, 128)


def stacked_enabled() -> bool:
    """wgmma for `wgmma_stacked_ok` shapes (two m64 blocks a warpgroup): the default since the
    H100 measured 128 x 128 over 4 warps correct and faster on it (0.384 -> 0.295 ms at 4096^3,
    0.237 with the two-blocks ring; bench/RESULTS.md, session 16); `ANODIZE_TILE_WGMMA_STACK=0`
    (codegen/toolchain.py) is the way back to mma.sync for those shapes."""
    return os.environ.get("ANODIZE_TILE_WGMMA_STACK", "1") != "0"


def choose_layout(m: int, n: int, warps: int, wgmma: bool, stack: bool = False, rows: bool = False) -> MmaLayout:
    """The accumulator layout of every register tile of shape (m, n): wgmma's warp grid where
    the target has wgmma and the shape is one of its (with `stack`, two m64 blocks a warpgroup
    too), else mma.sync's (fewest ldmatrix); in row mode (`rows`) each warp holds whole rows."""
    if rows or (wgmma and wgmma_shape_ok(m, n, warps)):
        return MmaLayout(m, n, warps, 1)
    if wgmma and stack and wgmma_stacked_ok(m, n, warps):
        return MmaLayout(m, n, warps, 1, 64)
    grid = gemm_warp_grid(m, n, warps)
    assert grid is not None, (m, n, warps)
    return MmaLayout(m, n, *grid)

"""Grid-wide operations: every thread of the grid takes part.

`sync()` is a barrier across the whole grid (CUDA's `grid.sync()` of cooperative groups): no
thread passes it until every thread of every block of the grid has reached it, and the
global-memory writes before it are visible to every thread after it.  Safe tier, in a kernel
whose contract says `cooperative=True` (`@az.launch_contract(..., cooperative=True)`): its
launches are cooperative, refused when the grid cannot be resident on the GPU at once.  Like
`az.syncthreads()`, every thread of the grid must reach it: not under control flow that may
differ between threads or between blocks (az-barrier-divergence).

    @az.launch_contract(domain=1, block=256, cooperative=True)
    @az.kernel
    def two_phase(...):
        ...                 # phase 1: every block writes its partial results
        az.grid.sync()
        ...                 # phase 2: any block reads any block's phase-1 results
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["sync"]


def sync() -> NoReturn:
    """Wait until every thread of the grid has reached this point (a cooperative kernel's)."""
    raise TypeError("`grid.sync` can only be called inside an anodize kernel")

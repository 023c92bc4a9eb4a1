"""The modules that register the LLVM lowering of an IR node type (codegen/llvm/registry.py),
imported here once, so that `lower_kernel` finds every statement and expression of a kernel.

The `Lowerer` (codegen/llvm/lower.py) imports none of them: each imports the Lowerer's types
and registers its handlers with `@lowers(NodeType)`.  The core statements, expressions, calls
and local values are the Lowerer's collaborators (codegen/llvm/stmts.py, exprs.py, calls.py,
locals.py), registered with their classes.  The nodes the tile compiler makes (`TileMma`,
`TilePredStore`, the staged epilogue's and `TilePredLoad`, `TilePairLoad`, `TileVecLoad`, `TileVecStore`,
`TileVecAligned`, the prefetch's `TileCopy`, `TileCopyAlignedFlag` and `TileDrain`,
`TileAttention`) are registered by the modules codegen/tile/entry.py imports with the tile pass
(tile/mma.py, tile/epilogue.py, tile/pair_loads.py, tile/rows_llvm.py, tile/prefetch.py, tensorcore/attention.py),
so a SIMT kernel's compile loads no tile code.
"""

from __future__ import annotations

from .llvm import effects, gridstride, shared_safe, thread_tiles, thread_tiles_io
from .llvm.lower import Lowerer, Target, lower_kernel

REGISTERING = (effects, gridstride, shared_safe, thread_tiles, thread_tiles_io)

__all__ = ["Lowerer", "Target", "lower_kernel", "REGISTERING"]

"""The tile pass's entry (docs/tiles.md): `lower_tiles` turns a tile kernel's typed IR into the
plain kernel IR of a block, by the register form of a row-shaped kernel (rows.py) where its
plan allows, else by the generic lowering (plain.py), the layout plan's matmuls on tensor
cores (lower.py) where the GPU has them.

Importing this module registers the LLVM lowerings of the nodes the pass makes
(codegen/llvm/registry.py): `TileMma` and `TilePredStore` (mma.py), the fragment loops' staged
stores and predicated loads (epilogue.py), their paired loads (pair_loads.py), the row form's vector accesses (rows_llvm.py) and the attention form's `TileAttention` (tensorcore/attention.py).
"""

from __future__ import annotations

from anodize.language import ir

from ..tensorcore import attention as _attention_lowering  # noqa: F401  (registers TileAttention)
from . import pair_loads as _pair_lowering  # noqa: F401  (registers TilePairLoad)
from . import rows_llvm as _rows_lowering  # noqa: F401  (registers the row form's vector accesses)
from .attention import TileAttention
from .epilogue import TileStagedStore
from .lower import plan_for
from .mma import TileMma
from .report import matmul_report
from .plain import _Lowering
from .rows import RowLowering
from .rows_form import row_form
from .rows_plan import row_plan

__all__ = ["lower_tiles", "is_tile_kernel", "tensor_core_shared", "matmul_report"]


def is_tile_kernel(k: ir.KernelIR) -> bool:
    return getattr(k, "tile_warps", 0) > 0


def lower_tiles(k: ir.KernelIR, threads: int, tensor_cores: bool = False, wgmma: bool = False,
                shared_limit: int = 48 * 1024, vectors: bool = False) -> ir.KernelIR:
    """The plain IR of tile kernel `k` for a block of `threads` threads (`k` itself when it
    is not a tile kernel); `tensor_cores`: the layout plan's matmuls lower to mma.sync (a GPU of
    sm_80 or later; codegen/tile/); `wgmma`: to Hopper's wgmma where the layout allows
    (sm_90, built for sm_90a); `shared_limit`: the shared bytes a block may take with the
    compiler's dynamic staging buffer (`toolchain.block_shared_limit`); `vectors`: row-shaped
    kernels (codegen/tile/rows.py) may access chunks as 16-byte vectors (the GPU)."""
    if not is_tile_kernel(k):
        return k
    layout = row_plan(k, threads)
    low = _Lowering(k, threads) if layout is None else RowLowering(row_form(k), threads, layout, vectors)
    low.tensor_cores = tensor_cores and threads > 1
    low.wgmma = wgmma and low.tensor_cores
    low.shared_limit = shared_limit
    if low.tensor_cores:
        plan_for(low)
    return low.run()


def tensor_core_shared(k: ir.KernelIR) -> tuple[int, bool]:
    """(the dynamic shared bytes the kernel's tensor-core GEMMs take, whether one is on wgmma)."""
    gemms = [s for s in ir.walk_stmts(k.body) if isinstance(s, TileMma)]
    # (the attention form's and the staged epilogue's buffer is the same one)
    atts = [s.dynamic_smem for s in ir.walk_stmts(k.body) if isinstance(s, (TileAttention, TileStagedStore))]
    return max((*(s.dynamic_smem for s in gemms), *atts), default=0), any(s.engine == "wgmma" for s in gemms)

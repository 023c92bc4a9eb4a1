"""tile_layernorm: y = (x - mean) / sqrt(var + eps) * w + b per row, one program per row block.

The padding of a row's tile is told apart by loading the row twice with two different
fill values (`other=`): the elements that agree are the row's own.

    python examples/tile_layernorm.py
"""

from typing import Any

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice, Slice2D, f32, tile

ROWS = 1


@az.launch_contract(
    domain=2,
    requires=lambda x, w, b, y: x.shape[0] == y.shape[0] and x.shape[1] == y.shape[1] and len(w) == x.shape[1] and len(b) == x.shape[1],
)
@az.tile_kernel(num_warps=4)
def layer_norm(x: Slice2D[f32], w: Slice[f32], b: Slice[f32], y: DisjointSlice2D[f32], eps: f32, cols: az.Constant[int]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, pid, (ROWS, cols))
    inside = t == tile.load(x, pid, (ROWS, cols), other=1.0)
    n = f32(len(w))
    mean = tile.sum(t, axis=1, keepdims=True) / n  # (ROWS, 1): broadcasts against t
    var = tile.sum(tile.where(inside, (t - mean) * (t - mean), 0.0), axis=1, keepdims=True) / n
    rstd = 1.0 / az.math.sqrt(var + eps)
    tile.store(y, pid, (t - mean) * rstd * tile.load(w, 0, cols) + tile.load(b, 0, cols))


def block_cols(cols: int) -> int:
    """The tile width: the row's own length (every row is one tile).  Rows of any length keep
    their tiles in registers on the GPU without padding (docs/tiles.md, "Row-shaped kernels in
    registers": a length that is not a multiple of the block's pass takes a ragged last pass)."""
    return cols


def run(x: Any, w: Any, b: Any, y: Any, rows: int, cols: int, eps: float = 1e-5) -> None:
    width = block_cols(cols)
    layer_norm[az.LaunchConfig.for_tiles((rows, width), (ROWS, width))](x, w, b, y, eps, width)


def main(rows: int = 64, cols: int = 1000) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(3)
    x_h = rng.standard_normal((rows, cols), dtype=np.float32) * 3 + 1
    w_h = rng.standard_normal(cols, dtype=np.float32)
    b_h = rng.standard_normal(cols, dtype=np.float32)
    y = dev.empty((rows, cols), az.f32)
    run(dev.to_device(x_h), dev.to_device(w_h), dev.to_device(b_h), y, rows, cols)
    xd = x_h.astype(np.float64)
    ref = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5) * w_h + b_h
    res = y.to_host()
    np.testing.assert_allclose(res, ref, rtol=1e-4, atol=1e-4)
    print(f"tile_layernorm on {dev.describe()}: {rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()

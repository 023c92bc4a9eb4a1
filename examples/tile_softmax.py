"""tile_softmax: fused row-wise softmax, one program per block of rows.

Each program loads a (ROWS, cols) block (padding reads as -inf, so it adds nothing), and the
max, the exponentials, their sum and the division never leave the chip (the exponentials are
computed twice rather than kept: on the GPU only `t` needs shared memory).  `cols` is a
compile-time constant (`az.Constant[int]`): one specialisation per row width.

    python examples/tile_softmax.py
"""

import math
from typing import Any

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, tile

ROWS = 1


@az.launch_contract(domain=2, requires=lambda x, out: x.shape[0] == out.shape[0] and x.shape[1] == out.shape[1])
@az.tile_kernel(num_warps=8)
def softmax(x: Slice2D[f32], out: DisjointSlice2D[f32], cols: az.Constant[int]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, pid, (ROWS, cols), other=-math.inf)
    m = tile.max(t, axis=1)  # (ROWS,): the row maxima
    s = tile.sum(az.math.exp(t - m[:, None]), axis=1)  # the exponentials are recomputed below: no tile for them
    tile.store(out, pid, az.math.exp(t - m[:, None]) / s[:, None])


def block_cols(cols: int) -> int:
    """The tile width: the row's own length (every row is one tile).  Rows of any length keep
    their tiles in registers on the GPU without padding (docs/tiles.md, "Row-shaped kernels in
    registers": a length that is not a multiple of the block's pass takes a ragged last pass)."""
    return cols


def run(x: Any, out: Any, rows: int, cols: int) -> None:
    width = block_cols(cols)
    softmax[az.LaunchConfig.for_tiles((rows, width), (ROWS, width))](x, out, width)


def main(rows: int = 64, cols: int = 1000) -> np.ndarray:
    dev = az.device()
    x_h = np.random.default_rng(2).standard_normal((rows, cols), dtype=np.float32) * 4
    out = dev.empty((rows, cols), az.f32)
    run(dev.to_device(x_h), out, rows, cols)
    res = out.to_host()
    e = np.exp(x_h.astype(np.float64) - x_h.max(axis=1, keepdims=True))
    np.testing.assert_allclose(res, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    print(f"tile_softmax on {dev.describe()}: {rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()

"""autotune_softmax: the row softmax of examples/tile_softmax.py, autotuned over 8 configurations
of rows per program (`ROWS`, an `az.Constant` each configuration binds) and warps per program.

The row width `cols` stays the launch's argument (an `az.Constant` no configuration binds): it keys
the choice with the input's shape, so each width is tuned once.  docs/autotune.md.

    python examples/autotune_softmax.py
    anodize tune examples/autotune_softmax.py:softmax --shape rows=4096 --shape cols=4096
"""

import math
from typing import Any

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, tile

CONFIGS = [az.Config(ROWS=r, num_warps=w) for r, w in ((1, 4), (1, 8), (1, 16), (2, 4), (2, 8), (4, 4), (4, 8), (8, 8))]


def inputs(dev: Any, rows: int, cols: int) -> tuple[Any, tuple[Any, ...]]:
    """What `anodize tune` launches for a shape: (grid, arguments)."""
    x = dev.to_device(np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32))
    width = block_cols(cols)
    return grid(rows, width), (x, dev.empty((rows, cols), az.f32), width)


@az.autotune(configs=CONFIGS, key=["x"], inputs=inputs)
@az.launch_contract(domain=2, requires=lambda x, out: x.shape[0] == out.shape[0] and x.shape[1] == out.shape[1])
@az.tile_kernel(num_warps=8)
def softmax(x: Slice2D[f32], out: DisjointSlice2D[f32], cols: az.Constant[int], ROWS: az.Constant[int]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, pid, (ROWS, cols), other=-math.inf)
    m = tile.max(t, axis=1, keepdims=True)  # (ROWS, 1): the row maxima
    s = tile.sum(az.math.exp(t - m), axis=1, keepdims=True)
    tile.store(out, pid, az.math.exp(t - m) / s)


def block_cols(cols: int) -> int:
    """The tile width: the row's own length (every row is one tile; no padding)."""
    return cols


def grid(rows: int, width: int) -> Any:
    return lambda cfg: az.LaunchConfig.for_tiles((rows, width), (cfg.ROWS, width))


def main(rows: int = 64, cols: int = 1000) -> np.ndarray:
    dev = az.device()
    x_h = np.random.default_rng(2).standard_normal((rows, cols), dtype=np.float32) * 4
    out = dev.empty((rows, cols), az.f32)
    width = block_cols(cols)
    softmax[grid(rows, width)](dev.to_device(x_h), out, width)
    res = out.to_host()
    e = np.exp(x_h.astype(np.float64) - x_h.max(axis=1, keepdims=True))
    np.testing.assert_allclose(res, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    report = next(iter(softmax.reports.values()))
    print(f"autotune_softmax on {dev.describe()}: {rows}x{cols}, chose {report.winner} ({report.source}), matches NumPy")
    return res


if __name__ == "__main__":
    main()

"""softmax, one warp per row (a bench variant of examples/softmax.py): block (32, ROWS), each
warp a row through `thread.tile_2d(1, per)` (columns tx + 32 s), the row in registers, two warp
reductions (no barrier)."""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

ROWS = 4  # rows per block, one warp each
CHUNK = 32  # the inner loop's columns per thread (per = groups * CHUNK)


@launch_contract(
    domain=2,
    block=(32, ROWS),
    requires=lambda x, out: x.shape[0] == out.shape[0] and x.shape[1] == out.shape[1],
)
@kernel
def softmax(x: Slice2D[f32], out: DisjointSlice2D[f32], per: az.Constant[int], groups: az.Constant[int]) -> None:
    t = thread.tile_2d(1, per)  # warp y of block (0, b): row b * ROWS + y
    v = az.local.array(per, f32)
    m = f32(-3.0e38)
    for g in range(groups):
        for i in range(CHUNK):
            ij = t.at(0, g * CHUNK + i)
            if ij in out:
                v[g * CHUNK + i] = x[ij.row, ij.col]
                m = max(m, v[g * CHUNK + i])
    rmax = az.warp.reduce(m, "max")
    acc = f32(0.0)
    for g in range(groups):
        for i in range(CHUNK):
            ik = t.at(0, g * CHUNK + i)
            if ik in out:
                v[g * CHUNK + i] = az.math.exp(v[g * CHUNK + i] - rmax)
                acc += v[g * CHUNK + i]
    total = az.warp.reduce(acc, "sum")
    inv = f32(1.0) / total
    for g in range(groups):
        for i in range(CHUNK):
            io = t.at(0, g * CHUNK + i)
            if io in out:
                out[io] = v[g * CHUNK + i] * inv


def config(rows: int) -> az.LaunchConfig:
    return az.LaunchConfig(grid=(1, -(-rows // ROWS)), block=(32, ROWS))


def per_thread(cols: int) -> int:
    """`per`: a multiple of CHUNK, the least with per * 32 >= cols."""
    return CHUNK * max(1, -(-cols // (CHUNK * 32)))


def main(rows: int = 64, cols: int = 1000) -> None:
    dev = az.device()
    x_h = np.random.default_rng(8).standard_normal((rows, cols), dtype=np.float32) * 4
    out = dev.empty((rows, cols), az.f32)
    softmax[config(rows)](dev.to_device(x_h), out, per_thread(cols), per_thread(cols) // CHUNK)
    e = np.exp(x_h.astype(np.float64) - x_h.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out.to_host(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)

"""softmax, one warp a row with whole-tile moves (`t.load` / `t.store`, 16 bytes at a time): a
bench variant of examples/softmax.py (ROWS rows a block, two warp reductions, no barrier)."""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

ROWS = 4  # rows per block of softmax_warp, one warp each
CHUNK = 32  # the inner loops' columns (per = groups * CHUNK)


@launch_contract(
    domain=2,
    block=(32, ROWS),
    requires=lambda x, out: x.shape[0] == out.shape[0] and x.shape[1] == out.shape[1],
)
@kernel
def softmax_warp(x: Slice2D[f32], out: DisjointSlice2D[f32], per: az.Constant[int], groups: az.Constant[int]) -> None:
    t = thread.tile_2d(1, per, 1, 4)  # warp y of block (0, b): row b * ROWS + y, columns 128 g + 4 tx + (0..3)
    v = az.local.array(per, f32)
    t.load(x, v, -3.0e38)
    m = f32(-3.0e38)
    for g in range(groups):
        for i in range(CHUNK):
            m = max(m, v[g * CHUNK + i])
    rmax = az.warp.reduce(m, "max")
    acc = f32(0.0)
    for g in range(groups):
        for i in range(CHUNK):
            v[g * CHUNK + i] = az.math.exp(v[g * CHUNK + i] - rmax)
            acc += v[g * CHUNK + i]
    total = az.warp.reduce(acc, "sum")
    inv = f32(1.0) / total
    for g in range(groups):
        for i in range(CHUNK):
            v[g * CHUNK + i] = v[g * CHUNK + i] * inv
    t.store(out, v)


def warp_config(rows: int) -> az.LaunchConfig:
    return az.LaunchConfig(grid=(1, -(-rows // ROWS)), block=(32, ROWS))


def warp_per(cols: int) -> int:
    """`per` of softmax_warp: a multiple of CHUNK, the least with per * 32 >= cols."""
    return CHUNK * max(1, -(-cols // (CHUNK * 32)))


def main(rows: int = 64, cols: int = 1000) -> None:
    dev = az.device()
    x_h = np.random.default_rng(8).standard_normal((rows, cols), dtype=np.float32) * 4
    e = np.exp(x_h.astype(np.float64) - x_h.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    x = dev.to_device(x_h)
    out = dev.empty((rows, cols), az.f32)
    p = warp_per(cols)
    softmax_warp[warp_config(rows)](x, out, p, p // CHUNK)
    np.testing.assert_allclose(out.to_host(), want, rtol=1e-5, atol=1e-7)

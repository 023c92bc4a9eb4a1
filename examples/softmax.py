"""softmax: row-wise softmax in the safe tier (no `unsafe` anywhere), one block per row.

Each block owns a whole row of `out` through a per-thread tile (`thread.tile_2d(1, per, 1, 4)`:
with blocks of `BLOCK` threads and a grid of `(1, rows)`, thread `tx` of block `(0, b)` owns
the columns `4 tx .. 4 tx + 3`, `4 (tx + BLOCK) .. 4 (tx + BLOCK) + 3`, ... of row `b`, runs
of 4; docs/language.md, "Per-thread tiles").  A block reads its row from global memory once
with `t.load(x, v, fill)` into registers (`az.local.array(per, f32)`, indexed by unrolled
constant loops): each run of 4 columns is one 16-byte load where the row is 16-byte aligned
(a warp reads 512 consecutive bytes per load), element by element otherwise (then
the result is the same).  It finds the row's maximum and the sum of exponentials with two
block collectives (`az.block.reduce`, one barrier each) and writes the row back with
`t.store(out, v)`, 16 bytes at a time alike.  Elements past the row's end load as -inf
(exp gives 0), and are not written (a row of -inf gives NaN, as `torch.softmax` does).  `per` is a compile-time constant (`az.Constant[int]`),
the least multiple of 4 with `per * BLOCK >= cols`: `launch(x, out)` below picks it, and
each value compiles once.

A launch has at most 65535 rows (CUDA's grid y): `launch` splits longer inputs into row views.
A row longer than `per * BLOCK` columns is not what this kernel is for: the tile would
own only its first `per * BLOCK` columns (nothing is written twice, but the rest is
not written); `launch` always passes a large enough `per`.  Very long rows (a `per` of
more than 64 columns per thread) keep the array in local memory instead of registers.
"""

import math

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

BLOCK = 512  # threads per block (one block per row)


@launch_contract(
    domain=2,
    block=(BLOCK, 1),
    requires=lambda x, out: x.shape[0] == out.shape[0] and x.shape[1] == out.shape[1],
)
@kernel
def softmax(x: Slice2D[f32], out: DisjointSlice2D[f32], per: az.Constant[int]) -> None:
    t = thread.tile_2d(1, per, 1, 4)  # block (0, b): row b, runs of 4 columns 4 * BLOCK apart
    v = az.local.array(per, f32)
    t.load(x, v, -math.inf)  # one read of the row, 16 bytes at a time, kept in registers
    m = f32(-math.inf)
    for s in range(per):
        m = max(m, v[s])
    rmax = az.block.reduce(m, "max")
    acc = f32(0.0)
    for s in range(per):
        v[s] = az.math.exp(v[s] - rmax)
        acc += v[s]
    total = az.block.reduce(acc, "sum")
    inv = f32(1.0) / total
    for s in range(per):
        v[s] = v[s] * inv
    t.store(out, v)  # one write


def config(rows: int) -> az.LaunchConfig:
    """One block per row."""
    return az.LaunchConfig(grid=(1, rows), block=(BLOCK, 1))


def per_thread(cols: int) -> int:
    """The columns each thread holds: the least multiple of 4 `per` with `per * BLOCK >= cols`."""
    return 4 * max(1, -(-cols // (4 * BLOCK)))


MAX_ROWS = 65535  # CUDA's largest grid y: longer inputs launch once per 65535 rows (row views)


def launch(x: az.Buffer, out: az.Buffer) -> None:
    rows, cols = x.shape
    per = per_thread(cols)
    for lo in range(0, rows, MAX_ROWS):
        n = min(MAX_ROWS, rows - lo)
        if lo == 0 and n == rows:
            softmax[config(rows)](x, out, per)
        else:
            softmax[config(n)](x[lo : lo + n], out[lo : lo + n], per)


# small sizes for tools/sanitize.py (racecheck and synccheck run instrumented builds)
SANITIZE_KWARGS = {"rows": 8, "cols": 3000}


def main(rows: int = 64, cols: int = 1000) -> np.ndarray:
    dev = az.device()
    x_h = np.random.default_rng(8).standard_normal((rows, cols), dtype=np.float32) * 4
    x = dev.to_device(x_h)
    out = dev.empty((rows, cols), az.f32)
    launch(x, out)
    res = out.to_host()
    e = np.exp(x_h.astype(np.float64) - x_h.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(res, ref, rtol=1e-5, atol=1e-7)
    print(f"softmax on {dev.describe()}: {rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()

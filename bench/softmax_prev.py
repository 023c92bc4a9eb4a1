"""softmax: row-wise softmax in the safe tier (no `unsafe` anywhere), one block per row.

Each block owns a whole row of `out` through a per-thread tile (`thread.tile_2d(1, per)`:
with blocks of `BLOCK` threads and a grid of `(1, rows)`, thread `tx` of block `(0, b)`
owns the columns `tx, tx + BLOCK, ..., tx + (per - 1) * BLOCK` of row `b`; docs/language.md,
"Per-thread tiles").  A block reads its row from global memory once (coalesced: a warp
reads 32 consecutive columns per load, `per` loads in flight per thread) into registers
(`az.local.array(per, f32)`, indexed by unrolled constant loops), finds the row's maximum
and the sum of exponentials with two block collectives (`az.block.reduce`), and writes
its elements.  `per` is a compile-time constant (`az.Constant[int]`), the least with
`per * BLOCK >= cols`: `launch(x, out)` below picks it, and each value compiles once.

A launch has at most 65535 rows (CUDA's grid y): `launch` splits longer inputs into row views.
A row longer than `per * BLOCK` columns is not what this kernel is for: the tile would
own only its first `per * BLOCK` columns (nothing is written twice, but the rest is
not written); `launch` always passes a large enough `per`.  Very long rows (a `per` of
more than 64 columns per thread) keep the array in local memory instead of registers.
"""

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
    t = thread.tile_2d(1, per)  # block (0, b): row b, columns tx + s * BLOCK for s < per
    v = az.local.array(per, f32)
    m = f32(-3.0e38)
    for s in range(per):  # one coalesced read of the row, kept in registers
        ij = t.at(0, s)
        if ij in out:
            v[s] = x[ij.row, ij.col]
            m = max(m, v[s])
    rmax = az.block.reduce(m, "max")
    acc = f32(0.0)
    for s in range(per):
        ij = t.at(0, s)
        if ij in out:
            v[s] = az.math.exp(v[s] - rmax)
            acc += v[s]
    total = az.block.reduce(acc, "sum")
    inv = f32(1.0) / total
    for s in range(per):  # one write
        ij = t.at(0, s)
        if ij in out:
            out[ij] = v[s] * inv


def config(rows: int) -> az.LaunchConfig:
    """One block per row."""
    return az.LaunchConfig(grid=(1, rows), block=(BLOCK, 1))


def per_thread(cols: int) -> int:
    """The columns each thread holds: the least `per` with `per * BLOCK >= cols`."""
    return max(1, -(-cols // BLOCK))


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

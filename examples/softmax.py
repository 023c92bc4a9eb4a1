"""softmax: row-wise softmax in the safe tier (no `unsafe` anywhere).

A block of 1024 threads owns 1024 consecutive elements of one row (its
`thread.index_2d()` witnesses: a launch of `for_shape((rows, cols), block=(1024, 1))`
gives a row `ceil(cols / 1024)` blocks).  Every block reads its whole row in one
coalesced pass (four loads in flight per thread), keeping a running maximum and a
running sum of exponentials per thread (the "online" softmax: the sum is rescaled
when the maximum grows), combines
them with two block collectives (`az.block.reduce`, which end with a barrier), and
writes its own elements.  The other blocks of the row read the same row from L2.

Why not one block per row: a thread writes only the element its witness names, so a
block writes at most 1024 elements of `out`; one block per row writing a strided set
of columns is examples/softmax_unsafe.py (`write_unchecked`).
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

BLOCK = 1024  # threads per block: the columns of a row one block owns


@launch_contract(
    domain=2,
    block=(BLOCK, 1),
    requires=lambda x, out: x.shape[0] == out.shape[0] and x.shape[1] == out.shape[1],
)
@kernel
def softmax(x: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()  # this thread's element of `out`
    w = thread.index_in_block()  # this thread's column within each 1024-column stretch
    row = ij.row
    n = x.shape[1] if row < x.shape[0] else 0  # a row past the end reads nothing
    m = f32(-3.0e38)
    s = f32(0.0)
    j = w.get()
    while j + 3 * BLOCK < n:  # the whole row, 1024 columns apart (coalesced), 4 loads in flight
        v0 = x[row, j]
        v1 = x[row, j + BLOCK]
        v2 = x[row, j + 2 * BLOCK]
        v3 = x[row, j + 3 * BLOCK]
        bigger = max(m, max(max(v0, v1), max(v2, v3)))
        e = az.math.exp(v0 - bigger) + az.math.exp(v1 - bigger) + az.math.exp(v2 - bigger) + az.math.exp(v3 - bigger)
        s = s * az.math.exp(m - bigger) + e
        m = bigger
        j += 4 * BLOCK
    while j < n:  # the rest of the row
        v = x[row, j]
        bigger = max(m, v)
        s = s * az.math.exp(m - bigger) + az.math.exp(v - bigger)
        m = bigger
        j += BLOCK
    rmax = az.block.reduce(m, "max")
    total = az.block.reduce(s * az.math.exp(m - rmax), "sum")
    if ij in out:
        out[ij] = az.math.exp(x[ij] - rmax) / total


# small sizes for tools/sanitize.py (racecheck and synccheck run instrumented builds)
SANITIZE_KWARGS = {"rows": 8, "cols": 3000}


def main(rows: int = 64, cols: int = 1000) -> np.ndarray:
    dev = az.device()
    x_h = np.random.default_rng(8).standard_normal((rows, cols), dtype=np.float32) * 4
    x = dev.to_device(x_h)
    out = dev.empty((rows, cols), az.f32)
    softmax[az.LaunchConfig.for_shape((rows, cols), block=(BLOCK, 1))](x, out)
    res = out.to_host()
    e = np.exp(x_h.astype(np.float64) - x_h.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(res, ref, rtol=1e-5, atol=1e-7)
    print(f"softmax on {dev.describe()}: {rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()

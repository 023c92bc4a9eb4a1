# barrier mutant of examples/softmax.py: move_down of the barrier on line 49
"""softmax: row-wise softmax, one block of 256 threads per row.

Why unsafe: the row's max and sum are block-wide reductions through shared
memory and barriers, and each thread writes a strided set of its row's columns
(`write_unchecked`), an ownership pattern that no single witness expresses.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread


@launch_contract(
    domain=1,
    block=256,
    requires=lambda x, out: x.shape[0] == out.shape[0] and x.shape[1] == out.shape[1],
)
@kernel
def softmax(x: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    rows = x.shape[0]
    cols = x.shape[1]
    with az.unsafe():
        red = az.shared.array(256, f32)
        tid = thread.tid_x()
        row = thread.block_idx_x()
        n = cols if row < rows else 0
        m = f32(-3.0e38)
        j = tid
        while j < n:
            m = max(m, x[row, j])
            j += 256
        red[tid] = m
        az.syncthreads()
        s = 128
        while s > 0:
            if tid < s:
                red[tid] = max(red[tid], red[tid + s])
            az.syncthreads()
            s = s // 2
        rmax = red[0]
        az.syncthreads()
        acc = f32(0.0)
        j = tid
        while j < n:
            acc += az.math.exp(x[row, j] - rmax)
            j += 256
        red[tid] = acc
        s = 128
        az.syncthreads()
        while s > 0:
            if tid < s:
                red[tid] = red[tid] + red[tid + s]
            az.syncthreads()
            s = s // 2
        total = red[0]
        j = tid
        while j < n:
            out.write_unchecked((row, j), az.math.exp(x[row, j] - rmax) / total)
            j += 256


def main(rows: int = 64, cols: int = 1000) -> np.ndarray:
    dev = az.device()
    x_h = np.random.default_rng(8).standard_normal((rows, cols), dtype=np.float32) * 4
    x = dev.to_device(x_h)
    out = dev.empty((rows, cols), az.f32)
    softmax[az.LaunchConfig(grid=rows, block=256)](x, out)
    res = out.to_host()
    e = np.exp(x_h.astype(np.float64) - x_h.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(res, ref, rtol=1e-5, atol=1e-7)
    print(f"softmax on {dev.describe()}: {rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()

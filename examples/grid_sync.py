"""grid_sync: normalise a vector by its sum in one launch, with a grid-wide barrier.

Phase 1: each thread sums its grid-stride share of `x`, `az.block.reduce` combines the block's
partial sums, and the block's leader adds the block's sum to `total` with one atomic.  Then
`az.grid.sync()`: no thread goes on until every thread of every block has finished phase 1, so
in phase 2 every thread reads the finished total and writes its share of `x / total`.

The contract says `cooperative=True`: the kernel may call `az.grid.sync()`, and every launch is
cooperative, every block of the grid resident on the GPU at once (a launch whose grid the GPU
cannot hold is refused with the numbers, `az.LaunchError`).  The CPU backend runs every block
of such a grid at once, one host thread per GPU thread.  Without the barrier this needs two
launches (or a spin-wait on a flag, which is `az-spin-wait`: blocks of an ordinary launch need
not be resident together).
"""

import numpy as np

import anodize as az
from anodize import AtomicSlice, DisjointSlice, Slice, f32, kernel, launch_contract, thread

BLOCK = 128


@launch_contract(domain=1, block=BLOCK, cooperative=True,
                 requires=lambda x, total, out: len(total) == 1 and len(out) == len(x))
@kernel
def normalize(x: Slice[f32], total: AtomicSlice[f32], out: DisjointSlice[f32]) -> None:
    acc = f32(0.0)
    for i in thread.grid_stride(x):
        acc += x[i]
    s = az.block.reduce(acc, "sum")
    if thread.is_block_leader():
        total.add(0, s)
    az.grid.sync()  # every block's sum is in `total`
    t = total.load(0)
    for i in thread.grid_stride(out):
        out[i] = x[i] / t


def grid_for(dev: az.Device, n: int) -> int:
    """One block per SM of an H200 (132), fewer for short inputs; 4 on the CPU backend."""
    most = 132 if dev.kind == "cuda" else 4
    return max(1, min(most, (n + BLOCK - 1) // BLOCK))


def main(n: int = 1 << 16) -> float:
    dev = az.device()
    x_h = np.random.default_rng(27).random(n, dtype=np.float32) + np.float32(0.5)
    total = dev.zeros(1, az.f32)
    out = dev.zeros(n, az.f32)
    normalize[az.LaunchConfig(grid=grid_for(dev, n), block=BLOCK)](dev.to_device(x_h), total, out)
    res = out.to_host()
    ref = x_h.astype(np.float64) / x_h.astype(np.float64).sum()
    np.testing.assert_allclose(res, ref, rtol=1e-4)
    s = float(res.astype(np.float64).sum())
    print(f"grid_sync on {dev.describe()}: n={n}, sum of the normalised vector {s:.6f}")
    return s


if __name__ == "__main__":
    main()

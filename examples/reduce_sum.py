"""reduce_sum: the sum of a vector in the safe tier (no `unsafe` anywhere), in one launch.

Each thread sums its grid-stride share of `x` in registers; `az.block.reduce`
combines the block's partial sums (warp shuffles and the compiler's own shared
scratch, with the barriers it needs); the block's leader adds the block's sum to
`total` with one atomic.  Launch one full wave (4 blocks of 512 threads on each of
the 132 SMs of an H200): the grid-stride loop then streams `x` at full bandwidth
whatever its length (on the GPU the loop is unrolled, 4 loads in flight per thread).  Float
atomics add in any order, so the last bits of `total` may differ between runs.
Compare examples/reduce_sum_unsafe.py, which does the block combine by hand with
warp shuffles, a shared array and barriers.
"""

import numpy as np

import anodize as az
from anodize import AtomicSlice, Slice, f32, kernel, launch_contract, thread

BLOCK = 512


@launch_contract(domain=1, block=BLOCK, requires=lambda x, total: len(total) == 1)
@kernel
def reduce_sum(x: Slice[f32], total: AtomicSlice[f32]) -> None:
    acc = f32(0.0)
    for i in thread.grid_stride(x):
        acc += x[i]
    s = az.block.reduce(acc, "sum")  # every thread of the block: the same bits
    if thread.is_block_leader():  # one atomic per block
        total.add(0, s)


def grid_for(dev: az.Device, n: int) -> int:
    """4 blocks of 512 threads per SM of an H200 (132 SMs), fewer for short inputs; the
    CPU backend runs a host thread per GPU thread of a block with barriers: 2 blocks there."""
    most = 132 * 4 if dev.kind == "cuda" else 2
    return max(1, min(most, (n + BLOCK - 1) // BLOCK))


# small sizes for tools/sanitize.py (racecheck and synccheck run instrumented builds)
SANITIZE_KWARGS = {"n": 1 << 16}


def main(n: int = 1 << 20) -> float:
    dev = az.device()
    x_h = np.random.default_rng(6).random(n, dtype=np.float32)
    total = dev.zeros(1, az.f32)
    reduce_sum[az.LaunchConfig(grid=grid_for(dev, n), block=BLOCK)](dev.to_device(x_h), total)
    res = float(total.to_host()[0])
    ref = float(x_h.astype(np.float64).sum())
    assert abs(res - ref) <= 1e-4 * abs(ref), (res, ref)
    print(f"reduce_sum on {dev.describe()}: n={n}, sum={res:.3f} (NumPy float64 {ref:.3f})")
    return res


if __name__ == "__main__":
    main()

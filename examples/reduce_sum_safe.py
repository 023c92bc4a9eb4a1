"""reduce_sum_safe: the sum of a vector in the safe tier (no `unsafe` anywhere).

Each thread sums its grid-stride share; `az.block.reduce` combines the block's partial
sums (warp shuffles and the compiler's own shared scratch, with the barriers it needs);
the block's leader writes the block's sum to its element of `partial` through the
block witness.  A second launch, one block, reduces the partials the same way.  Compare
examples/reduce_sum.py, which does the block combine by hand in the unsafe tier.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread

BLOCK = 256


@launch_contract(domain=1, block=BLOCK)
@kernel
def block_sums(x: Slice[f32], partial: DisjointSlice[f32]) -> None:
    acc = f32(0.0)
    for i in thread.grid_stride(x):
        acc += x[i]
    s = az.block.reduce(acc, "sum")  # every thread of the block: the same bits
    b = thread.block_witness_1d()  # this block's element of `partial`
    if thread.is_block_leader():  # exactly one thread of the block writes it
        partial[b] = s


def reduce_sum(dev: az.Device, x: az.Buffer, blocks: int = 64) -> float:
    partial = dev.zeros(blocks, az.f32)
    block_sums[az.LaunchConfig(grid=blocks, block=BLOCK)](x, partial)
    total = dev.zeros(1, az.f32)
    block_sums[az.LaunchConfig(grid=1, block=BLOCK)](partial, total)  # the partials, one block
    return float(total.to_host()[0])


def main(n: int = 1 << 20) -> float:
    dev = az.device()
    x_h = np.random.default_rng(6).random(n, dtype=np.float32)
    res = reduce_sum(dev, dev.to_device(x_h), blocks=64 if n > 100_000 else 8)
    ref = float(x_h.astype(np.float64).sum())
    assert abs(res - ref) <= 1e-4 * abs(ref), (res, ref)
    print(f"reduce_sum_safe on {dev.describe()}: n={n}, sum={res:.3f} (NumPy float64 {ref:.3f})")
    return res


if __name__ == "__main__":
    main()

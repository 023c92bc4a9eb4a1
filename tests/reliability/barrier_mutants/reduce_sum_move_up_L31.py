# barrier mutant of examples/reduce_sum.py: move_up of the barrier on line 31
"""reduce_sum: sum of a vector with a grid-stride loop, warp shuffles and shared memory.

Why unsafe: the block-level combine needs warp shuffles, a shared-memory array
and a barrier.  The per-thread loop is safe (grid-stride witnesses), and the
final per-block add goes through `AtomicSlice`, which is safe by construction.
"""

import numpy as np

import anodize as az
from anodize import AtomicSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda x, total: len(total) == 1)
@kernel
def reduce_sum(x: Slice[f32], total: AtomicSlice[f32]) -> None:
    acc = f32(0.0)
    for i in thread.grid_stride(x):
        acc += x[i]
    with az.unsafe():
        warp_sums = az.shared.array(32, f32)
        tid = thread.tid_x()
        lane = thread.lane_id()
        if tid < 32:
            warp_sums[tid] = 0.0
        acc += az.warp.shfl_down(acc, 16)
        acc += az.warp.shfl_down(acc, 8)
        acc += az.warp.shfl_down(acc, 4)
        acc += az.warp.shfl_down(acc, 2)
        az.syncthreads()
        acc += az.warp.shfl_down(acc, 1)
        if lane == 0:
            warp_sums[tid // 32] = acc
        az.syncthreads()
        v = warp_sums[lane]
        v += az.warp.shfl_down(v, 4)
        v += az.warp.shfl_down(v, 2)
        v += az.warp.shfl_down(v, 1)
        if tid == 0:
            total.add(0, v)


def main(n: int = 1 << 20) -> float:
    dev = az.device()
    x_h = np.random.default_rng(6).random(n, dtype=np.float32)
    x = dev.to_device(x_h)
    total = dev.zeros(1, az.f32)
    reduce_sum[az.LaunchConfig(grid=64, block=256)](x, total)
    res = float(total.to_host()[0])
    ref = float(x_h.astype(np.float64).sum())
    assert abs(res - ref) <= 1e-4 * abs(ref), (res, ref)
    print(f"reduce_sum on {dev.describe()}: n={n}, sum={res:.3f} (NumPy float64 {ref:.3f})")
    return res


if __name__ == "__main__":
    main()

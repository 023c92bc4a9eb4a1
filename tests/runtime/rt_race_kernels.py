"""A kernel that types and lowers but that the checker rejects (az-shared-race): the compile
overlap (runtime/compile.py) runs codegen on it speculatively and must drop the result."""

import anodize as az
from anodize import AtomicSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda x, total: len(total) == 1)
@kernel
def racy_sum(x: Slice[f32], total: AtomicSlice[f32]) -> None:
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
        if lane == 0:
            warp_sums[tid // 32] = acc  # races with the zeroing above: no barrier between
        az.syncthreads()
        v = warp_sums[lane]
        if tid == 0:
            total.add(0, v)

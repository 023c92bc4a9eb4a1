# barrier mutant of examples/scan.py: delete of the barrier on line 43
"""scan: inclusive prefix sum of int32s, in three launches.

1. `block_scan` scans each 256-element block in shared memory (Hillis-Steele)
   and records each block's total.
2. `block_scan` again, over the block totals (one block: up to 256 blocks).
3. `add_offsets` adds the scanned total of all earlier blocks.

Why unsafe: the in-block scan needs shared memory and barriers, and the block
total is written by the block's last thread at the block's index
(`write_unchecked`), which no witness expresses.  Steps 2's per-element write
and step 3 are safe witness writes.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, i32, kernel, launch_contract, thread


@launch_contract(
    domain=1,
    block=256,
    requires=lambda x, y, sums: len(x) == len(y) and len(sums) * 256 >= len(x),
)
@kernel
def block_scan(x: Slice[i32], y: DisjointSlice[i32], sums: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    v = i32(0)
    if i in y:
        v = x[i]
    with az.unsafe():
        buf = az.shared.array(256, i32)
        tid = thread.tid_x()
        buf[tid] = v
        az.syncthreads()
        off = 1
        while off < 256:
            t = i32(0)
            if tid >= off:
                t = buf[tid - off]
            az.syncthreads()
            buf[tid] = buf[tid] + t
            off = off * 2
        if i in y:
            y[i] = buf[tid]
        if tid == 255 and thread.block_idx_x() < len(sums):
            sums.write_unchecked(thread.block_idx_x(), buf[255])


@launch_contract(domain=1, block=256, requires=lambda partial, offsets, out: len(partial) == len(out))
@kernel
def add_offsets(partial: Slice[i32], offsets: Slice[i32], out: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in out:
        b = i.get() // 256
        off = i32(0)
        if b > 0:
            off = offsets[b - 1]
        out[i] = partial[i] + off


def main(n: int = 50_000) -> np.ndarray:
    assert n <= 256 * 256
    dev = az.device()
    x_h = np.random.default_rng(9).integers(-100, 100, n, dtype=np.int32)
    x = dev.to_device(x_h)
    nb = -(-n // 256)
    partial = dev.empty(n, az.i32)
    sums = dev.empty(nb, az.i32)
    scanned = dev.empty(nb, az.i32)
    unused = dev.empty(1, az.i32)
    out = dev.empty(n, az.i32)
    block_scan[az.LaunchConfig.for_num_elems(n, block=256)](x, partial, sums)
    block_scan[az.LaunchConfig.for_num_elems(nb, block=256)](sums, scanned, unused)
    add_offsets[az.LaunchConfig.for_num_elems(n, block=256)](partial, scanned, out)
    res = out.to_host()
    np.testing.assert_array_equal(res, np.cumsum(x_h, dtype=np.int32))
    print(f"scan on {dev.describe()}: n={n}, matches NumPy cumsum")
    return res


if __name__ == "__main__":
    main()

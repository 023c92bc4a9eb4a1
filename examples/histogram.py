"""histogram: 256-bin byte histogram in the safe tier, with block-private bins.

Each block counts into its own 256 bins in shared memory
(`az.shared.atomic_array`: block-shared atomics, fast and contention-free
between blocks), then adds its counts into the global bins with one
`AtomicSlice.add` per bin.  Every thread zeroes and flushes its own bin
(`thread.index_in_block()`), with a barrier on each side of the counting loop.
The grid-stride loop covers any input size with a fixed grid.
"""

import numpy as np

import anodize as az
from anodize import AtomicSlice, Slice, i32, kernel, launch_contract, thread, u32

BINS = 256  # one bin per thread of the block


@launch_contract(domain=1, block=BINS, requires=lambda data, hist: len(hist) == 256)
@kernel
def histogram(data: Slice[i32], hist: AtomicSlice[u32]) -> None:
    bins = az.shared.atomic_array(BINS, u32)
    w = thread.index_in_block()  # this thread's bin
    bins.store(w, 0)
    az.syncthreads()  # every bin is zero before any thread counts
    for i in thread.grid_stride(data):
        bins.add(data[i] & 255, 1)
    az.syncthreads()  # every count of the block is in before the flush
    n = bins.load(w)
    if n != 0:
        hist.add(w, n)


def grid_for(dev: az.Device, n: int) -> int:
    """About 8 blocks per SM of an H200 (132 SMs), fewer for short inputs; 2 on the CPU
    backend (a host thread per GPU thread of a block with barriers)."""
    most = 132 * 8 if dev.kind == "cuda" else 2
    return max(1, min(most, (n + BINS - 1) // BINS))


# small sizes for tools/sanitize.py (racecheck and synccheck run instrumented builds)
SANITIZE_KWARGS = {"n": 1 << 16}


def main(n: int = 1 << 18) -> np.ndarray:
    dev = az.device()
    data_h = np.random.default_rng(4).integers(0, 1 << 20, n, dtype=np.int32)
    data = dev.to_device(data_h)
    hist = dev.zeros(BINS, az.u32)
    histogram[az.LaunchConfig(grid=grid_for(dev, n), block=BINS)](data, hist)
    res = hist.to_host()
    ref = np.bincount(data_h & 255, minlength=BINS).astype(np.uint32)
    np.testing.assert_array_equal(res, ref)
    print(f"histogram on {dev.describe()}: n={n}, {BINS} bins, matches NumPy")
    return res


if __name__ == "__main__":
    main()

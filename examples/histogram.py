"""histogram: 256-bin byte histogram with `AtomicSlice`, in the safe tier.

Atomic updates cannot race, so no unsafe block is needed; the grid-stride loop
covers any input size with a fixed grid.
"""

import numpy as np

import anodize as az
from anodize import AtomicSlice, Slice, i32, kernel, launch_contract, thread, u32


@launch_contract(domain=1, block=256, requires=lambda data, hist: len(hist) == 256)
@kernel
def histogram(data: Slice[i32], hist: AtomicSlice[u32]) -> None:
    for i in thread.grid_stride(data):
        hist.add(data[i] & 255, 1)


def main(n: int = 1 << 18) -> np.ndarray:
    dev = az.device()
    data_h = np.random.default_rng(4).integers(0, 1 << 20, n, dtype=np.int32)
    data = dev.to_device(data_h)
    hist = dev.zeros(256, az.u32)
    histogram[az.LaunchConfig(grid=64, block=256)](data, hist)
    res = hist.to_host()
    ref = np.bincount(data_h & 255, minlength=256).astype(np.uint32)
    np.testing.assert_array_equal(res, ref)
    print(f"histogram on {dev.describe()}: n={n}, 256 bins, matches NumPy")
    return res


if __name__ == "__main__":
    main()

"""Radix-sort digits of floats from their bits: `az.bitcast` turns each f32 into the u32 key
that orders like the floats, a kernel extracts one 8-bit digit per pass and counts the
digits (the pass's histogram); four passes of a stable sort by the digits sort the floats.
`anodize run examples/radix_digits.py`."""

import numpy as np

import anodize as az
from anodize import AtomicSlice, DisjointSlice, Slice, f32, kernel, launch_contract, thread, u8, u32


@launch_contract(domain=1, block=256, requires=lambda keys, shift, digit, hist: len(keys) == len(digit) and len(hist) == 256)
@kernel
def radix_digits(keys: Slice[f32], shift: u32, digit: DisjointSlice[u8], hist: AtomicSlice[u32]) -> None:
    i = thread.index_1d()
    if i in digit:
        b = az.bitcast(keys[i], u32)
        key = b ^ (u32(0x80000000) if b >> 31 == 0 else u32(0xFFFFFFFF))  # flips the order of negatives
        d = (key >> shift) & 255
        digit[i] = u8(d)
        hist.add(d, u32(1))


def float_keys(x: np.ndarray) -> np.ndarray:
    """NumPy's reference: the same order-preserving u32 key."""
    b = x.view(np.uint32)
    return b ^ np.where(b >> 31 == 0, np.uint32(0x80000000), np.uint32(0xFFFFFFFF))


def main(n: int = 1 << 20) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(5)
    x_host = rng.standard_normal(n, dtype=np.float32) * np.float32(1e3)
    keys = dev.to_device(x_host)
    digit = dev.empty(n, az.u8)
    cfg = az.LaunchConfig.for_num_elems(n, block=256)
    order = np.arange(n)
    ref = float_keys(x_host)
    for shift in (0, 8, 16, 24):
        hist = dev.zeros(256, az.u32)
        radix_digits[cfg](keys, shift, digit, hist)
        d = digit.to_host()
        want = np.bitwise_and(ref >> np.uint32(shift), np.uint32(255)).astype(np.uint8)
        np.testing.assert_array_equal(d, want)
        np.testing.assert_array_equal(hist.to_host(), np.bincount(want, minlength=256))
        order = order[np.argsort(d[order], kind="stable")]  # one LSD pass
    res = x_host[order]
    np.testing.assert_array_equal(res, np.sort(x_host))
    print(f"radix_digits on {dev.describe()}: n={n}, four 8-bit passes sort the floats, matches NumPy")
    return res


if __name__ == "__main__":
    main()

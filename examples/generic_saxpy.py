"""A generic kernel: one saxpy for every float type (f16, f32 and f64), specialised per launch
from the dtypes.

    python examples/generic_saxpy.py

Each result is checked against NumPy in f64 from the same inputs.  f16 rounds each operation
to 11 significant bits (unit roundoff u = 2**-11); with nonnegative inputs `a * x + y` is
within 2u of the exact value (two roundings, or one where the target fuses them), and
`x**3` (two multiplications) within 2u as well: the f16 tolerance is a relative 2**-10 (plus
2**-24, f16's smallest subnormal step, for results near zero).  f32 is held to 1e-6 and f64
to 1e-12.
"""

from typing import TypeVar, cast

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f16, f32, f64, kernel, launch_contract, thread

T = TypeVar("T", f16, f32, f64)


@launch_contract(domain=1, block=256, requires=lambda x, y, out: len(x) == len(out) and len(y) == len(out))
@kernel
def saxpy(a: T, x: Slice[T], y: Slice[T], out: DisjointSlice[T]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = a * x[i] + cast(T, y[i])  # `cast(T, v)` converts to this specialisation's scalar


@launch_contract(domain=1, block=256, requires=lambda x, out: len(x) == len(out))
@kernel
def power(x: Slice[T], out: DisjointSlice[T], k: az.Constant[int]) -> None:
    i = thread.index_1d()
    if i in out:
        acc = cast(T, 1.0)
        for _ in range(k):  # `k` is a compile-time constant: one specialisation per value
            acc *= x[i]
        out[i] = acc


# (rtol, atol) per dtype: see the module's docstring for the f16 bound
TOLERANCE = {np.float16: (2.0**-10, 2.0**-24), np.float32: (1e-6, 0.0), np.float64: (1e-12, 0.0)}


def main(n: int = 1 << 16) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(0)
    for dtype, scalar in ((np.float16, az.f16), (np.float32, az.f32), (np.float64, az.f64)):
        x = rng.random(n).astype(dtype)
        y = rng.random(n).astype(dtype)
        out = dev.empty(n, scalar)
        saxpy[az.LaunchConfig.for_num_elems(n)](np.dtype(dtype).type(2.5), dev.to_device(x), dev.to_device(y), out)
        rtol, atol = TOLERANCE[dtype]
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        got = out.to_host().astype(np.float64)
        assert np.allclose(got, 2.5 * x64 + y64, rtol=rtol, atol=atol), dtype
        power[az.LaunchConfig.for_num_elems(n)](dev.to_device(x), out, 3)
        assert np.allclose(out.to_host().astype(np.float64), x64**3, rtol=rtol * (1 if dtype == np.float16 else 10), atol=atol), dtype
    print(f"generic saxpy on {dev.describe()}: f16, f32 and f64 match NumPy; "
          f"{len(saxpy.store.specs)} specialisations")
    return out.to_host()


if __name__ == "__main__":
    main()

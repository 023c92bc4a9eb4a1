"""A generic kernel: one saxpy for every float type, specialised per launch from the dtypes.

    python examples/generic_saxpy.py
"""

from typing import TypeVar, cast

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, f64, kernel, launch_contract, thread

T = TypeVar("T", f32, f64)


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


def main(n: int = 1 << 16) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(0)
    for dtype, scalar in ((np.float32, az.f32), (np.float64, az.f64)):
        x = rng.random(n).astype(dtype)
        y = rng.random(n).astype(dtype)
        out = dev.empty(n, scalar)
        saxpy[az.LaunchConfig.for_num_elems(n)](np.dtype(dtype).type(2.5), dev.to_device(x), dev.to_device(y), out)
        tol = 1e-6 if dtype == np.float32 else 1e-12
        want = 2.5 * x.astype(np.float64) + y.astype(np.float64)
        assert np.allclose(out.to_host(), want, rtol=tol), dtype
        power[az.LaunchConfig.for_num_elems(n)](dev.to_device(x), out, 3)
        assert np.allclose(out.to_host(), x**3, rtol=tol * 10), dtype
    print(f"generic saxpy on {dev.describe()}: f32 and f64 match NumPy; "
          f"{len([k for k in saxpy._cache if isinstance(k, tuple) and k[0] == 'spec'])} specialisations")
    return out.to_host()


if __name__ == "__main__":
    main()

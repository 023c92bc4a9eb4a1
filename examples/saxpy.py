"""saxpy: y_out = alpha * x + y, with a scalar parameter. `anodize run examples/saxpy.py`."""

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda alpha, x, y, out: len(x) == len(out) and len(y) == len(out))
@kernel
def saxpy(alpha: f32, x: Slice[f32], y: Slice[f32], out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = alpha * x[i] + y[i]


def main(n: int = 1 << 20, alpha: float = 2.5) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(1)
    x_host = rng.standard_normal(n, dtype=np.float32)
    y_host = rng.standard_normal(n, dtype=np.float32)
    x, y = dev.to_device(x_host), dev.to_device(y_host)
    out = dev.empty(n, az.f32)
    saxpy[az.LaunchConfig.for_num_elems(n, block=256)](alpha, x, y, out)
    res = out.to_host()
    ref = np.float32(alpha) * x_host + y_host
    np.testing.assert_allclose(res, ref, rtol=1e-6, atol=1e-6)
    print(f"saxpy on {dev.describe()}: n={n}, alpha={alpha}, out[:4] = {res[:4]}, matches NumPy")
    return res


if __name__ == "__main__":
    main()

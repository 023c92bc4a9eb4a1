"""vecadd: the LANGUAGE.md program. `anodize run examples/vecadd.py`.

Three f32 vectors; every thread writes its own element of `c`, guarded by
`i in c`, and the contract lets the compiler drop the read checks on `a`/`b`.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:  # bounds guard; narrows the write below
        c[i] = a[i] + b[i]


def main(n: int = 1 << 20) -> np.ndarray:
    dev = az.device()  # first GPU, else the CPU backend (with a one-line notice)
    rng = np.random.default_rng(0)
    a_host = rng.random(n, dtype=np.float32)
    b_host = rng.random(n, dtype=np.float32)
    a = dev.to_device(a_host)
    b = dev.to_device(b_host)
    c = dev.empty(n, az.f32)
    vecadd[az.LaunchConfig.for_num_elems(n, block=256)](a, b, c)
    out = c.to_host()
    np.testing.assert_array_equal(out, a_host + b_host)
    print(f"vecadd on {dev.describe()}: n={n}, c[:4] = {out[:4]}, matches NumPy")
    return out


if __name__ == "__main__":
    main()

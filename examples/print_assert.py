"""print_assert: `print(...)` and `assert` inside a kernel.

`print` takes string literals and scalars and prints them like Python, separated by
spaces (device printf on the GPU; the output appears by the next synchronisation).
A failed `assert cond, "message"` does not stop the thread: it records a fault, and
the next synchronisation raises `az.KernelFault` with the file, line and message.
The device stays usable afterwards.
"""

import math

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda x, out: len(x) == len(out))
@kernel
def checked_sqrt(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in out:
        v = x[i]
        if i.get() == 0:
            print("checked_sqrt:", len(out), "elements, x[0] =", v)
        assert v >= 0.0, "sqrt of a negative input"
        out[i] = math.sqrt(max(v, f32(0.0)))


def main(n: int = 1 << 16) -> np.ndarray:
    dev = az.device()
    x_h = np.linspace(0.25, 100.0, n, dtype=np.float32)
    x, out = dev.to_device(x_h), dev.empty(n, az.f32)
    cfg = az.LaunchConfig.for_num_elems(n)
    checked_sqrt[cfg](x, out)  # prints one line
    res = out.to_host()
    np.testing.assert_allclose(res, np.sqrt(x_h), rtol=1e-6)

    bad = x_h.copy()
    bad[n // 2] = -1.0
    checked_sqrt[cfg](dev.to_device(bad), out)
    try:
        dev.synchronize()
    except az.KernelFault as e:
        assert e.kind == "assert" and e.message == "sqrt of a negative input"
        print(f"caught: {e}")
    else:
        raise AssertionError("the failed assert was not reported")

    checked_sqrt[cfg](x, out)  # the device survives the fault
    np.testing.assert_allclose(out.to_host(), res)
    return res


if __name__ == "__main__":
    main()

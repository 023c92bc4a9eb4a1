"""On a GPU: every kernel math function within the CUDA Math API's ulp bound, f32 and f64,
with C's special values (the harness: math_cases.py; the CPU twin: test_math_ulp.py).

Skipped without a GPU (the `gpu` marker).  `python tests/codegen/test_math_gpu.py`
prints the measured table."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import math_cases as M
import numpy as np
import pytest

from anodize.language.vocab import MATH_FUNCS

pytestmark = pytest.mark.gpu
N = {32: 1 << 16, 64: 2048}


def _gpu_runner() -> Any:
    import anodize as az

    dev = az.device(0)

    def run(kernel: Any, n: int, *args: Any) -> None:
        bufs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
        kernel[az.LaunchConfig.for_num_elems(n, block=M.BLOCK)](*bufs)
        dev.synchronize()
        for a, b in zip(args, bufs, strict=True):
            if isinstance(a, np.ndarray):
                a[...] = b.to_host()

    return run


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, M.Measured]]:
    mod = M.load_kernels(tmp_path_factory.mktemp("mathgpu"))
    run = _gpu_runner()
    return {bits: M.measure_all(mod, bits, run, N[bits]) for bits in (32, 64)}


@pytest.mark.parametrize("bits", [32, 64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(MATH_FUNCS))
def test_within_cuda_ulp_bound_on_gpu(name: str, bits: int, measured: dict[int, dict[str, M.Measured]]) -> None:
    if bits == 64 and name in M.NEEDS_MPMATH and M.mp is None:
        pytest.skip(f"the f64 reference for `{name}` needs mpmath")
    m = measured[bits][name]
    assert m.ok, f"math.{name} on {M.TYPES[bits]}: {m.max_ulp:.3g} ulp at {m.worst} (bound {m.bound})"


def test_fences_run_on_gpu() -> None:
    import anodize as az
    from test_math_ptx import fenced

    dev = az.device(0)
    a = np.arange(1000, dtype=np.float32)
    c = dev.zeros(1000, az.f32)
    fenced[az.LaunchConfig.for_num_elems(1000, block=64)](dev.to_device(a), c)
    np.testing.assert_array_equal(c.to_host(), a * 2)


if __name__ == "__main__":
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    with tempfile.TemporaryDirectory() as d:
        mod = M.load_kernels(Path(d))
        res = {bits: M.measure_all(mod, bits, _gpu_runner(), N[bits]) for bits in (32, 64)}
    print(M.table(res))
    for bits in (32, 64):
        for m in res[bits].values():
            if not m.ok or m.outside:
                print(m)

"""Every kernel math function on the CPU backend, f32 and f64: within the CUDA Math API's
ulp bound, with C's special values (the harness and its conventions: math_cases.py).

`python tests/codegen/test_math_ulp.py` prints the table of docs/language.md."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import math_cases as M
import numpy as np
import pytest
from cg_helpers import run_cpu

from anodize.codegen.driver import compile_cpu
from anodize.language.vocab import MATH_FUNCS

N = {32: 4096, 64: 1024}


def _cpu_runner() -> Any:
    cache: dict[str, Any] = {}

    def run(kernel: Any, n: int, *args: Any) -> None:
        ck = cache.get(kernel.fn.__name__)
        if ck is None:
            ck = cache[kernel.fn.__name__] = compile_cpu(kernel)
        f = run_cpu(ck, (-(-n // M.BLOCK),), (M.BLOCK,), *args)
        assert f.count == 0

    return run


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, M.Measured]]:
    mod = M.load_kernels(tmp_path_factory.mktemp("math"))
    run = _cpu_runner()
    return {bits: M.measure_all(mod, bits, run, N[bits]) for bits in (32, 64)}


def test_every_function_has_a_bound_and_a_reference() -> None:
    assert set(M.BOUNDS) == set(MATH_FUNCS)
    for name in MATH_FUNCS:  # each Python `math` name means the same function
        assert name in M.C_REF or name in ("fma", "ldexp"), name


@pytest.mark.parametrize("bits", [32, 64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(MATH_FUNCS))
def test_within_cuda_ulp_bound(name: str, bits: int, measured: dict[int, dict[str, M.Measured]]) -> None:
    if bits == 64 and name in M.NEEDS_MPMATH and M.mp is None:
        pytest.skip(f"the f64 reference for `{name}` needs mpmath (CPython's own math.{name} is off by tens of ulps)")
    m = measured[bits][name]
    assert m.ok, f"math.{name} on {M.TYPES[bits]}: {m.max_ulp:.3g} ulp at {m.worst} (bound {m.bound})"


def test_lgamma_is_measured_inside_cudas_excluded_interval_too(measured: dict[int, dict[str, M.Measured]]) -> None:
    for bits in (32, 64):
        assert measured[bits]["lgamma"].outside < math.inf  # no NaN or infinity where a finite value is due


def test_ulp_measure_is_not_vacuous() -> None:
    """The error measure sees a one-ulp step, an overflow to inf, a lost NaN and a wrong sign."""
    one = np.nextafter(np.float32(1.0), np.float32(2.0))
    near = float(np.finfo(np.float32).max) + 2.0**102  # rounds to FLT_MAX, not inf
    e = M.ulp_errors(np.array([one, np.inf, 0.0, -2.0], np.float32), np.array([1.0, near, math.nan, 2.0]), 32)
    assert e[0] == pytest.approx(1.0)
    assert e[1] == pytest.approx(0.75)  # 2**128 stands for inf
    assert e[2] == math.inf and e[3] > 1e6
    e64 = M.ulp_errors(np.array([1.0 + 2**-52, math.inf]), [1.0, -math.inf], 64)
    assert e64[0] == pytest.approx(1.0) and e64[1] == math.inf


def test_special_values_follow_c(tmp_path: Path) -> None:
    """Domain errors give NaN or an infinity (never a Python exception), as libdevice does."""
    mod = M.load_kernels(tmp_path)
    run = _cpu_runner()
    x = np.array([-1.0, 0.0, -0.0, -2.0, np.inf], np.float32)
    cases = {"log": [np.nan, -np.inf, -np.inf, np.nan, np.inf], "sqrt": [np.nan, 0.0, -0.0, np.nan, np.inf],
             "lgamma": [np.inf, np.inf, np.inf, np.inf, np.inf], "gamma": [np.nan, np.inf, -np.inf, np.nan, np.inf],
             "acosh": [np.nan, np.nan, np.nan, np.nan, np.inf], "atanh": [-np.inf, 0.0, -0.0, np.nan, np.nan]}  # fmt: skip
    for name, want in cases.items():
        o = np.zeros_like(x)
        run(mod.unary_f32, len(x), M.UNARY.index(name), x, o)
        np.testing.assert_array_equal(o, np.array(want, np.float32), err_msg=name)
        num = ~np.isnan(o)
        assert list(np.signbit(o[num])) == list(np.signbit(np.array(want, np.float32)[num])), name


if __name__ == "__main__":  # the docs table
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    with tempfile.TemporaryDirectory() as d:
        mod = M.load_kernels(Path(d))
        res = {bits: M.measure_all(mod, bits, _cpu_runner(), N[bits]) for bits in (32, 64)}
    print(M.table(res))
    for bits in (32, 64):
        for m in res[bits].values():
            if not m.ok or m.outside:
                print(m)

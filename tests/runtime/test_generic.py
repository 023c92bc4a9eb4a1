"""Generic kernels: specialised per launch from the arguments, cached per specialisation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.checker.api import check_source

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):  # type: ignore[no-untyped-def]
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"gen_{name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def gs():  # type: ignore[no-untyped-def]
    return _load("generic_saxpy")


def test_each_dtype_compiles_once(gs) -> None:  # type: ignore[no-untyped-def]
    dev = az.device("cpu")
    n = 300
    cfg = az.LaunchConfig.for_num_elems(n)
    for _ in range(2):
        for dt, sc in ((np.float32, az.f32), (np.float64, az.f64)):
            x = dev.to_device(np.arange(n, dtype=dt))
            out = dev.empty(n, sc)
            gs.saxpy[cfg](dt(2.0), x, x, out)
            assert np.allclose(out.to_host(), 3.0 * np.arange(n))
    specs = set(gs.saxpy.store.specs)  # the LRU of specialisations (anodize/kernel.py)
    assert {s[1] for s in specs} == {(("T", "f32"),), (("T", "f64"),)}


def test_a_dtype_outside_the_constraint_names_the_allowed_ones(gs) -> None:  # type: ignore[no-untyped-def]
    dev = az.device("cpu")
    x = dev.to_device(np.arange(8, dtype=np.int32))
    with pytest.raises(az.ArgumentError) as e:
        gs.saxpy[az.LaunchConfig.for_num_elems(8)](1.0, x, x, dev.empty(8, az.i32))
    assert "int32" in str(e.value) and "f32, f64" in str(e.value)


def test_mixed_dtypes_for_one_type_variable_are_refused(gs) -> None:  # type: ignore[no-untyped-def]
    dev = az.device("cpu")
    with pytest.raises(az.ArgumentError, match="every argument typed `T`"):
        gs.saxpy[az.LaunchConfig.for_num_elems(8)](
            1.0, dev.to_device(np.ones(8, np.float32)), dev.to_device(np.ones(8, np.float64)), dev.empty(8, az.f32)
        )


def test_a_constant_needs_a_literal_value(gs) -> None:  # type: ignore[no-untyped-def]
    dev = az.device("cpu")
    x = dev.to_device(np.ones(8, np.float32))
    with pytest.raises(az.ArgumentError, match="az.Constant\\[int\\]"):
        gs.power[az.LaunchConfig.for_num_elems(8)](x, dev.empty(8, az.f32), np.ones(3))
    with pytest.raises(az.ArgumentError, match="az.Constant\\[int\\]"):
        gs.power[az.LaunchConfig.for_num_elems(8)](x, dev.empty(8, az.f32), 2.5)


def test_each_constant_value_is_its_own_specialisation(gs) -> None:  # type: ignore[no-untyped-def]
    dev = az.device("cpu")
    x = np.full(8, 2.0, np.float32)
    out = dev.empty(8, az.f32)
    for k in (0, 1, 5):
        gs.power[az.LaunchConfig.for_num_elems(8)](dev.to_device(x), out, k)
        assert np.allclose(out.to_host(), 2.0**k)
    assert gs.power.specialize(T="f32", k=5) is gs.power.specialize(k=5, T="f32")


def test_one_config_reused_across_dtypes_and_constants(gs) -> None:  # type: ignore[no-untyped-def]
    """The positional fast path (`GenericLaunch._fast`) keys on dtypes and Constant values:
    switching between them on one launcher object picks the right specialisation every time,
    and a refused argument stays refused after an accepted one of an equal value."""
    dev = az.device("cpu")
    n = 64
    cfg = az.LaunchConfig.for_num_elems(n)
    saxpy, power = gs.saxpy[cfg], gs.power[cfg]
    for _ in range(3):
        for dt, sc in ((np.float32, az.f32), (np.float64, az.f64), (np.float32, az.f32)):
            x = dev.to_device(np.arange(n, dtype=dt))
            out = dev.empty(n, sc)
            saxpy(dt(3.0), x, x, out)
            assert out.to_host().dtype == dt and np.allclose(out.to_host(), 4.0 * np.arange(n))
            saxpy(3.0, x, x, out)  # a Python float takes T from the arrays
            assert np.allclose(out.to_host(), 4.0 * np.arange(n))
        for k in (2, 3, 2):
            xs = dev.to_device(np.full(n, 2.0, np.float32))
            out = dev.empty(n, az.f32)
            power(xs, out, k)
            assert np.allclose(out.to_host(), 2.0**k), k
        with pytest.raises(az.ArgumentError, match="az.Constant\\[int\\]"):
            power(xs, out, True)  # equal to 1 as a key, but a bool is not an int Constant
        power(xs, out, 1)
        assert np.allclose(out.to_host(), 2.0)
        with pytest.raises(az.ArgumentError, match="az.Constant\\[int\\]"):
            power(xs, out, True)
        with pytest.raises(az.ArgumentError, match="az.Constant\\[int\\]"):
            power(xs, out, [1])  # unhashable: the slow path names the problem
        with pytest.raises(az.AliasingError):
            saxpy(2.0, x, x, x)  # the fast path still validates every argument


def test_specialize_validates_and_compile_asks_for_one(gs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(az.ArgumentError, match="may only be f16, f32, f64"):
        gs.saxpy.specialize(T="i32")
    with pytest.raises(az.ArgumentError, match="give `T`"):
        gs.saxpy.specialize()
    with pytest.raises(az.ArgumentError, match="is generic"):
        gs.saxpy.compile(arch="sm_90")
    ck = gs.saxpy.specialize(T="f64").compile(arch="sm_90")
    assert ".f64" in ck.ptx and "saxpy" in ck.ptx


def test_the_checker_types_every_member() -> None:
    src = (ROOT / "fixtures" / "reject" / "generic_members.py").read_text()
    shift = [d for d in check_source(src, "g.py") if d.code == "az-type" and "<<" in d.message]
    assert len(shift) == 1 and any("N = f32" in n for n in shift[0].notes)


def test_f16_saxpy_within_the_stated_tolerance(gs) -> None:  # type: ignore[no-untyped-def]
    """f16 is in the constraint: the CPU backend's result is within the example's f16 bound
    (2 roundings of 2**-11) of the exact value, and a third of the values differ from f32's."""
    dev = az.device("cpu")
    n = 4000
    rng = np.random.default_rng(5)
    x, y = rng.random(n).astype(np.float16), rng.random(n).astype(np.float16)
    out = dev.empty(n, az.f16)
    gs.saxpy[az.LaunchConfig.for_num_elems(n)](np.float16(2.5), dev.to_device(x), dev.to_device(y), out)
    got = out.to_host()
    assert got.dtype == np.float16
    exact = 2.5 * x.astype(np.float64) + y.astype(np.float64)
    rtol, atol = gs.TOLERANCE[np.float16]
    assert np.all(np.abs(got.astype(np.float64) - exact) <= rtol * np.abs(exact) + atol)
    assert np.mean(got.astype(np.float64) != exact.astype(np.float32)) > 0.3  # really computed in f16
    specs = {k[1] for k in gs.saxpy.store.specs}
    assert (("T", "f16"),) in specs


@pytest.mark.gpu
def test_gpu_generic_saxpy_on_f16_f32_f64(gs) -> None:  # type: ignore[no-untyped-def]
    """The example's own checks (f16 with its stated tolerance) on the GPU."""
    orig = az.device
    try:
        az.device = lambda *a, **k: orig(0)  # type: ignore[assignment]
        gs.main(1 << 18)
    finally:
        az.device = orig  # type: ignore[assignment]


def test_framework_dtype_names_pick_the_scalar() -> None:
    """A PyTorch tensor's dtype prints as `torch.bfloat16`: its type variable is specialised from
    it as from NumPy's `bfloat16` (the generic GEMM over torch tensors, bench/interop_bench.py)."""
    from anodize.runtime.generic import _dtype_name

    class TorchDtype:  # str() as torch.dtype's, no `.name`
        def __init__(self, s: str) -> None:
            self.s = s

        def __str__(self) -> str:
            return self.s

    class Tensor:
        def __init__(self, s: str) -> None:
            self.dtype = TorchDtype(s)

    assert [_dtype_name(Tensor(f"torch.{n}")) for n in ("float16", "bfloat16", "float32", "int64")] == ["f16", "bf16", "f32", "i64"]
    assert _dtype_name(Tensor("torch.complex64")) is None


def test_a_dlpack_only_array_picks_the_scalar_from_its_capsule() -> None:
    """An object seen through `__dlpack__` alone (no `dtype`) is specialised from its capsule's
    element type (bench/interop_bench.py's DLPack rows of the generic tile GEMM)."""
    import numpy as np

    from anodize.runtime.generic import _dtype_name

    class DLPackOnly:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __dlpack__(self, **kw: Any) -> Any:
            return self._inner.__dlpack__(**kw)

    assert _dtype_name(DLPackOnly(np.zeros(4, np.float16))) == "f16"
    assert _dtype_name(DLPackOnly(np.zeros(4, np.int32))) == "i32"
    assert _dtype_name(object()) is None

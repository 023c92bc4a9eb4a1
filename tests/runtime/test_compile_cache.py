"""The compile path: the checker runs first, artifacts and launch plans are cached."""

from __future__ import annotations

from typing import Any

import rt_fake_backend
import numpy as np
import pytest
from rt_kernels import fill, vecadd

import anodize as az
from anodize import CheckError
from anodize.language.diagnostics import Span
from anodize.language.messages import unsupported
from anodize.runtime import compile as rt_compile
from anodize.runtime.device import Device


def test_checker_runs_before_codegen(fake: None, cpu: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def enforce(k: Any) -> None:
        calls.append("check")
        raise CheckError([unsupported(Span("rt_kernels.py", 1, 0, 1, 1), "tuple-unpacking")])

    def codegen(k: Any, **kw: Any) -> Any:
        calls.append("codegen")
        raise AssertionError("codegen must not run after a check error")

    monkeypatch.setattr(rt_compile, "_enforce", enforce)
    monkeypatch.setattr(rt_compile, "_codegen_cpu", codegen)
    a = cpu.to_device(np.ones(8, np.float32))
    with pytest.raises(CheckError):
        vecadd[az.LaunchConfig.for_num_elems(8)](a, a, cpu.empty(8, az.f32))
    assert calls == ["check"]


def test_compiles_once_per_kernel_and_device(fake: None, cpu: Device) -> None:
    rt_fake_backend.compile_count.clear()
    n = 512
    a, b, c = cpu.to_device(np.ones(n, np.float32)), cpu.to_device(np.ones(n, np.float32)), cpu.empty(n, az.f32)
    for block_n in (n, n, n - 1, n):
        vecadd[az.LaunchConfig.for_num_elems(block_n)](a[:block_n], b[:block_n], c[:block_n])
    assert rt_fake_backend.compile_count == {"vecadd": 1}
    np.testing.assert_array_equal(c.to_host(), np.full(n, 2, np.float32))


def test_launcher_and_plans_are_cached(fake: None, cpu: Device) -> None:
    cfg = az.LaunchConfig.for_num_elems(64, block=64)
    launcher = fill[cfg]
    assert fill[cfg] is launcher and fill[az.LaunchConfig.for_num_elems(64, block=64)] is launcher
    out = cpu.empty(64, az.i32)
    for v in range(5):
        launcher(out, v, 8, 8)
    assert len(launcher._plans) == 1
    launcher(out, np.int32(9), 8, 8)  # another argument-type signature: a second plan
    assert len(launcher._plans) == 2
    np.testing.assert_array_equal(out.to_host(), np.full(64, 9, np.int32))


def test_source_hash_is_stable_and_cached(fake: None) -> None:
    h = rt_compile.source_hash(vecadd)
    assert h == rt_compile.source_hash(vecadd) and len(h) == 64
    assert h != rt_compile.source_hash(fill)


def test_compile_for_gpu_caches_by_arch_and_options(fake: None, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, bool, bool, int]] = []

    def codegen(k: Any, arch: str, *, bounds_checks: bool, line_info: bool, opt: int) -> Any:
        seen.append((arch, bounds_checks, line_info, opt))
        ck = rt_fake_backend.compile_cpu(k)
        ck.arch = arch
        return ck

    monkeypatch.setattr(rt_compile, "_codegen_gpu", codegen)
    monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", "0")  # `_codegen_gpu` is the checker-first path's codegen
    a = vecadd.compile("sm_80")
    assert vecadd.compile("sm_80") is a and a.arch == "sm_80"
    vecadd.compile("sm_90")
    vecadd.compile("sm_80", bounds_checks=False)
    vecadd.compile("sm_80", line_info=True)
    vecadd.compile("sm_80", opt=1)
    assert seen == [("sm_80", True, False, 3), ("sm_90", True, False, 3), ("sm_80", False, False, 3),
                    ("sm_80", True, True, 3), ("sm_80", True, False, 1)]


def test_default_arch_without_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")
    assert rt_compile.default_arch() == "sm_90"


def test_real_checker_gates_the_launch(cpu: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("anodize.codegen.driver", "anodize.checker.api")):
        pytest.skip("needs anodize.codegen.driver and anodize.checker.api")
    from rt_bad_kernels import writes_input

    reached: list[str] = []
    real = rt_compile._codegen_cpu
    monkeypatch.setattr(rt_compile, "_codegen_cpu", lambda k, **kw: reached.append(k.__name__) or real(k, **kw))
    writes_input.store.clear()
    a, c = cpu.to_device(np.ones(8, np.float32)), cpu.empty(8, az.f32)
    with pytest.raises(CheckError) as e:
        writes_input[az.LaunchConfig.for_num_elems(8)](a, c)
    assert "az-shared-write" in str(e.value) and "rt_bad_kernels.py" in str(e.value)
    assert reached == []


def test_real_compile_for_gpu_without_a_gpu() -> None:
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("anodize.codegen.driver", "anodize.checker.api")):
        pytest.skip("needs anodize.codegen.driver and anodize.checker.api")
    from rt_bad_kernels import writes_input

    vecadd.store.clear()
    ck = vecadd.compile("sm_90")
    assert ck.arch == "sm_90" and ".entry" in ck.ptx and ck.params[2].is_output
    assert vecadd.compile("sm_90") is ck
    writes_input.store.clear()
    with pytest.raises(CheckError, match="az-shared-write"):
        writes_input.compile("sm_90")
    vecadd.store.clear()

"""Kernel faults: recorded on the device, raised at the next sync point, and the device stays usable."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from rt_kernels import histogram, shift_read, vecadd

import anodize as az
from anodize import KernelFault
from anodize.runtime.device import Device


def _line_of(text: str) -> int:
    import rt_kernels

    lines = inspect.getsource(rt_kernels).splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def test_fault_fields(dev: Device) -> None:
    n = 1000
    a, c = dev.to_device(np.arange(n, dtype=np.float32)), dev.zeros(n, az.f32)
    shift_read[az.LaunchConfig.for_num_elems(n, block=128)](a, c)
    with pytest.raises(KernelFault) as e:
        dev.synchronize()
    f = e.value
    assert (f.kernel, f.kind, f.index, f.length, f.count) == ("shift_read", "read", n, n, 1)
    assert f.path.endswith("rt_kernels.py") and f.line == _line_of("a[i.get() + 1]")
    assert f"rt_kernels.py:{f.line}: read: index 1000 out of bounds for length 1000" in str(f)
    # every in-bounds thread still did its work; the fault was reset
    expect = np.zeros(n, np.float32)
    expect[: n - 1] = np.arange(1, n, dtype=np.float32)
    np.testing.assert_array_equal(c.to_host(), expect)


def test_fault_raised_by_to_host_and_check(dev: Device) -> None:
    n = 300
    a, c = dev.to_device(np.ones(n, np.float32)), dev.zeros(n, az.f32)
    cfg = az.LaunchConfig.for_num_elems(n, block=128)
    shift_read[cfg](a, c)
    with pytest.raises(KernelFault):
        c.to_host()
    shift_read[cfg](a, c)
    with pytest.raises(KernelFault):
        dev.check()
    dev.check()  # reset: nothing pending now


def test_fault_count_and_atomic_kind(dev: Device) -> None:
    hx = np.array([0, 1, 99, 2, -5, 3, 99], dtype=np.int32)
    x, h = dev.to_device(hx), dev.zeros(4, az.i32)
    histogram[az.LaunchConfig.for_num_elems(len(hx))](x, h)
    with pytest.raises(KernelFault) as e:
        dev.synchronize()
    assert e.value.kind == "atomic" and e.value.count == 3 and e.value.length == 4
    assert e.value.index in (99, -5)
    assert "3 faults recorded" in str(e.value)
    np.testing.assert_array_equal(h.to_host(), [1, 1, 1, 1])


def test_thousand_faults_then_a_correct_launch(dev: Device) -> None:
    n = 256
    a, c = dev.to_device(np.arange(n, dtype=np.float32)), dev.zeros(n, az.f32)
    cfg = az.LaunchConfig.for_num_elems(n, block=128)
    for _ in range(1000):
        shift_read[cfg](a, c)
        with pytest.raises(KernelFault) as e:
            dev.synchronize()
        assert e.value.index == n and e.value.count == 1
    ha, hb = np.random.rand(4096).astype(np.float32), np.random.rand(4096).astype(np.float32)
    x, y, z = dev.to_device(ha), dev.to_device(hb), dev.empty(4096, az.f32)
    vecadd[az.LaunchConfig.for_num_elems(4096)](x, y, z)
    np.testing.assert_array_equal(z.to_host(), ha + hb)


def test_faults_of_two_kernels_are_separate(dev: Device) -> None:
    n = 256
    a, c = dev.to_device(np.ones(n, np.float32)), dev.zeros(n, az.f32)
    x, h = dev.to_device(np.array([0, 7], np.int32)), dev.zeros(2, az.i32)
    shift_read[az.LaunchConfig.for_num_elems(n, block=128)](a, c)
    histogram[az.LaunchConfig.for_num_elems(2)](x, h)
    with pytest.raises(KernelFault):
        dev.synchronize()
    dev.synchronize()  # one raise covers the sync point; every slot was reset
    assert dev.faults.slots >= 2


def test_no_launch_no_read(cpu: Device) -> None:
    assert cpu.faults.dirty is False
    cpu.synchronize()
    assert cpu.faults.dirty is False

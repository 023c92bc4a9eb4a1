"""Under `ANODIZE_FAULT_READ_SKIP=1` (off by default until measured on a GPU), a
submission's completion reads a kernel's fault record back from the GPU only when the
kernel can write it (runtime/faults.py `ptx_can_fault`: its PTX calls `__az_fault`, the one
function that writes the record).  A kernel whose checks were all proven (or that needs
none) costs no device-to-host copy per completion; one with a fault path still reports its
`KernelFault`.  The same holds for the device's fault arena at a synchronisation
(`dev.check()`, `dev.synchronize()`, `to_host`): a chunk of slots none of whose kernels can
fault is not read.  On tests/fakecuda.py's driver, whose kernels run on the CPU, each kernel
carries its real sm_90 PTX (so `can_fault` reads what a GPU would load)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import fakecuda
import numpy as np
import pytest
from aop_kernels import affine, shift_read

import anodize as az
from anodize.codegen.driver import compile_gpu
from anodize.runtime import inflight
from anodize.runtime import compile as rt_compile
from anodize.runtime.faults import can_fault, ptx_can_fault

N = 300


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]]:
    monkeypatch.setenv("ANODIZE_FAULT_READ_SKIP", "1")
    for k in (affine, shift_read):
        k.store.clear()
    dev, drv = fakecuda.install(monkeypatch)
    cpu_compile = rt_compile.compile_for_cpu  # (what the fake device runs)

    def with_ptx(kernel: Any, **kw: Any) -> Any:
        return dataclasses.replace(cpu_compile(kernel, **kw), ptx=compile_gpu(kernel, "sm_90", ptxas=False).ptx)

    monkeypatch.setattr(rt_compile, "compile_for_cpu", with_ptx)
    yield dev, drv
    for k in (affine, shift_read):
        k.store.clear()
    assert inflight.in_flight() == 0


def test_the_ptx_says_whether_a_kernel_can_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    proven, checked = compile_gpu(affine, "sm_90", ptxas=False), compile_gpu(shift_read, "sm_90", ptxas=False)
    assert not ptx_can_fault(proven)  # `if i in out`: every access proven
    assert ptx_can_fault(checked)  # `a[i + 1]`: checked at run time
    assert ptx_can_fault(dataclasses.replace(proven, ptx=""))  # no PTX: assumed to
    monkeypatch.delenv("ANODIZE_FAULT_READ_SKIP", raising=False)
    assert can_fault(proven) and can_fault(checked)  # the switch off (the default): every record is read
    monkeypatch.setenv("ANODIZE_FAULT_READ_SKIP", "1")
    assert not can_fault(proven) and can_fault(checked)


def test_a_kernel_without_a_fault_path_is_not_read_back(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    a = dev.to_device(np.arange(N, dtype=np.float32))
    t = dev.empty(N, az.f32)
    cfg = az.LaunchConfig.for_num_elems(N)
    affine[cfg].op(a, t, 2.0, 1.0).run()
    drv.counts.clear()
    for _ in range(3):
        affine[cfg].op(a, t, 2.0, 1.0).run()
    assert drv.counts["launch"] == 3 and "d2h" not in drv.counts  # no fault record read per completion
    np.testing.assert_array_equal(t.to_host(), np.arange(N, dtype=np.float32) * 2 + 1)


def test_a_kernel_with_a_fault_path_still_reports_its_fault(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    a = dev.to_device(np.arange(N, dtype=np.float32))
    c = dev.empty(N, az.f32)
    drv.counts.clear()
    with pytest.raises(az.KernelFault, match="shift_read"):
        shift_read[az.LaunchConfig.for_num_elems(N, block=128)].op(a, c).run()
    assert drv.counts["d2h"] >= 1  # its record, read back
    dev.check()  # reset at completion: nothing left to raise


def test_a_synchronisation_reads_no_arena_chunk_of_kernels_that_cannot_fault(
    fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver], monkeypatch: pytest.MonkeyPatch
) -> None:
    dev, _ = fake
    reads: list[int] = []
    download = dev._download
    monkeypatch.setattr(dev, "_download", lambda out, ptr, nbytes: (reads.append(nbytes), download(out, ptr, nbytes)))
    a = dev.to_device(np.arange(N, dtype=np.float32))
    t, c = dev.empty(N, az.f32), dev.empty(N, az.f32)
    cfg = az.LaunchConfig.for_num_elems(N)
    affine[cfg](a, t, 2.0, 1.0)
    dev.check()  # only `affine` is loaded: nothing to read back
    assert reads == []
    shift_read[az.LaunchConfig.for_num_elems(N, block=128)](a, c)  # loads a kernel that can fault, and faults
    with pytest.raises(az.KernelFault, match="shift_read"):
        dev.check()
    assert len(reads) == 1  # the chunk, read once
    affine[cfg](a, t, 2.0, 1.0)
    dev.check()  # the chunk holds `shift_read` now: read
    assert len(reads) == 2

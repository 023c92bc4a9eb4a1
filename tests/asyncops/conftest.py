"""Async-op test fixtures: the kernels module on sys.path, and a clean CPU device."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import aop_kernels  # noqa: E402

from anodize.kernel import Kernel  # noqa: E402
from anodize.runtime import inflight  # noqa: E402
from anodize.runtime.device import Device, cpu_device  # noqa: E402


def _drain(dev: Device) -> Device:
    try:
        dev.check()
    except Exception:  # a fault left over from an earlier test
        pass
    return dev


@pytest.fixture
def cpu() -> Iterator[Device]:
    yield _drain(cpu_device())
    _drain(cpu_device())
    assert inflight.in_flight() == 0, "a test left work in flight"


@pytest.fixture
def gpu() -> Iterator[Device]:
    from anodize.runtime.device import device

    for v in vars(aop_kernels).values():
        if isinstance(v, Kernel):
            v.store.clear()
    yield _drain(device(0))


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def dev(request: pytest.FixtureRequest) -> Iterator[Device]:
    """Both backends: the CPU backend in CI, the GPU twin where there is one."""
    if request.param == "cpu":
        d = _drain(cpu_device())
    else:
        from anodize.runtime.device import device

        d = _drain(device(0))
    yield d
    _drain(d)

"""A `CudaDevice` without a driver: host memory, the real GPU compile path, launches recorded.

The runtime's GPU launch path (cuda.core `LaunchConfig`, the bound `launch` call with
stream, config and kernel, the hidden fault and rank arguments) runs unchanged up to
cuda.core's `launch`, which `install` replaces with a recorder.  Nothing executes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from anodize.runtime import cuda_device
from anodize.runtime.device import CpuDevice, DeviceLimits
from anodize.runtime.faults import FaultArena


class NoGpuDevice(cuda_device.CudaDevice):
    def __init__(self) -> None:  # set what CudaDevice.__init__ would, without a driver
        self._host = CpuDevice()
        self.index = 0
        self.name = "no-op GPU"
        self.compute_capability = (9, 0)
        self.arch = "sm_90"
        self.limits = DeviceLimits(1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535), 227 * 1024)
        self._stream = object()
        self._stream_h = 7
        self.faults = FaultArena(self)
        self._modules = []

    def _alloc(self, nbytes: int) -> tuple[int, object]:
        return self._host._alloc(nbytes)

    def _upload(self, ptr: int, host: np.ndarray, nbytes: int) -> None:
        self._host._upload(ptr, host, nbytes)

    def _download(self, out: np.ndarray, ptr: int, nbytes: int) -> None:
        self._host._download(out, ptr, nbytes)

    def _fill_zero(self, ptr: int, nbytes: int) -> None:
        self._host._fill_zero(ptr, nbytes)

    def check(self) -> None:
        self.faults.check()

    def load(self, compiled: Any) -> Any:
        return ("kernel handle", compiled.entry)


def install(monkeypatch: pytest.MonkeyPatch) -> tuple[NoGpuDevice, list[tuple[Any, ...]]]:
    """A fresh device and the list every launch's `launch(stream, config, kernel, *args)` lands in."""
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(cuda_device, "_cu_launch", lambda *a: calls.append(a))
    return NoGpuDevice(), calls

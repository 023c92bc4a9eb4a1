"""The first GPU's context is made while cuda.core imports (runtime/lazy.py `cuda_device_beside`):
the costs of a fresh process's first GPU (the driver's start, the context: about 250 ms on the
H200; cuda.core's import: about 220 ms) overlap."""

from __future__ import annotations

import sys
import threading
import time
from types import ModuleType

import pytest

from anodize.language.errors import LaunchError
from anodize.runtime import device as devmod, lazy, probe


def _slow_import(monkeypatch: pytest.MonkeyPatch, seen: list[str], fail: bool = False) -> ModuleType:
    monkeypatch.delitem(sys.modules, "anodize.runtime.cuda_device", raising=False)
    module = ModuleType("cuda_device_stand_in")

    def load() -> ModuleType:
        seen.append(threading.current_thread().name)
        time.sleep(0.3)
        if fail:
            raise ImportError("no cuda.core")
        return module

    monkeypatch.setattr(lazy, "cuda_device", load)
    return module


def test_the_import_runs_beside_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    _slow_import(monkeypatch, seen)
    t = time.perf_counter()
    lazy.cuda_device_beside(lambda: time.sleep(0.3))
    assert time.perf_counter() - t < 0.55, "the import and the work ran one after the other"
    assert seen[0] == "anodize-import-cuda"


def test_an_import_error_reaches_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_import(monkeypatch, [], fail=True)
    with pytest.raises(ImportError, match="no cuda.core"):
        lazy.cuda_device_beside(lambda: None)


def test_the_works_error_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_import(monkeypatch, [], fail=True)

    def work() -> None:
        raise RuntimeError("the context")

    with pytest.raises(RuntimeError, match="the context"):
        lazy.cuda_device_beside(work)


@pytest.mark.parametrize("beside", [True, False])
def test_the_driver_start_and_the_context_run_beside_the_import(monkeypatch: pytest.MonkeyPatch, beside: bool) -> None:
    """`az.device(0)`'s first call: the primary context is made on this thread while cuda.core
    imports on the helper, and (by default; `ANODIZE_INIT_BESIDE=0` not) cuInit (the first `gpu_count`) too;
    a machine without a GPU still gets the located LaunchError, and once the driver said so no
    import is started."""
    seen: list[str] = []
    module = _slow_import(monkeypatch, seen)
    module.CudaDevice = lambda index: ("device", index)  # type: ignore[attr-defined]
    started: list[str] = []

    def cu_init() -> int:
        started.append(threading.current_thread().name)
        time.sleep(0.3)
        return 1

    monkeypatch.delenv("ANODIZE_DEVICE", raising=False)
    if beside:
        monkeypatch.delenv("ANODIZE_INIT_BESIDE", raising=False)  # (the default)
    else:
        monkeypatch.setenv("ANODIZE_INIT_BESIDE", "0")
    monkeypatch.setattr(probe, "_count", None)
    monkeypatch.setattr(probe, "_probe", cu_init)
    monkeypatch.setattr(devmod, "_retain_primary_context", lambda index: started.append("context"))
    monkeypatch.setattr(devmod, "_GPUS", {})
    t = time.perf_counter()
    assert devmod.cuda_device(0) == ("device", 0)
    took = time.perf_counter() - t
    if beside:
        assert took < 0.55, "the driver's start and the import ran one after the other"
    else:
        assert took >= 0.6  # the driver's start first, then the import beside the context
    assert started == [threading.current_thread().name, "context"] and seen == ["anodize-import-cuda"]
    with pytest.raises(LaunchError, match="there is no CUDA device 3"):
        devmod.cuda_device(3)
    monkeypatch.setattr(probe, "_count", 0)
    seen.clear()
    with pytest.raises(LaunchError, match="no CUDA GPU found"):
        devmod.cuda_device(1)
    assert seen == []  # the driver said no GPU: nothing imported

"""The first GPU's context is made while cuda.core imports (runtime/lazy.py `cuda_device_beside`):
the two costs of a fresh process's first GPU (about 250 and 220 ms on the H200) overlap."""

from __future__ import annotations

import sys
import threading
import time
from types import ModuleType

import pytest

from anodize.runtime import lazy


def _slow_import(monkeypatch: pytest.MonkeyPatch, seen: list[str], fail: bool = False) -> None:
    monkeypatch.delitem(sys.modules, "anodize.runtime.cuda_device", raising=False)
    module = ModuleType("cuda_device_stand_in")

    def load() -> ModuleType:
        seen.append(threading.current_thread().name)
        time.sleep(0.3)
        if fail:
            raise ImportError("no cuda.core")
        return module

    monkeypatch.setattr(lazy, "cuda_device", load)


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

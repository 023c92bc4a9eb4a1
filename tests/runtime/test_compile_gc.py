"""A compile pauses Python's cyclic collector (runtime/compile.py `gc_paused`): off while the
checker, codegen and ptxas run, on again after, on an error too, and left off where the caller
had turned it off; compiles on several threads at once turn it on when the last one leaves."""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest
from rt_kernels import vecadd

from anodize.codegen.artifact import Resources
from anodize.codegen.gpu import ptx as ptx_mod
from anodize.codegen import toolchain
from anodize.language.diagnostics import CheckError
from anodize.runtime import compile as rc


class RecordingJob:
    """ptxas (`ptx.PtxasJob`) that never runs: notes whether the collector was on while the compile waited for it."""

    seen: list[bool] = []

    def __init__(self, ptx: str, arch: str, **kw: Any):
        pass

    def result(self) -> Any:
        RecordingJob.seen.append(gc.isenabled())
        return b"cubin", Resources()

    def cancel(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Any:
    monkeypatch.setenv("ANODIZE_CACHE", "off")
    exe = tmp_path_factory.mktemp("bin") / "ptxas"
    exe.write_text("#!/bin/sh\nexit 1\n")
    monkeypatch.setattr(toolchain, "find_ptxas", lambda: str(exe))
    monkeypatch.setattr(ptx_mod, "find_ptxas", lambda: str(exe))
    monkeypatch.setattr(ptx_mod, "PtxasJob", RecordingJob)
    RecordingJob.seen = []
    was = gc.isenabled()
    vecadd.store.clear()
    yield
    vecadd.store.clear()
    (gc.enable if was else gc.disable)()


def test_the_collector_is_off_during_a_compile_and_on_after() -> None:
    gc.enable()
    rc.compile_for_gpu(vecadd, "sm_90")
    assert RecordingJob.seen == [False]
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    gc.disable()
    rc.compile_for_gpu(vecadd, "sm_90")
    assert RecordingJob.seen == [False]
    assert not gc.isenabled()


def test_the_collector_is_on_again_after_a_failed_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    gc.enable()
    seen = []

    def refuse(kernel: Any) -> None:
        seen.append(gc.isenabled())
        raise CheckError([])

    monkeypatch.setattr(rc, "_enforce", refuse)
    with pytest.raises(CheckError):
        rc.compile_for_gpu(vecadd, "sm_90")
    assert seen == [False]
    assert gc.isenabled()


def test_pause_gc_off_leaves_the_collector_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rc, "PAUSE_GC", False)
    gc.enable()
    rc.compile_for_gpu(vecadd, "sm_90")
    assert RecordingJob.seen == [True]


def test_the_last_of_two_overlapping_compiles_turns_it_back_on() -> None:
    gc.enable()
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with rc.gc_paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    assert inside.wait(10)
    with rc.gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's compile is still running
    leave.set()
    t.join(10)
    assert gc.isenabled()

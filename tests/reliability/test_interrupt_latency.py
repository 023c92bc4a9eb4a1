"""Ctrl-C within a second (issue 34, item 3): a CPU-backend launch runs its grid a range of blocks
per call (codegen/cpu/engine.py `run_in_chunks`), and a GPU wait polls (runtime/streams.py `wait_gpu`),
so a real SIGINT lands as KeyboardInterrupt within a second, and the device stays usable.
tests/reliability/test_fault_injection.py interrupts launches at other moments."""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

CHILD = r'''
import sys, time
import numpy as np
import anodize as az
from anodize import DisjointSlice, Slice, f32, i64, kernel, launch_contract, thread


@launch_contract(domain=1, block=64, requires=lambda a, c, iters: len(a) == len(c))
@kernel
def spin(a: Slice[f32], c: DisjointSlice[f32], iters: i64) -> None:
    i = thread.index_1d()
    if i in c:
        acc = a[i]
        for k in range(iters):
            acc = acc * 0.999999 + 1.0e-7
        c[i] = acc


@launch_contract(domain=1, block=64, requires=lambda a, c, iters: len(a) == len(c))
@kernel
def spin_barrier(a: Slice[f32], c: DisjointSlice[f32], iters: i64) -> None:
    i = thread.index_1d()
    acc = f32(0.0)
    for k in range(iters):
        az.syncthreads()
        acc += 1.0
    if i in c:
        c[i] = acc


dev = az.device("cpu")
k = spin if sys.argv[1] == "spin" else spin_barrier
n = 1 << 22
a, c = dev.to_device(np.ones(n, np.float32)), dev.zeros(n, az.f32)
cfg = az.LaunchConfig.for_num_elems(n, block=64)
k[cfg](a, c, 1)  # compiled
dev.synchronize()
print("START", flush=True)
t = time.monotonic()
try:
    k[cfg](a, c, 20000)  # minutes of work on one core
    dev.synchronize()
    print("FINISHED", time.monotonic() - t, flush=True)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
    small = az.LaunchConfig.for_num_elems(256, block=64)
    a2, c2 = dev.to_device(np.ones(256, np.float32)), dev.zeros(256, az.f32)
    k[small](a2, c2, 0)
    dev.synchronize()
    print("USABLE", float(c2.to_host()[0]), flush=True)
'''


@pytest.mark.parametrize("which", ["spin", "spin_barrier"])
def test_sigint_stops_a_cpu_launch_within_a_second(tmp_path: Path, which: str) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    p = subprocess.Popen([sys.executable, str(script), which], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "START", p.stderr.read() if p.stderr else ""
        time.sleep(1.0)  # well into the launch
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        line = p.stdout.readline().strip()
        latency = time.monotonic() - sent
        assert line == "INTERRUPTED", line
        assert latency < 1.0, f"KeyboardInterrupt came {latency:.2f} s after SIGINT"
        assert p.stdout.readline().split()[0] == "USABLE"
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


def test_gpu_wait_is_interruptible() -> None:
    """`wait_gpu` with a blocking sync that would take 10 s: the interrupt lands within a second,
    and the waiting thread is left to finish on its own."""
    from cuda.bindings import driver

    from anodize.runtime.streams import wait_gpu

    release = threading.Event()
    not_ready = (driver.CUresult.CUDA_ERROR_NOT_READY,)

    def sync() -> tuple[object]:
        release.wait(10)
        return (driver.CUresult.CUDA_SUCCESS,)

    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        wait_gpu(lambda: not_ready, sync, "a test wait")
    assert time.monotonic() - t < 1.3
    release.set()
    # a short wait needs no thread: a query that is ready at once
    wait_gpu(lambda: (driver.CUresult.CUDA_SUCCESS,), sync, "a ready wait")


def test_a_ready_gpu_wait_still_makes_the_blocking_call() -> None:
    """The driver flushes a kernel's `print` output only in a synchronising call: a wait whose
    query is ready at once still makes it (the H200's print tests printed nothing when a short
    wait ended on the query alone)."""
    from cuda.bindings import driver

    from anodize.runtime.streams import wait_gpu

    calls: list[str] = []

    def sync() -> tuple[object]:
        calls.append("sync")
        return (driver.CUresult.CUDA_SUCCESS,)

    wait_gpu(lambda: (driver.CUresult.CUDA_SUCCESS,), sync, "a ready wait")
    assert calls == ["sync"]


def test_gpu_device_waits_are_interruptible_on_the_fake_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU device's own waits (tests/fakecuda.py's driver, a kernel in flight for 10 s: the
    stream not ready, its blocking sync 10 s): `synchronize` (`CudaDevice.check`), a download
    (`to_host`) and an op's event each raise KeyboardInterrupt within a second of SIGINT; when
    the kernel ends the device is usable and the data is there (docs/async.md)."""
    import numpy as np
    from cuda.bindings import driver

    import fakecuda
    from anodize.runtime import cuda_device, streams

    dev, state = fakecuda.install(monkeypatch)
    data = np.arange(64, dtype=np.float32)
    buf = dev.to_device(data)
    release = threading.Event()
    ok, not_ready = driver.CUresult.CUDA_SUCCESS, driver.CUresult.CUDA_ERROR_NOT_READY

    def query(_: object) -> tuple[object]:
        return (ok,) if release.is_set() else (not_ready,)

    def sync(_: object) -> tuple[object]:
        release.wait(10)
        return (ok,)

    monkeypatch.setattr(driver, "cuStreamQuery", query)
    monkeypatch.setattr(driver, "cuStreamSynchronize", sync)
    monkeypatch.setattr(driver, "cuEventQuery", query)
    monkeypatch.setattr(driver, "cuEventSynchronize", sync)
    out = np.zeros(64, np.float32)
    waits = {
        "synchronize": lambda: cuda_device.CudaDevice.check(dev),
        "to_host": lambda: cuda_device.CudaDevice._download(dev, out, buf.ptr, out.nbytes),
        "an event": lambda: streams.wait_gpu(lambda: driver.cuEventQuery(None), lambda: driver.cuEventSynchronize(None),
                                             "cuEventSynchronize"),
    }
    for what, wait in waits.items():
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        t = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            wait()
        timer.join()
        assert time.monotonic() - t < 1.3, what
    release.set()  # the kernel ends: the device goes on
    cuda_device.CudaDevice.check(dev)
    cuda_device.CudaDevice._download(dev, out, buf.ptr, out.nbytes)
    assert (out == data).all()

"""Fault injection: a damaged compile cache, concurrent compiles, an interrupted launch,
and running out of memory.

Extends tests/test_disk_cache_compile.py (which covers one truncated PTX) with every
kind of damage on the real compile path, and tests/test_diskcache.py (which races the
storage layer) with four real compiler processes.  GPU twins are marked `gpu`.
"""

from __future__ import annotations

import _thread
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.runtime import compile as rc
from anodize.runtime import diskcache

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def cached_vecadd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "rel_vecadd.py").write_text((ROOT / "examples" / "vecadd.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("rel_vecadd", None)
    import rel_vecadd

    return rel_vecadd


def _fresh(mod):
    from anodize.kernel import Kernel

    return Kernel(mod.vecadd.fn, mod.vecadd.contract_spec)


def _entry() -> Path:
    (meta,) = list(diskcache.cache_dir().glob("*/*/meta.json"))
    return meta.parent


def _flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))


DAMAGE = {
    "meta_garbage": lambda e: (e / "meta.json").write_text("{not json"),
    "meta_truncated": lambda e: (e / "meta.json").write_bytes((e / "meta.json").read_bytes()[:40]),
    "meta_wrong_key": lambda e: (e / "meta.json").write_text(json.dumps({**json.loads((e / "meta.json").read_text()), "key": "0" * 64})),
    "ptx_bitflip": lambda e: _flip(e / "kernel.ptx"),
    "ptx_empty": lambda e: (e / "kernel.ptx").write_bytes(b""),
    "cubin_bitflip": lambda e: _flip(next(e.glob("*.cubin"))) if list(e.glob("*.cubin")) else _flip(e / "kernel.ptx"),
    "payload_missing": lambda e: (e / "kernel.ptx").unlink(),
    "entry_is_a_file": lambda e: [os.remove(p) for p in e.iterdir()] and None,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_detected_and_rebuilt(cached_vecadd, damage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"codegen": 0}
    real = rc._codegen_gpu

    def counting(*a, **kw):
        calls["codegen"] += 1
        return real(*a, **kw)

    monkeypatch.setattr(rc, "_codegen_gpu", counting)
    monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", "0")  # `_codegen_gpu` is the checker-first path's codegen
    first = _fresh(cached_vecadd).compile("sm_90")
    DAMAGE[damage](_entry())
    again = _fresh(cached_vecadd).compile("sm_90")  # must not raise, must not return garbage
    assert calls["codegen"] == 2, "a damaged entry must be a miss"
    assert again.ptx == first.ptx and again.cubin == first.cubin
    third = _fresh(cached_vecadd).compile("sm_90")  # the rebuilt entry is valid and served
    assert calls["codegen"] == 2 and third.ptx == first.ptx


_COMPILER = r"""
import sys
sys.path.insert(0, sys.argv[1])
import rel_vecadd4
print("READY", flush=True)
sys.stdin.readline()  # the go: every process has imported, now all compile together
ck = rel_vecadd4.vecadd.compile("sm_90")
print("OK", len(ck.ptx))
"""


def test_four_processes_compiling_at_once_leave_one_valid_entry(tmp_path: Path) -> None:
    (tmp_path / "rel_vecadd4.py").write_text((ROOT / "examples" / "vecadd.py").read_text())
    cache = tmp_path / "cache"
    env = {**os.environ, "ANODIZE_CACHE": "on", "ANODIZE_CACHE_DIR": str(cache)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _COMPILER, str(tmp_path)],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(4)
    ]
    for p in procs:  # every process imports first ...
        assert p.stdout is not None and p.stdout.readline() == "READY\n"
    for p in procs:  # ... then all compile together
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.startswith("OK"), out
    metas = list(cache.glob("*/*/meta.json"))
    assert len(metas) == 1
    assert not [p for p in cache.rglob(".*") if p.is_dir()]  # no temp folders left behind
    key = json.loads(metas[0].read_text())["key"]
    os.environ["ANODIZE_CACHE_DIR"] = str(cache)
    os.environ["ANODIZE_CACHE"] = "on"
    got = diskcache.load(key)
    assert got is not None and b".entry" in got[1]["kernel.ptx"]


# ---- KeyboardInterrupt during a launch ----------------------------------------------------

SLOW = '''
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
    with az.unsafe():
        for k in range(iters):
            az.syncthreads()
    if i in c:
        c[i] = a[i] + acc
'''


@pytest.fixture()
def slow_mod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "rel_slow.py").write_text(SLOW)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("rel_slow", None)
    import rel_slow

    return rel_slow


def _interrupt_after(seconds: float) -> threading.Timer:
    t = threading.Timer(seconds, _thread.interrupt_main)
    t.start()
    return t


def _check_usable(dev: az.Device, mod) -> None:
    n = 256
    a_h = np.arange(n, dtype=np.float32)
    a, c = dev.to_device(a_h), dev.zeros(n, az.f32)
    mod.spin[az.LaunchConfig.for_num_elems(n, block=64)](a, c, 0)
    dev.synchronize()  # no stale fault, no broken state
    np.testing.assert_array_equal(c.to_host(), a_h)


def _interrupt_a_launch(launch: Callable[[int], None], iters: int) -> bool:
    """Interrupt the main thread 0.2 s into `launch(iters)`; True when the interrupt landed in
    the launch (or the synchronisation after it), False when the launch ended first."""
    timer = _interrupt_after(0.2)
    finished = False
    try:  # one handler, so that no interrupt can escape between the launch and the wait
        launch(iters)
        finished = True
        # the launch finished before the signal: it lands here instead.  CPython drops a
        # KeyboardInterrupt raised inside a finalizer (`__del__`, weakref callbacks: "Exception
        # ignored in ..."), where a pending signal can land in a full run's garbage collections,
        # so the signal is sent again each half second while waiting
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            again = time.monotonic() + 0.5
            while time.monotonic() < again:
                time.sleep(0.01)
            _thread.interrupt_main()
    except KeyboardInterrupt:
        return not finished
    finally:
        timer.cancel()
    raise AssertionError("the interrupt never came")


# The launch must outlast the 0.2 s before the interrupt: `iters` starts at about half a second
# of work on a 2-core CI machine and grows eightfold while the launch ends too soon (the barrier
# kernel runs each block on one host thread, a loop over its threads between barriers).
@pytest.mark.parametrize("kernel_name,iters,n", [("spin", 40_000, 4096), ("spin_barrier", 5_000_000, 128)])
def test_keyboard_interrupt_during_cpu_launch_leaves_device_usable(slow_mod, kernel_name: str, iters: int, n: int) -> None:
    dev = az.device("cpu")
    k = getattr(slow_mod, kernel_name)
    a, c = dev.to_device(np.ones(n, np.float32)), dev.zeros(n, az.f32)
    cfg = az.LaunchConfig.for_num_elems(n, block=64)
    k[cfg](a, c, 1)  # compile first, so the interrupt lands in the launch itself
    dev.synchronize()

    def launch(iters: int) -> None:
        k[cfg](a, c, iters)
        dev.synchronize()

    for _ in range(4):
        if _interrupt_a_launch(launch, iters):
            break
        iters *= 8
    else:
        raise AssertionError(f"every launch ended before the interrupt (up to iters={iters // 8})")
    _check_usable(dev, slow_mod)
    k[cfg](a, c, 1)  # the interrupted kernel itself launches again
    dev.synchronize()


@pytest.mark.gpu
def test_keyboard_interrupt_during_gpu_launch_leaves_context_usable(slow_mod) -> None:
    dev = az.device(0)
    n = 1 << 16
    a, c = dev.to_device(np.ones(n, np.float32)), dev.zeros(n, az.f32)
    cfg = az.LaunchConfig.for_num_elems(n, block=64)
    slow_mod.spin[cfg](a, c, 1)
    dev.synchronize()
    timer = _interrupt_after(0.05)
    interrupted = False
    try:
        for _ in range(50):
            slow_mod.spin[cfg](a, c, 200_000)
        dev.synchronize()
        time.sleep(5)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        timer.cancel()
    assert interrupted
    dev.synchronize()
    _check_usable(dev, slow_mod)


# ---- out of memory ------------------------------------------------------------------------


def test_cpu_out_of_memory_is_a_clear_anodize_error() -> None:
    dev = az.device("cpu")
    with pytest.raises(az.OutOfMemoryError, match="out of memory: cannot allocate 4.0 PiB") as info:
        dev.empty(1 << 50, az.f32)
    assert isinstance(info.value, MemoryError)  # still a MemoryError for code that catches those
    assert "help:" in str(info.value)
    b = dev.zeros(16, az.f32)  # the device still works
    assert b.to_host().sum() == 0


@pytest.mark.gpu
def test_gpu_out_of_memory_is_clear_and_leaks_nothing() -> None:
    from cuda.bindings import driver

    dev = az.device(0)
    dev.synchronize()
    import gc

    def free() -> int:
        gc.collect()
        dev.synchronize()
        return int(driver.cuMemGetInfo()[1])

    free0 = free()
    for _ in range(3):
        with pytest.raises(az.OutOfMemoryError, match="out of memory"):
            dev.empty(1 << 46, az.f32)  # 256 TiB
    assert free0 - free() < 64 << 20  # failed allocations leave nothing behind
    held = [dev.empty(1 << 28, az.f32) for _ in range(4)]  # 4 GiB still allocates
    del held
    # Freed buffers go back to the device's memory pool (cuda.core keeps pool memory
    # reserved), so the proof of no leak is reuse: the same 4 GiB again costs nothing new.
    free1 = free()
    held = [dev.empty(1 << 28, az.f32) for _ in range(4)]
    del held
    assert free1 - free() < 64 << 20, "freed buffers were not returned to the pool"
    b = dev.zeros(16, az.f32)
    assert b.to_host().sum() == 0

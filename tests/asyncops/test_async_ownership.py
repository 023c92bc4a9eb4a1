"""Ownership across time, on the CPU backend: in-flight work is truly deferred (a pool's worker
threads), and a `HoldOp` keeps a lane busy until the test opens its gate, so refusals are observable.
GPU twins hold work in flight with a long-running kernel instead.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from collections.abc import Iterator

import numpy as np
import pytest
from aop_kernels import affine, spin, vecadd

import anodize as az
from anodize.runtime import inflight
from anodize.runtime.device import Device
from anodize.runtime.ops import HoldOp

N = 512
CFG = az.LaunchConfig.for_num_elems(N)


@pytest.fixture
def pool(cpu: Device) -> Iterator[az.StreamPool]:
    with az.StreamPool(cpu, 2) as p:
        yield p


def _held(dev: Device, op: az.Op, pool: az.StreamPool) -> tuple[threading.Event, az.Handle]:
    gate = threading.Event()
    return gate, HoldOp(dev, gate).then(op).submit(pool)


def test_writes_into_in_flight_buffers_are_refused(cpu: Device, pool: az.StreamPool) -> None:
    a = cpu.to_device(np.ones(N, np.float32))
    b = cpu.to_device(np.full(N, 2, np.float32))
    c = cpu.empty(N, az.f32)
    gate, handle = _held(cpu, vecadd[CFG].op(a, b, c), pool)
    try:
        assert not handle.done()
        with pytest.raises(az.InFlightError, match=r"`copy_from` into this buffer.*writes this buffer \(`c` of kernel `vecadd`\)"):
            c.copy_from(np.zeros(N, np.float32))
        with pytest.raises(az.InFlightError, match=r"reads this buffer \(`a` of kernel `vecadd`\)"):
            a.copy_from(np.zeros(N, np.float32))
        with pytest.raises(az.InFlightError, match="copy this buffer to the host"):
            c.to_host()
        with pytest.raises(az.InFlightError):  # a view of in-flight memory is the same memory
            c[10:20].copy_from(np.zeros(10, np.float32))
        np.testing.assert_array_equal(a.to_host(), np.ones(N, np.float32))  # reading an input is fine
        other = cpu.empty(N, az.f32)
        other.copy_from(np.zeros(N, np.float32))  # unrelated memory is fine
    finally:
        gate.set()
    handle.wait()
    c.copy_from(np.zeros(N, np.float32))  # after completion: allowed again
    assert inflight.in_flight() == 0


def test_conflicting_submissions_are_ordered_not_raced(cpu: Device, pool: az.StreamPool) -> None:
    """A second submission that overwrites an input of an in-flight one waits for it (another lane)."""
    a = cpu.to_device(np.ones(N, np.float32))
    b = cpu.to_device(np.full(N, 2, np.float32))
    c = cpu.empty(N, az.f32)
    src = cpu.to_device(np.full(N, 10, np.float32))
    gate, first = _held(cpu, vecadd[CFG].op(a, b, c), pool)
    second = affine[CFG].op(src, a, 1.0, 0.0).submit(pool)  # writes `a`, which `first` reads
    time.sleep(0.05)
    assert not first.done() and not second.done()  # ordered after the held one
    gate.set()
    second.wait()
    first.wait()
    np.testing.assert_array_equal(c.to_host(), np.full(N, 3, np.float32))  # read the old `a`
    np.testing.assert_array_equal(a.to_host(), np.full(N, 10, np.float32))


def test_a_covering_submission_stands_in_for_the_earlier_one(cpu: Device, pool: az.StreamPool) -> None:
    a = cpu.to_device(np.ones(N, np.float32))
    c = cpu.empty(N, az.f32)
    gate, first = _held(cpu, affine[CFG].op(a, c, 2.0, 0.0), pool)
    second = affine[CFG].op(a, c, 3.0, 0.0).submit(pool)  # same memory, same modes: ordered after
    assert inflight.in_flight() == 1  # one registry entry, not one per submission
    with pytest.raises(az.InFlightError, match="kernel op `affine`"):
        c.copy_from(np.zeros(N, np.float32))  # still refused, through the covering submission
    gate.set()
    second.wait()
    first.wait()
    np.testing.assert_array_equal(c.to_host(), np.full(N, 3, np.float32))  # the later write wins


def test_refusal_clears_without_wait_once_done(cpu: Device, pool: az.StreamPool) -> None:
    """Nobody waits: the next check notices the completion and retires the work."""
    c = cpu.empty(N, az.f32)
    gate, handle = _held(cpu, c.to_host_op(), pool)
    with pytest.raises(az.InFlightError):
        c.copy_from(np.zeros(N, np.float32))
    gate.set()
    for _ in range(200):
        if handle.done():
            break
        time.sleep(0.005)
    c.copy_from(np.zeros(N, np.float32))


def test_host_arrays_are_read_only_while_in_flight(cpu: Device, pool: az.StreamPool) -> None:
    host = np.arange(N, dtype=np.float32)
    dst = cpu.empty(N, az.f32)
    gate, handle = _held(cpu, cpu.copy_op(dst, host), pool)
    with pytest.raises(ValueError, match="read-only"):
        host[0] = 5
    gate.set()
    handle.wait()
    host[0] = 5  # writable again
    np.testing.assert_array_equal(dst.to_host(), np.arange(N, dtype=np.float32))


def test_ops_keep_buffers_alive(cpu: Device, pool: az.StreamPool) -> None:
    def make() -> tuple[az.Op, weakref.ref[az.Buffer]]:
        a = cpu.to_device(np.full(N, 3, np.float32))
        c = cpu.empty(N, az.f32)
        return affine[CFG].op(a, c, 2.0, 0.0).then(c.to_host_op()), weakref.ref(a)

    op, a_ref = make()
    gc.collect()
    assert a_ref() is not None  # the op holds its input
    gate = threading.Event()
    handle = HoldOp(cpu, gate).then(op).submit(pool)
    del op
    gc.collect()
    assert a_ref() is not None  # in flight: held by the submission
    gate.set()
    out = handle.wait()
    np.testing.assert_array_equal(out, np.full(N, 6, np.float32))
    del handle
    gc.collect()
    assert a_ref() is None  # completed and unreferenced: freed


def test_event_loop_is_not_blocked(cpu: Device, pool: az.StreamPool) -> None:
    a = cpu.to_device(np.ones(N, np.float32))
    c = cpu.empty(N, az.f32)
    gate = threading.Event()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        for _ in range(20):
            ticks += 1
            await asyncio.sleep(0.001)
        gate.set()  # only a running event loop can release the op

    async def main() -> np.ndarray:
        op = HoldOp(cpu, gate).then(affine[CFG].op(a, c, 4.0, 0.0)).then(c.to_host_op())
        handle = op.submit(pool)
        t = asyncio.ensure_future(ticker())
        out = await handle
        await t
        return out

    out = asyncio.run(main())
    assert ticks == 20
    np.testing.assert_array_equal(out, np.full(N, 4, np.float32))


def test_independent_submissions_use_different_lanes(cpu: Device, pool: az.StreamPool) -> None:
    a = cpu.to_device(np.ones(N, np.float32))
    c = cpu.empty(N, az.f32)
    gate = threading.Event()
    blocked = HoldOp(cpu, gate).submit(pool)  # lane 0 is held
    try:
        out = affine[CFG].op(a, c, 5.0, 0.0).then(c.to_host_op()).submit(pool).wait()  # lane 1
        np.testing.assert_array_equal(out, np.full(N, 5, np.float32))
        assert not blocked.done()
    finally:
        gate.set()
    blocked.wait()


def test_gather_branches_overlap_on_cpu_workers(cpu: Device, pool: az.StreamPool) -> None:
    """Branch 1 opens the gate branch 0 waits for: only a concurrent schedule can finish."""
    gate = threading.Event()

    class Opener(HoldOp):
        def _execute_cpu(self) -> None:
            gate.set()

    g = az.gather(HoldOp(cpu, gate, timeout=10.0), Opener(cpu, threading.Event()))
    assert g.submit(pool).wait() == (None, None)


def test_cpu_worker_errors_surface_at_completion(cpu: Device, pool: az.StreamPool) -> None:
    c = cpu.empty(N, az.f32)
    op = HoldOp(cpu, threading.Event(), timeout=0.01).then(c.to_host_op())
    handle = op.submit(pool)
    with pytest.raises(TimeoutError, match="gate"):
        handle.wait()
    with pytest.raises(az.LaunchError, match="failed"):
        _ = op.result


# ---- GPU twins: a long-running kernel holds the work in flight ---------------------------------


@pytest.mark.gpu
def test_gpu_refusal_while_kernel_runs(gpu: Device) -> None:
    n = 1 << 16
    x = gpu.to_device(np.ones(n, np.float32))
    out = gpu.empty(n, az.f32)
    cfg = az.LaunchConfig(64, 256)
    with az.StreamPool(gpu, 2) as pool:
        handle = spin[cfg].op(x, out, 5_000_000).submit(pool)  # ~10 ms
        assert not handle.done()
        with pytest.raises(az.InFlightError, match="`out` of kernel `spin`"):
            out.copy_from(np.zeros(n, np.float32))
        with pytest.raises(az.InFlightError):
            out.to_host()
        handle.wait()
    out.copy_from(np.zeros(n, np.float32))


@pytest.mark.gpu
def test_gpu_submissions_sharing_a_buffer_are_ordered(gpu: Device) -> None:
    """A consumer submitted while its producer runs on another stream waits for it (an event)."""
    n = 1 << 16
    x = gpu.to_device(np.full(n, 3, np.float32))
    mid = gpu.zeros(n, az.f32)
    out = gpu.empty(n, az.f32)
    iters = 100_000
    with az.StreamPool(gpu, 2) as pool:
        producer = spin[az.LaunchConfig(64, 256)].op(x, mid, iters).submit(pool)  # lane 0
        consumer = affine[az.LaunchConfig.for_num_elems(n)].op(mid, out, 2.0, 0.0).submit(pool)  # lane 1
        consumer.wait()
        producer.wait()
    v = np.float32(3)
    for _ in range(iters):
        v = v * np.float32(0.999) + np.float32(0.001)
    np.testing.assert_allclose(out.to_host(), np.full(n, 2 * v, np.float32), rtol=1e-4)


def test_plain_launch_is_ordered_after_in_flight_work_on_shared_memory(cpu: Device, pool: az.StreamPool) -> None:
    """A plain `kernel[cfg](...)` reading an in-flight op's output waits for that op (no race)."""
    a = cpu.to_device(np.ones(N, np.float32))
    b = cpu.to_device(np.full(N, 2, np.float32))
    c = cpu.empty(N, az.f32)
    d = cpu.empty(N, az.f32)
    gate, handle = _held(cpu, vecadd[CFG].op(a, b, c), pool)
    assert not handle.done()
    opened = threading.Timer(0.3, gate.set)
    opened.start()
    t0 = time.perf_counter()
    vecadd[CFG](c, a, d)  # reads `c`, which the held op writes: must wait for it
    waited = time.perf_counter() - t0
    handle.wait()
    opened.join()
    assert waited >= 0.25, waited
    np.testing.assert_array_equal(d.to_host(), np.full(N, 4, np.float32))


def test_plain_launch_on_unrelated_memory_does_not_wait(cpu: Device, pool: az.StreamPool) -> None:
    a = cpu.to_device(np.ones(N, np.float32))
    b = cpu.to_device(np.full(N, 2, np.float32))
    c = cpu.empty(N, az.f32)
    x = cpu.to_device(np.full(N, 5, np.float32))
    d = cpu.empty(N, az.f32)
    gate, handle = _held(cpu, vecadd[CFG].op(a, b, c), pool)
    try:
        t0 = time.perf_counter()
        vecadd[CFG](x, x, d)  # shares nothing the held op writes, and writes nothing it reads
        assert time.perf_counter() - t0 < 5.0
        assert not handle.done()
        np.testing.assert_array_equal(d.to_host(), np.full(N, 10, np.float32))
    finally:
        gate.set()
        handle.wait()


def test_registry_keeps_one_use_per_memory_range() -> None:
    """A long chain over two buffers registers two uses (conflict checks stay O(buffers))."""
    from anodize.runtime.inflight import Use, _compact

    a, b = object(), object()
    uses = tuple(Use(1, 0, 64, k % 2 == 1, f"`x` #{k}", a) for k in range(100)) + tuple(
        Use(1, 64, 128, False, f"`y` #{k}", b) for k in range(100)
    )
    out = _compact(uses)
    assert len(out) == 2
    assert {(u.lo, u.hi, u.writes) for u in out} == {(0, 64, True), (64, 128, False)}

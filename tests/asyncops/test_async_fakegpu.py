"""The GPU code paths (CUDA lanes, events, staging, pinned memory, stream capture), on a fake
driver that runs work on host memory at once (`tests/fakecuda.py`).  Real concurrency is the `gpu` tests' job."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import fakecuda
import numpy as np
import pytest
from aop_kernels import affine, shift_read, vecadd

import anodize as az
from anodize.kernel import Kernel
from anodize.runtime import inflight

N = 300
CFG = az.LaunchConfig.for_num_elems(N)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]]:
    import aop_kernels

    kernels = [v for v in vars(aop_kernels).values() if isinstance(v, Kernel)]
    for k in kernels:
        k.store.clear()
    yield fakecuda.install(monkeypatch)
    for k in kernels:
        k.store.clear()
    assert inflight.in_flight() == 0


def test_run_then_gather_on_cuda_lanes(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    a = dev.to_device(np.arange(N, dtype=np.float32))
    t, u = dev.empty(N, az.f32), dev.empty(N, az.f32)
    out = affine[CFG].op(a, t, 2.0, 0.0).then(affine[CFG].op(t, u, 1.0, 1.0)).then(u.to_host_op()).run()
    np.testing.assert_array_equal(out, np.arange(N, dtype=np.float32) * 2 + 1)
    # two launches; one D2H for the result and one per kernel for its fault record
    assert drv.counts["launch"] == 2 and drv.counts["d2h"] == 2 and "h2d" not in drv.counts
    with az.StreamPool(dev, 3) as pool:
        r = az.gather(
            affine[CFG].op(a, t, 3.0, 0.0).then(t.to_host_op()), affine[CFG].op(a, u, -1.0, 0.0).then(u.to_host_op())
        ).submit(pool).wait()
    np.testing.assert_array_equal(r[0], np.arange(N, dtype=np.float32) * 3)
    np.testing.assert_array_equal(r[1], -np.arange(N, dtype=np.float32))
    assert drv.counts["wait"] >= 3  # device-stream start, the fork, the join


def test_await_and_pageable_staging(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    b = dev.empty(N, az.f32)
    host_in = np.full(N, 5, np.float32)  # pageable: staged through pinned memory
    host_out = np.zeros(N, np.float32)

    async def main() -> np.ndarray:
        return await dev.copy_op(b, host_in).then(dev.copy_op(host_out, b))

    res = asyncio.run(main())
    assert res is host_out
    np.testing.assert_array_equal(host_out, host_in)
    assert host_out.flags.writeable and host_in.flags.writeable
    pinned = az.pinned_empty(dev, N, az.f32)
    assert any(base == pinned.ctypes.data for base in drv.pinned)
    pinned[:] = 9
    dev.copy_op(b, pinned).run()
    np.testing.assert_array_equal(b.to_host(), pinned)


def test_faults_are_read_from_the_op_kernels(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, _ = fake
    a = dev.to_device(np.ones(N, np.float32))
    c = dev.empty(N, az.f32)
    with az.StreamPool(dev, 2) as pool:
        handle = shift_read[az.LaunchConfig.for_num_elems(N, block=128)].op(a, c).submit(pool)
        with pytest.raises(az.KernelFault, match="shift_read"):
            handle.wait()
    dev.check()


def test_capture_records_and_replays(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    a = dev.to_device(np.arange(N, dtype=np.float32))
    t, u = dev.empty(N, az.f32), dev.empty(N, az.f32)
    t.copy_from(np.zeros(N, np.float32))
    graph = az.capture(
        az.gather(
            affine[CFG].op(a, t, 1.0, 1.0).then(t.to_host_op()),
            affine[CFG].op(a, u, 2.0, 0.0).then(u.to_host_op()),
        )
    )
    launches = drv.counts["launch"]
    np.testing.assert_array_equal(t.to_host(), np.zeros(N, np.float32))  # captured, not run
    np.testing.assert_array_equal(u.to_host(), np.zeros(N, np.float32))  # (the other branch too)
    x, y = graph.replay()
    assert launches == 2 and drv.counts["launch"] == 2 and drv.counts["graph_launch"] == 1  # replayed, not relaunched
    np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32) + 1)
    np.testing.assert_array_equal(y, np.arange(N, dtype=np.float32) * 2)
    a2 = dev.to_device(np.full(N, 4, np.float32))
    t2, u2 = dev.empty(N, az.f32), dev.empty(N, az.f32)
    x2, y2 = graph.replay(a2, t2, u2)
    np.testing.assert_array_equal(x2, np.full(N, 5, np.float32))
    np.testing.assert_array_equal(y2, np.full(N, 8, np.float32))
    np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32) + 1)  # earlier results are copies
    assert len(graph._cache) == 2
    handle = graph.replay(wait=False)
    np.testing.assert_array_equal(handle.wait()[0], np.arange(N, dtype=np.float32) + 1)
    assert len(graph._cache) == 2  # the first address set was cached
    graph.close()


def test_capture_needs_pinned_host_arrays(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    b = dev.empty(N, az.f32)
    with pytest.raises(az.ArgumentError, match="pinned"):
        az.capture(dev.copy_op(b, np.ones(N, np.float32)))
    assert not drv.capturing  # the capture was ended
    host = az.pinned_empty(dev, N, az.f32)
    host[:] = 3
    graph = az.capture(dev.copy_op(b, host).then(vecadd[CFG].op(b, b[0:N], dev.empty(N, az.f32))))
    graph.replay()


def test_async_pipeline_example_on_cuda_lanes(
    fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util
    from pathlib import Path

    dev, drv = fake
    path = Path(__file__).resolve().parents[2] / "examples" / "async_pipeline.py"
    spec = importlib.util.spec_from_file_location("_fake_async_pipeline", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod.az, "device", lambda *a: dev)
    mod.transform.store.clear()
    out = mod.main(n=5000, chunks=4, lanes=3, iters=3)
    assert out.shape == (5000,)  # main() itself compares with NumPy
    # 4 chunks x (warm-up, serial, 2 pipelined runs): every chunk uploads and launches each time
    assert drv.counts["h2d"] == 16 and drv.counts["launch"] == 16


def test_replay_loop_keeps_one_registry_entry(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    a = dev.to_device(np.ones(N, np.float32))
    c = dev.empty(N, az.f32)
    graph = az.capture(affine[CFG].op(a, c, 2.0, 0.0))
    drv.ready = False  # every replay looks in flight
    handles = [graph.replay(wait=False) for _ in range(50)]
    assert len(inflight._ACTIVE) == 1  # each replay stands in for the one before it
    assert not handles[0].done()
    with pytest.raises(az.InFlightError):
        c.copy_from(np.zeros(N, np.float32))
    drv.ready = True
    handles[-1].wait()
    np.testing.assert_array_equal(c.to_host(), np.full(N, 2, np.float32))
    assert drv.counts["graph_launch"] == 50


# ---- issue 32: combinators on CUDA lanes ---------------------------------------------------


def test_and_then_chain_map_and_shared_on_cuda_lanes(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    """A device-value `and_then` chain queues back to back (no host wait); a `map` and an
    `and_then` over a host value are deferred (a helper thread waits for the event); a
    shared op runs once for its two consumers; a staged (pageable) copy is filled before a
    host step reads it."""
    from aop_kernels import vecadd_out

    dev, drv = fake
    a = dev.to_device(np.ones(N, np.float32))
    op: az.Op = az.value(a)
    for _ in range(5):
        op = op.and_then(lambda x: vecadd_out[CFG].call_op(x, x))
    out = op.and_then(lambda c: c.to_host_op()).map(lambda h: float(h[0]))
    with az.StreamPool(dev, 2) as pool:
        assert out.submit(pool).wait() == 32.0
        host = np.zeros(N, np.float32)  # pageable: staged
        b = dev.to_device(np.full(N, 3, np.float32))
        t, u = dev.empty(N, az.f32), dev.empty(N, az.f32)
        s = dev.copy_op(host, b).shared()
        r = az.gather(
            s.map(lambda h: float(h.sum())),
            s.and_then(lambda h: dev.copy_op(t, h)).then(affine[CFG].op(t, u, 2.0, 0.0)).then(u.to_host_op()),
        ).submit(pool).wait()
    assert r[0] == 3.0 * N
    np.testing.assert_array_equal(r[1], np.full(N, 6, np.float32))
    assert drv.counts["launch"] >= 6


def test_policies_on_cuda_lanes(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, _ = fake
    a = dev.to_device(np.ones(N, np.float32))
    for policy in (az.SingleStream(), az.RoundRobin(2), az.DependencyChains(2)):
        t = dev.empty(N, az.f32)
        h1 = affine[CFG].op(a, t, 2.0, 0.0).submit(policy)
        h2 = t.to_host_op().submit(policy)
        np.testing.assert_array_equal(h2.wait(), np.full(N, 2, np.float32))
        h1.wait()
        policy.close()


def test_and_then_that_allocates_waits_for_the_device_stream_again(
    fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver],
) -> None:
    """`call_op` allocates its outputs on the device's stream: a pool lane that continues an
    `and_then` chain after such a step waits for the device's stream again (one more
    record + wait per allocating step); a step that allocates nothing adds no wait."""
    from aop_kernels import vecadd_out

    dev, drv = fake
    a = dev.to_device(np.ones(N, np.float32))
    t = dev.empty(N, az.f32)

    def waits(build: Any) -> int:
        before = drv.counts.get("wait", 0)
        with az.StreamPool(dev, 2) as pool:
            build().submit(pool).wait()
        return drv.counts.get("wait", 0) - before

    u = dev.empty(N, az.f32)
    plain = waits(lambda: affine[CFG].op(a, t, 1.0, 0.0).and_then(lambda _: affine[CFG].op(t, u, 1.0, 0.0)))
    allocating = waits(lambda: affine[CFG].op(a, t, 1.0, 0.0).and_then(lambda _: vecadd_out[CFG].call_op(t, t)))
    assert allocating == plain + 1
    # (before any step entered a lane, an allocation needs no extra wait: the lane's first
    # wait for the device's stream comes after it)
    assert waits(lambda: az.value(a).and_then(lambda x: vecadd_out[CFG].call_op(x, x))) == waits(
        lambda: az.value(a).and_then(lambda x: affine[CFG].op(x, t, 1.0, 0.0))
    )

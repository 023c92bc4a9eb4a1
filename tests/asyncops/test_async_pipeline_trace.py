"""The double-buffered pipeline (examples/async_double_buffer.py) at the level of streams: the
driver calls its chunks queue on the fake driver (tests/fakecuda.py `FakeDriver.log`), with the
work looking in flight while it is submitted, as on a GPU.  Chunks of the S slots (2: a double
buffer, 3: the example's default) run on S streams that never wait for each other; chunk
k + S follows chunk k in stream order (no event); nothing synchronises the host while chunks
are queued.  And the example's model of the best overlapped time (`ideal_overlapped`) keeps
the bounds docs/async.md states.  And the ownership
rules these orderings come from are as precise as byte ranges: disjoint slices of one host
array do not conflict, overlapping ones do."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakecuda
import numpy as np
import pytest
from aop_kernels import affine

import anodize as az
from anodize.runtime import inflight

ROOT = Path(__file__).resolve().parents[2]
SYNCING = {"stream_sync", "event_sync", "ctx_sync", "host_free"}  # calls that make the host wait for the GPU


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]]:
    import aop_kernels

    for v in vars(aop_kernels).values():
        if isinstance(v, az.Kernel):
            v.store.clear()
    yield fakecuda.install(monkeypatch)
    assert inflight.in_flight() == 0


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("_trace_double_buffer", ROOT / "examples" / "async_double_buffer.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.transform.store.clear()
    return mod


def _pipeline(dev: fakecuda.FakeGpu, drv: fakecuda.FakeDriver, chunks: int, slots: int, size: int = 512) -> list[list[tuple[Any, ...]]]:
    """The example's pipelined run (its chunk op, `az.DependencyChains(slots)`), submitted while
    the fake driver says nothing is done yet; the driver calls of each chunk's `submit`."""
    mod = _example()
    n = chunks * size
    host_in = az.pinned_empty(dev, n, az.f32)
    host_in[:] = np.arange(n, dtype=np.float32) / n
    host_out = az.pinned_empty(dev, n, az.f32)
    bufs = [dev.empty(size, az.f32) for _ in range(slots)]
    cfg = az.LaunchConfig(2, 256)

    def chunk(k: int) -> az.Op:
        lo, hi = k * size, (k + 1) * size
        return (
            dev.copy_op(bufs[k % slots][: hi - lo], host_in[lo:hi])
            .and_then(lambda d: mod.transform[cfg].call_op(d, 3))
            .and_then(lambda out: dev.copy_op(host_out[lo:hi], out))
        )

    policy = az.DependencyChains(slots)
    chunk(0).submit(policy).wait()  # warm-up: compile, the policy's streams
    per_chunk = []
    drv.ready = False  # every chunk looks in flight: the ownership rules order them
    handles = []
    try:
        for k in range(chunks):
            drv.log.clear()
            handles.append(chunk(k).submit(policy))
            per_chunk.append(list(drv.log))
    finally:
        drv.ready = True
    for h in handles:
        h.wait()
    policy.close()
    np.testing.assert_allclose(host_out, mod.reference(host_in, 3), rtol=1e-5)
    return per_chunk


def _work_stream(calls: list[tuple[Any, ...]]) -> int:
    streams = {c[1] for c in calls if c[0] in ("h2d", "launch", "d2h")}
    assert len(streams) == 1, f"a chunk's copies and kernel on one stream, got {calls}"
    return streams.pop()


@pytest.mark.parametrize("slots", [2, 3])
def test_pipeline_chunks_rotate_streams_without_waiting_for_each_other(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver], slots: int) -> None:
    dev, drv = fake
    per_chunk = _pipeline(dev, drv, chunks=8, slots=slots)
    dev_stream = dev._stream_h
    streams = [_work_stream(calls) for calls in per_chunk]
    assert len(set(streams)) == slots and dev_stream not in streams
    for k in range(len(streams) - 1):
        assert streams[k] not in streams[k + 1 : k + slots]  # the other slots: other streams, overlapping
    for k in range(len(streams) - slots):
        assert streams[k] == streams[k + slots]  # the same slot: after chunk k in stream order
    for k, calls in enumerate(per_chunk):
        assert [c[0] for c in calls if c[0] in ("h2d", "launch", "d2h")] == ["h2d", "launch", "d2h"]
        assert not [c for c in calls if c[0] in SYNCING], f"chunk {k} synchronises the host: {calls}"
        waits = [c for c in calls if c[0] == "wait"]
        # the only waits: the chunk's stream for the device's stream (its `call_op` output is
        # allocated there); never for another pool stream (chunk k - 1) nor for its own
        assert all(w[1] == streams[k] and w[2] == dev_stream for w in waits), f"chunk {k}: {waits}"
        assert len(waits) <= 2  # constant: chunk k does not wait for every earlier chunk of its slot
        allocs = [c for c in calls if c[0] == "alloc"]
        assert len(allocs) == 1 and allocs[0][1] == dev_stream  # stream-ordered, on the device's stream


def test_pageable_copies_reuse_pinned_staging_blocks(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    """Copies of pageable host arrays go through pinned staging blocks that are reused once the
    copy is complete: after the first, a pipeline of such copies allocates and frees no
    page-locked memory (`cuMemFreeHost` synchronises the device)."""
    dev, drv = fake
    n = 3000
    d = dev.empty(n, az.f32)
    out = np.zeros(n, np.float32)

    def roundtrip(host: np.ndarray) -> None:
        dev.copy_op(d, host).and_then(lambda b: dev.copy_op(out, b)).run()
        np.testing.assert_array_equal(out, host)

    roundtrip(np.arange(n, dtype=np.float32))  # the first: the blocks are allocated
    assert ("host_alloc", None) in drv.log
    drv.log.clear()
    for k in range(4):
        roundtrip(np.arange(n, dtype=np.float32) * k)
    assert not [c for c in drv.log if c[0] in ("host_alloc", "host_free")], drv.log
    policy = az.RoundRobin(2)  # two in flight at once: two blocks, each reused once complete
    hs = [dev.copy_op(dev.empty(n, az.f32), np.full(n, k, np.float32)).submit(policy) for k in range(6)]
    for k, h in enumerate(hs):
        np.testing.assert_array_equal(h.wait().to_host(), np.full(n, k, np.float32))
    policy.close()


def test_ideal_overlapped_time_keeps_the_bounds_of_one_stream_per_slot() -> None:
    ideal = _example().ideal_overlapped
    assert ideal(1.0, 1.0, 1.0, 1, 3) == 3.0  # one chunk: nothing to overlap
    assert ideal(1.0, 1.0, 1.0, 16, 1) == 48.0  # one slot: serial
    for h, k, d in [(1.0, 1.0, 1.0), (1.0, 0.1, 1.0), (0.3, 2.0, 0.5), (1.0, 0.0, 0.0)]:
        serial = 16 * (h + k + d)
        two, three = ideal(h, k, d, 16, 2), ideal(h, k, d, 16, 3)
        assert serial / two <= 2.0  # a stream per slot runs its chunk's three stages in order
        assert three <= two
        assert three >= 16 * max(h, k, d)  # each engine does one thing at a time
    assert ideal(1.0, 1.0, 1.0, 16, 2) == 25.0  # 1.5 per chunk, plus filling and draining: 1.92x
    assert ideal(1.0, 1.0, 1.0, 16, 3) == 18.0  # 1 per chunk (the slowest engine), plus 2: 2.67x


def test_dependent_submission_waits_for_the_last_link_only(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    """A chain of submissions over one buffer on a round-robin pool (each on another stream):
    each waits for the one before (an event), not also for all the earlier ones."""
    dev, drv = fake
    n = 256
    cfg = az.LaunchConfig.for_num_elems(n)
    x = dev.to_device(np.ones(n, np.float32))
    y = dev.empty(n, az.f32)
    pool = az.RoundRobin(3)
    drv.ready = False
    waits = []
    handles = []
    try:
        for k in range(6):
            drv.log.clear()
            src, dst = (x, y) if k % 2 == 0 else (y, x)
            handles.append(affine[cfg].op(src, dst, 1.0, 1.0).submit(pool))
            waits.append([c for c in drv.log if c[0] == "wait" and c[2] != dev._stream_h])
    finally:
        drv.ready = True
    for h in handles:
        h.wait()
    pool.close()
    assert [len(w) for w in waits] == [0, 1, 1, 1, 1, 1]  # (each on another stream than the one before)
    np.testing.assert_array_equal(x.to_host(), np.full(n, 7, np.float32))


class _Exe:
    """An in-flight submission for the registry: never done."""

    def __init__(self, name: str):
        self.name = name
        self.marker = object()

    def describe(self) -> str:
        return self.name

    def poll(self) -> bool:
        return False


def test_disjoint_slices_of_one_host_array_do_not_conflict() -> None:
    host = np.zeros(1000, np.float32)
    uses = lambda lo, hi, w: (inflight.use_of_host(host[lo:hi], w, f"host[{lo}:{hi}]"),)  # noqa: E731
    first, second, third, fourth = _Exe("first"), _Exe("second"), _Exe("third"), _Exe("fourth")
    try:
        assert inflight.begin(first, uses(0, 500, True)) == []
        assert inflight.begin(second, uses(500, 1000, True)) == []  # disjoint bytes of one array
        assert inflight.begin(third, uses(499, 501, False)) == [first, second]  # reads both
        assert inflight.begin(fourth, uses(0, 10, False)) == [first]
    finally:
        for e in (first, second, third, fourth):
            inflight.end(e)
    assert host.flags.writeable


def test_ordering_follows_only_the_last_link_of_a_chain() -> None:
    host = np.zeros(100, np.float32)
    own = [np.zeros(k + 1, np.int8) for k in range(4)]
    chain = [_Exe(f"link {k}") for k in range(4)]
    reader = _Exe("reader")
    try:
        for k, link in enumerate(chain):
            # each link writes `host` (and an array of its own): it conflicts with every earlier
            # link, but waiting for the one before waits for those too
            uses = (inflight.use_of_host(host, True, "host"), inflight.use_of_host(own[k], True, "own"))
            assert inflight.begin(link, uses) == chain[k - 1 : k]
        assert inflight.begin(reader, (inflight.use_of_host(host[10:20], False, "part of host"),)) == [chain[3]]
    finally:
        for e in (*chain, reader):
            inflight.end(e)


def test_awaiting_a_finished_gpu_op_runs_map_off_the_loop_and_yields(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    """On a GPU small work is often done before `await op` has queued all of it: the `map`
    function still runs in a helper thread, never on the event loop, and the await yields."""
    dev, _ = fake
    n = 256
    cfg = az.LaunchConfig.for_num_elems(n)
    a = dev.to_device(np.full(n, 2.0, np.float32))
    c = dev.empty(n, az.f32)
    where: list[threading.Thread] = []

    def total(h: np.ndarray) -> float:
        where.append(threading.current_thread())
        return float(h.sum())

    op = affine[cfg].op(a, c, 2.0, 0.0).then(c.to_host_op()).map(total)

    async def main() -> tuple[float, int, threading.Thread]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.ensure_future(ticker())
        r = await op
        t.cancel()
        return r, ticks, threading.current_thread()

    r, ticks, loop_thread = asyncio.run(main())
    assert r == 4.0 * n and ticks > 0
    assert where and where[0] is not loop_thread

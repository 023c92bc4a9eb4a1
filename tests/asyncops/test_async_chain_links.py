"""What one link of an `and_then` chain costs the driver and the ownership rules (runtime/and_then.py).

A step whose kernel op goes straight onto the lane the chain is on queues its launch and
nothing else: no event, no stream wait, no registration once its memory is registered
(counted on tests/fakecuda.py's driver, whose log names every queued call).  These bounds
stand in for timing, which is too noisy on a shared machine: the host cost of a link
(bench/and_then_chain.py) follows the driver calls and registrations it makes.  The same fast
path keeps the rules: a step over memory not registered yet is ordered after in-flight work
that writes it, an exception in a CPU step skips the rest and surfaces at completion, and a
captured chain replays as one graph launch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import fakecuda
import numpy as np
import pytest
from aop_kernels import affine

import anodize as az
from anodize.runtime import inflight
from anodize.runtime.device import Device

N = 256
CFG = az.LaunchConfig.for_num_elems(N)
STEPS = 200


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]]:
    affine.store.clear()
    yield fakecuda.install(monkeypatch)
    assert inflight.in_flight() == 0


def _chain(dev: Device, steps: int = STEPS) -> tuple[az.Buffer, az.Buffer, az.Op]:
    """x <- 1; step k adds one, from x to y (k even) or y to x (k odd): after an even number of
    steps x holds steps + 1."""
    x = dev.to_device(np.ones(N, np.float32))
    y = dev.empty(N, az.f32)
    one = 1.0

    def step(k: int) -> Callable[[Any], az.Op]:
        src, dst = (x, y) if k % 2 == 0 else (y, x)
        return lambda _: affine[CFG].op(src, dst, one, one)

    op: az.Op = az.value(None, device=dev)
    for k in range(steps):
        op = op.and_then(step(k))
    return x, y, op


def _calls(log: list[tuple[Any, ...]], what: str) -> list[tuple[Any, ...]]:
    return [c for c in log if c[0] == what]


def _beside_writer(drv: fakecuda.FakeDriver, pool: Any, writer_op: Any, op: Any) -> tuple[list[int], list[int]]:
    """Submit `writer_op` to `pool` and keep it in flight while `op` is submitted; the log's
    positions of `op`'s launches and of its waits on the writer's stream."""
    drv.ready = False
    try:
        writer = writer_op.submit(pool)
        writer_stream = _calls(drv.log, "launch")[-1][1]
        drv.log.clear()
        handle = op.submit(pool)
    finally:
        drv.ready = True
    log = list(drv.log)
    writer.wait()
    handle.wait()
    launches = [k for k, c in enumerate(log) if c[0] == "launch"]
    waits = [k for k, c in enumerate(log) if c[0] == "wait" and c[2] == writer_stream]
    return launches, waits


def test_a_chain_on_the_device_stream_queues_one_launch_per_link(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    x, _, op = _chain(dev)
    _chain(dev, 2)[2].run()  # compile and memoise
    drv.log.clear()
    op.run()
    launches = _calls(drv.log, "launch")
    assert len(launches) == STEPS and {c[1] for c in launches} == {dev._stream_h}
    assert _calls(drv.log, "wait") == []  # one stream: stream order, no event wait per link
    assert len(_calls(drv.log, "record")) <= 1  # the chain's completion, not one event per link
    np.testing.assert_array_equal(x.to_host(), np.full(N, STEPS + 1, np.float32))


def test_a_submitted_chain_waits_once_for_the_device_stream(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    x, _, op = _chain(dev)
    pool = az.RoundRobin(2)
    try:
        _chain(dev, 2)[2].submit(pool).wait()
        drv.log.clear()
        drv.ready = False  # the chain looks in flight while it is queued
        try:
            handle = op.submit(pool)
        finally:
            drv.ready = True
        log = list(drv.log)
        handle.wait()
    finally:
        pool.close()
    launches = _calls(log, "launch")
    assert len(launches) == STEPS and len({c[1] for c in launches}) == 1 and launches[0][1] != dev._stream_h
    waits = _calls(log, "wait")
    assert len(waits) <= 1 and all(w[2] == dev._stream_h for w in waits)  # allocations and fills before it
    assert len(_calls(log, "record")) <= 2  # the device stream's mark and the completion
    np.testing.assert_array_equal(x.to_host(), np.full(N, STEPS + 1, np.float32))


def test_a_link_over_new_memory_still_waits_for_in_flight_work_that_writes_it(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    """Steps 1..k use x and y, registered by the first two; step k + 1 reads z, which another
    submission (in flight on another stream) writes: that step's launch waits for it."""
    dev, drv = fake
    x, y, op = _chain(dev, 6)
    w, z = dev.to_device(np.ones(N, np.float32)), dev.empty(N, az.f32)
    op = op.and_then(lambda _: affine[CFG].op(z, y, 1.0, 0.0))
    pool = az.RoundRobin(2)
    try:
        _chain(dev, 2)[2].submit(pool).wait()
        affine[CFG].op(w, z, 1.0, 0.0).submit(pool).wait()
        launches, waits = _beside_writer(drv, pool, affine[CFG].op(w, z, 5.0, 0.0), op)  # z = 5, nothing of the chain's first steps
    finally:
        pool.close()
    assert len(launches) == 7 and len(waits) == 1
    assert launches[5] < waits[0] < launches[6]  # the step over z, and only it, waits for the writer
    np.testing.assert_array_equal(y.to_host(), np.full(N, 5, np.float32))


def test_a_captured_chain_replays_as_one_graph_launch(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    x, _, op = _chain(dev)
    graph = az.capture(op)
    drv.log.clear()
    drv.counts.clear()
    graph.replay()
    assert drv.counts.get("graph_launch") == 1
    assert _calls(drv.log, "launch") == [] and _calls(drv.log, "wait") == []  # every kernel is in the graph
    np.testing.assert_array_equal(x.to_host(), np.full(N, STEPS + 1, np.float32))


@pytest.mark.parametrize("build", ["and_then", "then"])
def test_an_exception_in_a_cpu_chain_skips_the_rest_and_surfaces(cpu: Device, monkeypatch: pytest.MonkeyPatch, build: str) -> None:
    x, y, op = (_chain if build == "and_then" else _then_chain)(cpu, 8)
    probe = affine[CFG].op(x, y, 1.0, 1.0)
    plan = probe.plan
    probe.run()
    real, calls = plan.entry, []

    def entry(*a: Any) -> None:
        calls.append(a)
        if len(calls) == 4:
            raise RuntimeError("the fourth launch fails")
        real(*a)

    monkeypatch.setattr(plan, "entry", entry)
    with pytest.raises(RuntimeError, match="fourth launch"):
        op.run()
    assert len(calls) == 4  # steps after the failed one were skipped
    np.testing.assert_array_equal(x.to_host(), np.full(N, 3, np.float32))  # probe: y = 2; steps 0-2: y 2, x 3, y 4
    np.testing.assert_array_equal(y.to_host(), np.full(N, 4, np.float32))


def test_a_chain_on_a_cpu_worker_queues_one_item_per_link(cpu: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CPU pool (worker threads) each link is one item on the worker's queue: no marker
    or wait per link."""
    from anodize.runtime import streams as S

    x, _, op = _chain(cpu)
    counts = {"submit": 0, "record": 0, "wait": 0}
    for name in counts:
        real = getattr(S.WorkerLane, name)

        def counted(self: Any, *a: Any, _name: str = name, _real: Any = real) -> Any:
            counts[_name] += 1
            return _real(self, *a)

        monkeypatch.setattr(S.WorkerLane, name, counted)
    pool = az.RoundRobin(1)
    try:
        _chain(cpu, 2)[2].submit(pool).wait()
        for name in counts:
            counts[name] = 0
        _chain(cpu, 2)[2].submit(pool).wait()
        short = dict(counts)  # a chain of two links
        for name in counts:
            counts[name] = 0
        op.submit(pool).wait()
        long = dict(counts)
    finally:
        pool.close()
    assert long["submit"] == STEPS and short["submit"] == 2
    assert long["record"] == short["record"] and long["wait"] == short["wait"]  # per submission, not per link
    np.testing.assert_array_equal(x.to_host(), np.full(N, STEPS + 1, np.float32))


def test_the_op_memo_keeps_no_argument_alive(cpu: Device) -> None:
    """The memo matches Buffers by weak reference and holds none of an op's arguments, nor the
    launcher (no reference cycle): dropping the op and its buffers frees them at once."""
    import gc
    import weakref

    a, c = cpu.to_device(np.ones(N, np.float32)), cpu.empty(N, az.f32)
    op = affine[CFG].op(a, c, 1.0, 0.0)
    again = affine[CFG].op(a, c, 1.0, 0.0)  # a memo hit
    assert again.flat is op.flat and again.launcher is op.launcher
    dead = weakref.ref(a), weakref.ref(c)
    gc.disable()
    try:
        del op, again, a, c
        assert all(r() is None for r in dead)
    finally:
        gc.enable()


# ---- `then` chains: the same direct path (runtime/ops.py `Seq._emit`) ----------------------------


def _then_chain(dev: Device, steps: int = STEPS) -> tuple[az.Buffer, az.Buffer, az.Op]:
    """`_chain`'s kernels, built up front and sequenced with `then`."""
    x = dev.to_device(np.ones(N, np.float32))
    y = dev.empty(N, az.f32)
    op: az.Op = affine[CFG].op(x, y, 1.0, 1.0)
    for k in range(1, steps):
        op = op.then(affine[CFG].op(y, x, 1.0, 1.0) if k % 2 else affine[CFG].op(x, y, 1.0, 1.0))
    return x, y, op


def test_a_then_chain_on_the_device_stream_queues_one_launch_per_op(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first kernel op, each goes straight onto the stream (cuda.core's `launch`),
    not through `Leaf._emit` and the lane's `launch`."""
    from anodize.runtime import streams as S

    dev, drv = fake
    x, _, op = _then_chain(dev)
    _then_chain(dev, 2)[2].run()  # compile and memoise
    real, via_lane = S.GpuLane.launch, []

    def counted(self: Any, *a: Any) -> None:
        via_lane.append(a)
        real(self, *a)

    monkeypatch.setattr(S.GpuLane, "launch", counted)
    drv.log.clear()
    op.run()
    assert len(via_lane) == 1  # the first op; the other 199 went straight onto the stream
    launches = _calls(drv.log, "launch")
    assert len(launches) == STEPS and {c[1] for c in launches} == {dev._stream_h}
    assert _calls(drv.log, "wait") == [] and len(_calls(drv.log, "record")) <= 1
    np.testing.assert_array_equal(x.to_host(), np.full(N, STEPS + 1, np.float32))


def test_a_then_chain_with_a_copy_inside_keeps_its_order(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    """A copy between kernel ops breaks the direct run (it goes through its own `_emit`) and
    the kernels after it go straight onto the lane again, after the copy."""
    dev, drv = fake
    x, y, first = _then_chain(dev, 4)  # x = 5
    z = dev.empty(N, az.f32)
    _, _, warm = _then_chain(dev, 2)
    warm.run()
    op = first.then(dev.copy_op(z, x)).then(affine[CFG].op(z, y, 2.0, 0.0)).then(affine[CFG].op(y, x, 1.0, 1.0))
    drv.log.clear()
    op.run()
    kinds = [c[0] for c in drv.log if c[0] in ("launch", "d2d", "wait")]
    assert kinds == ["launch"] * 4 + ["d2d"] + ["launch"] * 2  # in order, one stream: no wait
    np.testing.assert_array_equal(y.to_host(), np.full(N, 10, np.float32))
    np.testing.assert_array_equal(x.to_host(), np.full(N, 11, np.float32))


def test_a_then_chain_over_memory_in_flight_waits_for_its_writer(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    dev, drv = fake
    x, y, op = _then_chain(dev, 6)
    pool = az.RoundRobin(2)
    try:
        _then_chain(dev, 2)[2].submit(pool).wait()
        w = dev.to_device(np.full(N, 7, np.float32))
        launches, waits = _beside_writer(drv, pool, affine[CFG].op(w, x, 1.0, 0.0), op)  # x = 7, in flight on another stream
    finally:
        pool.close()
    assert len(launches) == 6 and len(waits) == 1 and waits[0] < launches[0]
    np.testing.assert_array_equal(x.to_host(), np.full(N, 13, np.float32))  # 7, then +1 per step


def test_a_then_chain_on_a_cpu_worker_queues_one_item_per_op(cpu: Device) -> None:
    x, _, op = _then_chain(cpu)
    pool = az.RoundRobin(1)
    try:
        op.submit(pool).wait()
    finally:
        pool.close()
    np.testing.assert_array_equal(x.to_host(), np.full(N, STEPS + 1, np.float32))


def test_then_appends_in_place_and_keeps_the_ownership_rules(cpu: Device) -> None:
    """`seq.then(kernel_op)` appends to the sequence's list (one list for the whole chain); a
    sequence or op extended once, or an op already in a sequence, cannot be used again."""
    from anodize.language.errors import LaunchError

    x = cpu.to_device(np.ones(N, np.float32))
    y = cpu.empty(N, az.f32)
    a, b, c = (affine[CFG].op(x, y, 1.0, 1.0) for _ in range(3))
    s = a.then(b)
    t = s.then(c)
    assert t.children == (a, b, c) and t._kids is s._kids  # type: ignore[attr-defined]
    with pytest.raises(LaunchError, match="already part of another op"):
        s.then(affine[CFG].op(x, y, 1.0, 1.0))  # s was taken by t
    with pytest.raises(LaunchError, match="already part of another op"):
        t.then(b)  # b is in t already
    t2 = affine[CFG].op(x, y, 1.0, 1.0).then(affine[CFG].op(y, x, 1.0, 1.0))
    pool = az.RoundRobin(1)
    try:
        t2.submit(pool).wait()
    finally:
        pool.close()
    with pytest.raises(LaunchError, match="already started"):
        t2.then(affine[CFG].op(x, y, 1.0, 1.0))
    np.testing.assert_array_equal(x.to_host(), np.full(N, 3, np.float32))


def test_a_then_chain_registers_each_range_once(cpu: Device) -> None:
    """The submission's survey of a 200-op chain over two buffers: two uses, one kernel (an
    op of the same memo'd arguments as one surveyed already adds nothing)."""
    from anodize.runtime.submission import Handle

    _, _, op = _then_chain(cpu)
    h = Handle(op)
    assert len(h.used) == 2 and all(u.writes for u in h.used) and len(h.kernels) == 1


@pytest.mark.parametrize("where", ["inline", "fake-gpu"])
def test_a_chain_lets_each_straight_launched_op_go(where: str, cpu: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel op launched straight onto its lane is not kept by the chain: while the chain
    is queued and after, only the ops queueing admitted (the first over each buffer pair) and
    the last stay alive, not one per step."""
    import gc
    import weakref

    dev = fakecuda.install(monkeypatch)[0] if where == "fake-gpu" else cpu
    x, y = dev.to_device(np.ones(N, np.float32)), dev.empty(N, az.f32)
    made: list[weakref.ref[az.Op]] = []
    alive_at: list[int] = []

    def step(k: int) -> Callable[[Any], az.Op]:
        src, dst = (x, y) if k % 2 == 0 else (y, x)

        def fn(_: Any) -> az.Op:
            alive_at.append(sum(r() is not None for r in made))
            op = affine[CFG].op(src, dst, 1.0, 1.0)
            made.append(weakref.ref(op))
            return op

        return fn

    op: az.Op = az.value(None, device=dev)
    for k in range(STEPS):
        op = op.and_then(step(k))
    gc.disable()
    try:
        op.run()
        assert max(alive_at) <= 4  # (the admitted first two, the one launched last, the current)
        assert sum(r() is not None for r in made) <= 3
    finally:
        gc.enable()
    np.testing.assert_array_equal(x.to_host(), np.full(N, STEPS + 1, np.float32))


@pytest.mark.parametrize("bad", ["raises", "not an op"])
def test_a_step_that_fails_inside_a_straight_run_stops_the_chain(bad: str, cpu: Device) -> None:
    """Steps 0-4 run straight on (quick ops); step 5's function raises, or returns something
    other than an op: the error surfaces at completion and no later step runs."""
    from anodize.language.errors import ArgumentError

    x, y, _ = _chain(cpu, 2)
    ran: list[int] = []

    def step(k: int) -> Callable[[Any], Any]:
        src, dst = (x, y) if k % 2 == 0 else (y, x)

        def fn(_: Any) -> Any:
            ran.append(k)
            if k == 5:
                if bad == "raises":
                    raise KeyError("step five")
                return 5
            return affine[CFG].op(src, dst, 1.0, 1.0)

        return fn

    op: az.Op = az.value(None, device=cpu)
    for k in range(10):
        op = op.and_then(step(k))
    with pytest.raises(KeyError if bad == "raises" else ArgumentError):
        op.run()
    assert ran == [0, 1, 2, 3, 4, 5]
    np.testing.assert_array_equal(y.to_host(), np.full(N, 6, np.float32))  # x 1 -> y 2, x 3, y 4, x 5, y 6


def test_a_step_that_allocates_inside_a_straight_run_waits_for_the_device_stream(fake: tuple[fakecuda.FakeGpu, fakecuda.FakeDriver]) -> None:
    """On a pool lane, steps 0-3 run straight on; step 4's function allocates on the device's
    stream (`dev.empty`) before it returns an op of the same memory: that op's launch waits
    for the device's stream (one wait, before it), the steps after it run straight on again."""
    dev, drv = fake
    x, y, _ = _chain(dev, 2)
    made: list[az.Buffer] = []

    def step(k: int) -> Callable[[Any], az.Op]:
        src, dst = (x, y) if k % 2 == 0 else (y, x)

        def fn(_: Any) -> az.Op:
            if k == 4:
                made.append(dev.empty(N, az.f32))
            return affine[CFG].op(src, dst, 1.0, 1.0)

        return fn

    op: az.Op = az.value(None, device=dev)
    for k in range(8):
        op = op.and_then(step(k))
    pool = az.RoundRobin(2)
    try:
        _chain(dev, 2)[2].submit(pool).wait()
        drv.log.clear()
        op.submit(pool).wait()
    finally:
        pool.close()
    log = [c for c in drv.log if c[0] in ("launch", "wait")]
    launches = [k for k, c in enumerate(log) if c[0] == "launch"]
    waits = [k for k, c in enumerate(log) if c[0] == "wait" and c[2] == dev._stream_h]
    assert len(launches) == 8 and launches[3] < waits[-1] < launches[4]
    assert len(waits) == 2  # the lane's first, and the one after step 4's allocation
    np.testing.assert_array_equal(x.to_host(), np.full(N, 9, np.float32))


@pytest.mark.parametrize("where", ["inline", "fake-gpu"])
@pytest.mark.parametrize("chain", ["and_then", "then"])
def test_a_straight_run_launches_each_op_with_its_own_arguments(where: str, chain: str, cpu: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two launchers (two configs) take turns straight on, each with its own scalars: x -> y
    adds one, y -> x doubles.  A straight run launches each op from the arguments bound once
    per flat argument list (`launch_pack`): a pack launched with another op's plan or
    arguments would change the numbers."""
    dev = fakecuda.install(monkeypatch)[0] if where == "fake-gpu" else cpu
    x, y = dev.to_device(np.ones(N, np.float32)), dev.empty(N, az.f32)
    add, dbl = affine[CFG], affine[az.LaunchConfig(4, 256)]
    steps = 20

    def make(k: int) -> az.Op:
        return add.op(x, y, 1.0, 1.0) if k % 2 == 0 else dbl.op(y, x, 2.0, 0.0)

    if chain == "and_then":
        op: az.Op = az.value(None, device=dev)
        for k in range(steps):
            op = op.and_then(lambda _, k=k: make(k))
    else:
        op = make(0)
        for k in range(1, steps):
            op = op.then(make(k))
    op.run()
    want = 1.0
    for _ in range(steps // 2):
        want = 2 * (want + 1)
    np.testing.assert_array_equal(x.to_host(), np.full(N, want, np.float32))
    np.testing.assert_array_equal(y.to_host(), np.full(N, want / 2, np.float32))

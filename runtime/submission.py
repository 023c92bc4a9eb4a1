"""Submission and completion of lazy ops (runtime/ops.py): `_start` queues an op's tree on its
lanes (`_Ctx`: the lanes per device, ordering after in-flight work and after each device's own
stream), and the `Handle` it returns polls, waits, awaits, releases the memory the op used and
raises its kernels' `KernelFault`."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import numpy as np

from anodize.codegen.artifact import FAULT_RECORD_BYTES
from anodize.language.errors import ArgumentError, KernelFault, LaunchError
from anodize.runtime import inflight, lazy, streams as S
from anodize.runtime.deferred import FutureMarker, defer, unresolved
from anodize.runtime.faults import RECORD, _fault
from anodize.runtime.inflight import Use

if TYPE_CHECKING:
    from anodize.runtime.compile import LoadedKernel
    from anodize.runtime.device import Device
    from anodize.runtime.ops import Op


def _single_lanes(dev: Device) -> Any:
    return S.device_lanes(dev)


class _Ctx:
    """One submission being queued: its lanes (per device), handle and device-stream ordering.

    `lanes` are the first device's (a `SingleLane` or a `StreamPool`); `others(dev)` gives
    another device's (its own stream for `run`, a pool for `submit`, a capture pool)."""

    def __init__(
        self,
        lanes: Any,
        handle: Handle,
        start: list[S.Marker],
        capturing: bool = False,
        others: Callable[[Device], Any] | None = None,
    ):
        self.lanes = lanes
        self.handle = handle
        self.start = start  # in-flight work that every lane waits for before its first step
        self.capturing = capturing
        self._others = others or (S.default_pool if isinstance(lanes, S.StreamPool) else _single_lanes)
        self._by_dev: dict[int, Any] = {id(lanes.device): lanes}
        self._home: dict[int, S.Lane] = {}  # device -> the lane its work continues on
        self._dev_marks: dict[int, S.Marker] = {}
        self._entered: set[int] = set()
        self._lanes: dict[int, S.Lane] = {}
        self._stamps: dict[int, tuple[Device, int]] = {}  # device -> its stream work when last marked
        self.lock = lanes._lock  # deferred steps (runtime/deferred.py) queue under it too
        self.scope: Any = None  # the gather branch being queued (runtime/combinators.py: Branch)
        self.tag = 0  # the `shared` op being queued (id), whose one execution what is built joins
        self.stopped = False  # a step failed: queue nothing more

    # -- steps that wait for the host (runtime/deferred.py) ---------------------------------
    def fail(self, e: BaseException) -> None:
        """A step of this submission failed: keep the first error (raised at completion)."""
        if self.handle.error is None:
            self.handle.error = e
        self.stopped = True

    def no_future(self, pend: list[Any]) -> None:
        if self.capturing and unresolved(pend):
            raise LaunchError(
                "a captured graph cannot hold a step that waits for the host (`op.map(fn)`, or "
                "`and_then` over a host value such as a `to_host_op` array)",
                help="capture the device part only, and run the host step after `graph.replay()`",
            )

    def chain(self, lane: S.Lane, pend: list[Any], ops: list[Op], k: int = 0) -> tuple[S.Lane, list[Any]]:
        """Queue `ops[k:]` one after another on `lane`, after `pend`; when `pend` holds a
        future, the rest is queued later (a `FutureMarker` stands for it meanwhile)."""
        n = len(ops)
        while k < n and not self.stopped:
            if pend:
                if unresolved(pend):
                    self.no_future(pend)
                    fut = FutureMarker()

                    def resume(real: list[Any], lane: S.Lane = lane, k: int = k) -> None:
                        with self.lock:
                            self.in_thread()
                            end, p = self.chain(lane, real, ops, k)
                            fut.resolve(self.tail(lane, end, p))

                    defer(pend, resume, host_sync=False, on_error=self.failing(fut, lane))
                    return lane, [fut]
                for m in pend:
                    self.enter(lane)
                    lane.wait(m)
            lane, pend = ops[k]._emit(self, lane)
            k += 1
        return lane, pend

    def in_thread(self) -> None:
        """A deferred step queues from a helper thread: make the device's context current there."""
        S.ensure_current(self.lanes.device)

    def tail(self, lane: S.Lane, end: S.Lane, pend: list[Any]) -> list[Any]:
        """What work that continues on `lane` waits for, after work that ended on `end` with `pend`."""
        if end is lane:
            return list(pend)
        self.enter(end)
        return [*pend, end.record()]

    def failing(self, fut: FutureMarker, lane: S.Lane) -> Callable[[BaseException], None]:
        """The error path of a deferred step: keep the error and resolve `fut` (waiters go on)."""

        def on_error(e: BaseException) -> None:
            self.fail(e)
            fut.resolve([])

        return on_error

    def enter(self, lane: S.Lane) -> None:
        """First use of `lane` in this submission: order it after the in-flight work it must
        follow and after the work queued on its device's own stream (allocations, fills,
        plain launches)."""
        if id(lane) in self._entered:
            return
        self._entered.add(id(lane))
        self._lanes[id(lane)] = lane
        for m in self.start:
            lane.wait(m)
        dev = lane.device
        if dev is None:
            return
        self._home.setdefault(id(dev), lane)
        if dev.kind == "cuda" and not self.capturing:
            dev_lane = S.device_lane(dev)
            if lane is not dev_lane:
                mark = self._dev_marks.get(id(dev))
                if mark is None:
                    mark = self._dev_marks[id(dev)] = dev_lane.record()
                    self._stamps[id(dev)] = (dev, dev.stream_work)
                lane.wait(mark)

    def after_user_code(self) -> bool:
        """User code ran while queueing (an `and_then` function): it may have allocated on a
        device's stream (`call_op`'s outputs, `dev.empty`).  Lanes of that device wait for its
        stream again before their next step.  Whether any lane has to."""
        again = False
        for key, (dev, seen) in list(self._stamps.items()):
            if dev.stream_work != seen:
                del self._stamps[key]
                self._dev_marks.pop(key, None)
                self._entered = {k for k in self._entered if self._lanes.get(k) is None or self._lanes[k].device is not dev}
                again = True
        return again

    def lanes_of(self, dev: Device) -> Any:
        hit = self._by_dev.get(id(dev))
        if hit is None:
            hit = self._by_dev[id(dev)] = self._others(dev)
        return hit

    def move(self, lane: S.Lane, dev: Device) -> S.Lane:
        """Continue on `dev` after what `lane` has queued: an event recorded on `lane`,
        waited for by `dev`'s lane (a cross-device stream wait on GPUs)."""
        self.enter(lane)
        mark = lane.record()
        target = self._home.get(id(dev)) or self.lanes_of(dev).first_lane()
        self.enter(target)
        target.wait(mark)
        return target

    def branch_lane(self, dev: Device, busy: S.Lane) -> S.Lane:
        """A lane of `dev` for a gather branch forking from `busy`."""
        lane: S.Lane = self.lanes_of(dev).other_lane(busy)
        return lane


def _lane_for(dev: Device, stream: Any) -> S.Lane:
    if stream is None:
        return S.device_lane(dev)
    if dev.kind != "cuda":
        raise ArgumentError(
            "`run(stream=...)` takes a CUDA stream, but this op runs on the CPU backend",
            help="pass nothing, or an `az.StreamPool` (CPU pools run on worker threads)",
        )
    if not hasattr(stream, "record") or not hasattr(stream, "handle"):
        raise ArgumentError(f"`run(stream=...)` takes a cuda.core Stream or an az.StreamPool, got {stream!r}")
    return S.GpuLane(dev, stream)


def release_holds(op: Op) -> None:
    """`call_op` guards its arrays from when it is built (`inflight.Held`); the submission or
    graph that takes the op registers them from now on."""
    if not inflight._ACTIVE:
        return  # nothing is held
    for leaf in op.leaves():
        held = getattr(leaf, "_held", None)
        if held is not None:
            inflight.end(held)
            leaf._held = None  # type: ignore[attr-defined]


def _start(op: Op, lanes: Any, others: Callable[[Device], Any] | None = None) -> Handle:
    op._claim_for_run()
    release_holds(op)
    dev = op.device
    handle = Handle(op)
    S.ensure_current(dev)
    with lanes._lock:
        earlier = inflight.begin(handle, handle.used, handle.compact)
        try:
            pick = getattr(lanes, "first_lane_after", None)  # a policy that follows dependencies
            first = pick(earlier) if pick is not None else lanes.first_lane()
            start = [e.marker for e in earlier]  # in-flight work on the same memory comes first
            # (each lane also waits for its device's own stream when it is first used: `_Ctx.enter`)
            if unresolved(start):  # earlier work with steps not queued yet: queue once they are
                fut = FutureMarker()
                ctx = _Ctx(lanes, handle, [], others=others)
                handle.marker = fut
                op._handle = handle

                def later(real: list[Any]) -> None:
                    with lanes._lock:
                        ctx.in_thread()
                        ctx.start = real
                        fut.resolve([_emit_all(op, ctx, first)])

                defer(start, later, host_sync=False, on_error=ctx.failing(fut, first))
                return handle
            ctx = _Ctx(lanes, handle, start, others=others)
            done = _emit_all(op, ctx, first)
        except BaseException:
            inflight.end(handle)
            raise
    handle.marker = done
    op._handle = handle
    return handle


def _emit_all(op: Op, ctx: _Ctx, first: S.Lane) -> Any:
    """Queue `op` from `first`; the marker of its completion (a future when a step is deferred)."""
    lane, pend = op._emit(ctx, first)
    ctx.handle.end_lane = lane
    if not unresolved(pend):
        for m in pend:
            lane.wait(m)
        ctx.enter(lane)
        return lane.record()
    fut = FutureMarker()

    def join(real: list[Any]) -> None:
        with ctx.lock:
            ctx.in_thread()
            for m in real:
                lane.wait(m)
            fut.resolve([lane.record()])

    defer(pend, join, host_sync=False, on_error=ctx.failing(fut, lane))
    return fut


class Handle:
    """A submitted op: poll with `done()`, wait with `wait()` / `result()`, or `await` it."""

    def __init__(self, op: Op, *, used: tuple[Use, ...] | None = None, kernels: list[LoadedKernel] | None = None):
        self.op: Op | None = op  # until completion (then `_what` describes it)
        self._what = ""
        self.device = op.device
        self.compact = used is None and kernels is None  # `used` has one use per range
        if self.compact:
            used, kernels = _survey(op)
        self.used = op.uses() if used is None else used
        self.kernels = kernels if kernels is not None else _kernels_of(op)
        self.kernel_ids = {id(k) for k in self.kernels}
        # what is registered in flight, (space, lo, hi) -> whether written: work built while
        # queueing (`and_then`) that uses no more than this is registered already
        self.registered: dict[tuple[int, int, int], bool] = {}
        for u in self.used:
            self.registered[u[:3]] = self.registered.get(u[:3], False) or u.writes
        # id -> the use specs of built kernel ops whose memory is all registered above and whose
        # kernel is in `kernels` (runtime/and_then.py: a later op of the same specs joins at once)
        self.admitted: dict[int, Any] = {}
        self.marker: S.Marker | None = None
        self.end_lane: S.Lane | None = None  # where the work ended (a dependency-chain policy continues there)
        self.error: BaseException | None = None  # a CPU worker's exception
        self.keep: list[Any] = []  # staging buffers, alive until completion
        self.finalizers: list[Callable[[], None]] = []
        self.staged: list[tuple[S.Marker, Callable[[], None]]] = []  # finalizers due once a marker is done
        self._settled = False
        self._completed = False
        self._fault: BaseException | None = None
        self._value: Any = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        """What the handle's op does, in one line."""
        return self._what if self.op is None else self.op.describe()

    def __repr__(self) -> str:
        return f"<anodize Handle for {self.describe()} ({'done' if self.done() else 'in flight'})>"

    # -- CPU lanes run work through this -------------------------------------------------------
    def run_item(self, fn: Callable[[], None]) -> None:
        """Run one step of the op on a CPU lane; an exception is kept and raised at completion."""
        if self.error is not None:
            return  # an earlier step failed: skip the rest, but keep the lane's markers flowing
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - reported at completion
            self.error = e

    # -- completion ----------------------------------------------------------------------------
    def done(self) -> bool:
        """True once the device finished the work (does not raise; use `wait()` for the result)."""
        return self.poll()

    def poll(self) -> bool:
        """Whether the work finished; when it has, release what the op held (never raises)."""
        if self._settled:
            return True
        m = self.marker
        if m is None or not m.is_done:
            return False
        self._settle()
        return True

    def _settle(self) -> None:
        """Release the memory the op used (its completion is known); run staging copies."""
        with self._lock:
            if self._settled:
                return
            fins, self.finalizers = self.finalizers, []
            fins += [f for _, f in self.staged]
            self.staged = []
            for f in fins:
                try:
                    f()
                except BaseException as e:  # noqa: BLE001
                    self.error = self.error or e
            self._settled = True
        inflight.end(self)
        self.keep.clear()

    def flush_ready(self) -> None:
        """Run the staging copies whose work is done (a host step reads their arrays)."""
        with self._lock:
            ready = [f for m, f in self.staged if m.is_done]
            self.staged = [(m, f) for m, f in self.staged if not m.is_done]
        for f in ready:
            f()

    def wait(self) -> Any:
        """Block until the op completes; return its result; raise its `KernelFault` (or error)."""
        if not self._settled:
            assert self.marker is not None
            self.marker.sync()
        return self._complete()

    result = wait

    def _complete(self) -> Any:
        if not self._completed:
            self._settle()
            with self._lock:
                if not self._completed:
                    self._completed = True
                    op = self.op
                    assert op is not None  # (let go of only here, once)
                    try:
                        if self.error is not None:
                            raise self.error
                        fault = _take_fault(self.kernels)
                        if fault is not None:
                            raise fault
                        self._value = op._collect()
                    except BaseException as e:  # noqa: BLE001
                        self._fault = e
                    finally:  # the op keeps its handle: holding the op no longer makes a cycle
                        self._what = op.describe()
                        self.op = None
        if self._fault is not None:
            raise self._fault
        return self._value

    def __await__(self) -> Generator[Any, None, Any]:
        return self._wait_async().__await__()

    async def _wait_async(self) -> Any:
        asyncio = lazy.asyncio()  # (loaded already: an event loop awaits this)
        delay = 0.0
        spins = 0
        while True:
            await asyncio.sleep(delay)  # never blocks the event loop; and yields once even when done
            if self.poll():
                return self._complete()
            spins += 1
            if spins > 8:
                delay = min(2e-3, max(5e-5, delay * 2))


def _survey(op: Op) -> tuple[tuple[Use, ...], list[LoadedKernel]]:
    """In one walk of `op`'s leaves: the memory it uses, one use per range (a writer wins, as
    `inflight` registers it), and its kernels.  A kernel op's uses are read from its specs,
    so no `Use` is made for a range already seen (a chain over two buffers makes two)."""
    found: dict[tuple[int, int, int], Use] = {}
    kernels: dict[int, LoadedKernel] = {}
    specs: set[int] = set()  # kernel ops' specs seen (the op memo shares one between ops of a launcher's same arguments)
    new = tuple.__new__  # `Use(...)` without its Python-level `__new__`
    for leaf in op.leaves():
        spec = getattr(leaf, "spec", None)  # a kernel op: (key, writes, label, argument index)
        if spec is not None and id(spec) in specs:
            continue  # the same launcher (so kernel) and memory as a kernel op seen already
        lk = leaf.loaded
        if lk is not None and id(lk) not in kernels:
            kernels[id(lk)] = lk
        if spec is not None:
            specs.add(id(spec))
            args = leaf.args  # type: ignore[attr-defined]
            for key, w, label, k in spec:
                prev = found.get(key)
                if prev is None or (w and not prev.writes):
                    found[key] = new(Use, (*key, w, label, args[k]))
            continue
        for u in leaf._uses:
            key = (u.space, u.lo, u.hi)
            prev = found.get(key)
            if prev is None or (u.writes and not prev.writes):
                found[key] = u
    return tuple(found.values()), list(kernels.values())


def _kernels_of(op: Op) -> list[LoadedKernel]:
    seen: dict[int, LoadedKernel] = {}
    for leaf in op.leaves():
        if leaf.loaded is not None:
            seen.setdefault(id(leaf.loaded), leaf.loaded)
    return list(seen.values())


def _take_fault(kernels: list[LoadedKernel]) -> KernelFault | None:
    """The first fault recorded by these kernels, each on its own device (their slots are
    reset); None when there is none."""
    first: KernelFault | None = None
    for lk in kernels:
        if lk.device.kind != "cuda":
            if not ctypes.c_uint32.from_address(lk.fault_address).value:
                continue  # (host memory on the CPU backend: the record's count, read in place) no fault
        elif not lk.may_fault:
            continue  # its code has no fault path (runtime/faults.py `can_fault`): nothing to read back
        rec = np.zeros(1, dtype=RECORD)
        S.read_device_bytes(lk.device, rec, lk.fault_address, FAULT_RECORD_BYTES)
        if int(rec["count"][0]):
            S.zero_device_bytes(lk.device, lk.fault_address, FAULT_RECORD_BYTES)
            if first is None:
                first = _fault(lk.compiled, rec[0])
    return first

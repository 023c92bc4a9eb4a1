"""Capture an operation once, replay it many times: `graph = az.capture(op)`, `graph.replay(...)`.

    graph = az.capture(step1.then(step2))        # the op is handed to the graph
    graph.replay()                               # same arrays as captured
    graph.replay(a2, b2, c2)                     # new arrays: same shapes, dtypes and device

`graph.args` lists the op's arrays (Buffers and NumPy arrays) in first-use order;
`replay` takes replacements in that order.  The result is the op's result (for a
`to_host_op`, a fresh copy each replay).

On a GPU the op's work is captured from its streams (driver stream capture) into a
CUDA graph and instantiated.  Replaying with new arrays re-validates the op with them
(every launch check runs again) and captures a graph for that set of addresses; the
executable graphs are cached per address set (the last `CACHE_SIZE`), so alternating
between buffer sets replays without re-capturing.  A replay is ordered on the
device's stream.  Copies inside a graph need pinned host arrays (`az.pinned_empty`).

On the CPU backend the same API re-runs the recorded ops with the new arrays,
synchronously.

An op that spans devices captures into one graph whose nodes run on their own devices
(each device's part is captured from a capture pool of that device, joined by events);
a replay waits for every one of those devices' streams and is ordered on the first's.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from anodize.language.errors import ArgumentError, LaunchError
from anodize.runtime import (
    copy_ops,
    inflight,
    lazy,
    ops as O,
    streams as S,
    submission as Sub,
)
from anodize.runtime.args import describe_value
from anodize.runtime.buffer import Buffer
from anodize.runtime.combinators import host_step
from anodize.runtime.lazy import check_cu

if TYPE_CHECKING:
    from anodize.runtime.device import Device

__all__ = ["Graph", "capture"]

CACHE_SIZE = 8


def capture(op: O.Op) -> Graph:
    """Capture `op` (not yet started) as a replayable graph."""
    if not isinstance(op, O.Op):
        raise ArgumentError(
            f"`az.capture` takes an anodize op, got {type(op).__qualname__}",
            help="build one with `kernel[cfg].op(...)`, `dev.copy_op(...)`, `.then(...)` or `az.gather(...)`",
        )

    step = host_step(op)
    if step is not None:
        raise LaunchError(
            f"a captured graph cannot hold a step that waits for the host ({step.describe()})",
            help="capture the device part only, and run the host step after `graph.replay()`",
        )
    return Graph(op)


def _arguments(op: O.Op) -> list[tuple[Any, str]]:
    """The op's arrays (Buffers, NumPy arrays), first use first, each with a label for messages."""
    seen: dict[int, tuple[Any, str]] = {}
    for leaf in op.leaves():
        if isinstance(leaf, O.KernelOp):
            for p, a in zip(leaf.plan.params, leaf.args, strict=True):
                if p.is_slice and isinstance(a, (Buffer, np.ndarray)):
                    seen.setdefault(id(a), (a, f"`{p.name}` of kernel `{leaf.plan.name}`"))
        elif isinstance(leaf, copy_ops.CopyOp):
            seen.setdefault(id(leaf.src), (leaf.src, f"the source of {leaf.describe()}"))
            if not isinstance(leaf, copy_ops.ToHostOp):  # its array is the graph's own
                seen.setdefault(id(leaf.dst), (leaf.dst, f"the destination of {leaf.describe()}"))
    return list(seen.values())


def _signature(x: Any) -> tuple[Any, ...]:
    if isinstance(x, Buffer):
        return ("buffer", id(x.device), x.shape, x.dtype)
    return ("host", tuple(x.shape), x.dtype)


def _describe(x: Any) -> str:
    return describe_value(x)


def _addr(x: Any) -> int:
    return x.ptr if isinstance(x, Buffer) else int(x.ctypes.data)


class _Entry:
    """One instantiated CUDA graph: for one set of argument addresses."""

    def __init__(self, tree: O.Op, exe: Any):
        self.tree = tree
        self.exe = exe
        self.used = tree.uses()
        self.kernels = Sub._kernels_of(tree)
        self.devices = tree.devices()
        self.last: Sub.Handle | None = None

    def destroy(self) -> None:
        driver = lazy.cuda_driver()

        if self.last is not None and not self.last.poll():
            assert self.last.marker is not None
            self.last.marker.sync()
        if self.exe is not None:
            driver.cuGraphExecDestroy(self.exe)
            self.exe = None


class Graph:
    """A captured op; `replay(*args)` runs it again, optionally with new arrays."""

    def __init__(self, op: O.Op):
        op._claim(self)
        Sub.release_holds(op)  # replays register their arrays themselves
        self.device: Device = op.device
        self._template = op
        found = _arguments(op)
        self.args: tuple[Any, ...] = tuple(a for a, _ in found)
        self._labels = tuple(label for _, label in found)
        self._sigs = tuple(_signature(a) for a in self.args)
        self.kernel_count = sum(1 for leaf in op.leaves() if isinstance(leaf, O.KernelOp))
        self._cache: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._template_used = False
        if self.device.kind == "cuda":
            self._entry(self.args)  # capture now: errors surface at `az.capture`

    def __repr__(self) -> str:
        return f"<anodize Graph of {self._template.describe()}, {len(self.args)} arrays, on {self.device.describe()}>"

    # -- replay ---------------------------------------------------------------------------
    def replay(self, *args: Any, stream: Any = None, wait: bool = True) -> Any:
        """Run the captured work again (with `args` replacing `graph.args`, if given).

        `wait=True` returns the result (raising any `KernelFault`); `wait=False` returns a
        handle to `wait()` on or `await` (on the CPU backend the work has already run)."""
        bound = self._bind(args)
        dev = self.device
        if dev.kind != "cuda":
            mapping = {id(t): a for t, a in zip(self.args, bound, strict=True)}
            tree = self._template._rebind(mapping)
            handle = Sub._start(tree, S.device_lanes(dev))
            return handle.wait() if wait else handle
        return self._replay_gpu(bound, stream, wait)

    def _bind(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        if not args:
            return self.args
        if len(args) != len(self.args):
            listing = "; ".join(f"{k}: {label}" for k, label in enumerate(self._labels))
            raise ArgumentError(
                f"`replay` takes the graph's {len(self.args)} arrays in order, got {len(args)}",
                help=f"the arrays are ({listing}); pass all of them, or none to reuse the captured ones",
            )
        for k, (a, sig, label) in enumerate(zip(args, self._sigs, self._labels, strict=True)):
            if not isinstance(a, (Buffer, np.ndarray)) or _signature(a) != sig:
                raise ArgumentError(
                    f"`replay` argument {k} ({label}) must match the captured array, "
                    f"{_describe(self.args[k])}; got {_describe(a)}",
                    help="a replay takes arrays of the same kind, shape, dtype and device",
                )
        return tuple(args)

    def _entry(self, args: tuple[Any, ...]) -> _Entry:
        key = tuple(_addr(a) for a in args)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        if not self._template_used and args is self.args:
            tree = self._template
            self._template_used = True
        else:
            mapping = {id(t): a for t, a in zip(self.args, args, strict=True)}
            tree = self._template._rebind(mapping)  # every launch check runs again
        for leaf in tree.leaves():
            if isinstance(leaf, copy_ops.ToHostOp):
                leaf.copy_result = True
        entry = _Entry(tree, _capture_gpu(tree))
        self._cache[key] = entry
        while len(self._cache) > CACHE_SIZE:
            _, old = self._cache.popitem(last=False)
            old.destroy()
        return entry

    def _replay_gpu(self, args: tuple[Any, ...], stream: Any, wait: bool) -> Any:
        driver = lazy.cuda_driver()

        dev = self.device
        S.ensure_current(dev)
        entry = self._entry(args)
        # (launches of one executable graph are ordered behind each other by the driver)
        # (`entry.used` holds the captured arrays: the same memory as `args`, kept alive by the cache)
        handle = Sub.Handle(entry.tree, used=entry.used, kernels=entry.kernels)
        lane = Sub._lane_for(dev, stream)
        earlier = inflight.begin(handle, handle.used)
        try:
            assert isinstance(lane, S.GpuLane)
            for e in earlier:
                lane.wait(e.marker)
            for d in entry.devices:  # work queued on each device's own stream comes first
                d_lane = S.device_lane(d)
                if lane is not d_lane:
                    lane.wait(d_lane.record())
                d.faults.dirty = True  # a later dev.check() reads the fault records too
            S.ensure_current(dev)  # (recording on other devices' streams switched the context)
            check_cu(driver.cuGraphLaunch(entry.exe, lane.cu), "cuGraphLaunch")
            done = lane.record()
        except BaseException:
            inflight.end(handle)
            raise
        handle.marker = done
        entry.last = handle
        return handle.wait() if wait else handle

    def close(self) -> None:
        """Destroy the executable graphs (waits for replays in flight)."""
        for entry in self._cache.values():
            entry.destroy()
        self._cache.clear()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


_CAPTURE_POOLS: dict[int, S.StreamPool] = {}


def _capture_pool(dev: Device) -> S.StreamPool:
    """The private pool a device's part of a graph is captured on (made once per device)."""
    pool = _CAPTURE_POOLS.get(id(dev))
    if pool is None:
        pool = _CAPTURE_POOLS[id(dev)] = S.StreamPool(dev, S.DEFAULT_POOL_SIZE)
    return pool


def _capture_gpu(tree: O.Op) -> Any:
    """Stream-capture `tree`'s work on a private pool and instantiate it; returns the CUgraphExec."""
    driver = lazy.cuda_driver()

    dev = tree.device
    S.ensure_current(dev)
    pool = _capture_pool(dev)
    with pool._lock:
        origin = pool.first_lane()
        assert isinstance(origin, S.GpuLane)
        scratch = Sub.Handle(tree, used=(), kernels=[])
        mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        check_cu(driver.cuStreamBeginCapture(origin.cu, mode), "cuStreamBeginCapture")
        failure: BaseException | None = None
        try:
            ctx = Sub._Ctx(pool, scratch, [], capturing=True, others=_capture_pool)
            lane, pend = tree._emit(ctx, origin)
            for m in pend:
                lane.wait(m)
            if lane is not origin:  # it ended on another device's lane: join it back before the end
                origin.wait(lane.record())
        except BaseException as e:  # noqa: BLE001 - end the capture first, then re-raise
            failure = e
        err, graph = driver.cuStreamEndCapture(origin.cu)
        if failure is not None:
            if err == driver.CUresult.CUDA_SUCCESS and graph is not None:
                driver.cuGraphDestroy(graph)
            raise failure
        check_cu((err, graph), "cuStreamEndCapture")
        try:
            exe = check_cu(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        finally:
            driver.cuGraphDestroy(graph)
    if scratch.finalizers or scratch.keep:  # pragma: no cover - capture refuses staging
        raise LaunchError("internal error: a captured copy needed a staging buffer")
    return exe

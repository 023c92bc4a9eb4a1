"""Where asynchronous work runs: lanes, completion markers, `StreamPool` and pinned host memory.

A *lane* is an in-order queue of device work; a *marker* is a point in a lane that
other lanes can wait for and the host can poll (`is_done`) or wait on (`sync()`).

* GPU: a lane is a CUDA stream and a marker a CUDA event
  (`stream.record()`, `stream.wait(event)`, `event.is_done`).
* CPU backend, pool: a lane is a worker thread with a FIFO queue, and a marker a
  `threading.Event` set when the worker reaches it.
* CPU backend, inline (`op.run()`): the calling thread; work runs at once.

`StreamPool(dev, n)` owns `n` lanes.  Host memory for overlapped copies must be
page-locked on a GPU (`pinned_empty`): a copy from pageable memory makes the
driver synchronise.
"""

from __future__ import annotations

import ctypes
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from anodize.language.errors import ArgumentError, LaunchError
from anodize.runtime import inflight as _inflight, lazy
from anodize.runtime.buffer import normalize_shape, resolve_dtype
from anodize.runtime.deferred import settle
from anodize.runtime.device import _GPUS, Device as _Device, device as _device
from anodize.runtime.lazy import check_cu

if TYPE_CHECKING:
    from anodize.runtime.device import Device

__all__ = ["StreamPool", "Lane", "Marker", "pinned_empty", "staging_empty", "is_pinned", "device_lane", "device_lanes", "order_launch", "default_pool"]


class Marker(Protocol):
    @property
    def is_done(self) -> bool: ...

    def sync(self) -> None: ...


class Runner(Protocol):
    """What a lane runs CPU work for: skips the work once the run has failed, records errors."""

    def run_item(self, fn: Callable[[], None]) -> None: ...


class CpuMarker:
    """A marker on a CPU lane: set when the lane's worker reaches it (`lane`: the lane it was
    recorded on, None for the calling thread's)."""

    __slots__ = ("_ev", "lane")

    def __init__(self, done: bool = False, lane: Lane | None = None):
        self._ev = threading.Event()
        self.lane = lane
        if done:
            self._ev.set()

    @property
    def is_done(self) -> bool:
        return self._ev.is_set()

    def set(self) -> None:
        self._ev.set()

    def sync(self) -> None:
        ev = self._ev
        if not ev.is_set():  # (`Event.wait` takes its condition's lock even when set)
            ev.wait()


_DONE = CpuMarker(done=True)  # what the calling thread's lane records: set for good


class Lane:
    """An in-order queue of device work (one CUDA stream, or one CPU worker) of one device."""

    is_gpu = False
    device: Device | None = None  # the device whose work it queues (set by whoever makes the lane)

    def record(self) -> Marker:
        raise NotImplementedError

    def wait(self, marker: Marker) -> None:
        raise NotImplementedError

    def submit(self, runner: Runner, fn: Callable[[], None]) -> None:
        """Queue host-side work (the CPU backend's kernels and copies)."""
        raise NotImplementedError


class InlineLane(Lane):
    """The calling thread: CPU work runs at once (`op.run()` on the CPU backend)."""

    def record(self) -> Marker:
        return _DONE  # the work before it has run already

    def wait(self, marker: Marker) -> None:
        marker.sync()

    def submit(self, runner: Runner, fn: Callable[[], None]) -> None:
        runner.run_item(fn)


class WorkerLane(Lane):
    """A CPU worker thread with a FIFO queue: work submitted to it is truly deferred."""

    def __init__(self, name: str):
        self._q: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=_worker, args=(self._q,), name=name, daemon=True)
        self._thread.start()
        weakref.finalize(self, self._q.put, None)

    def record(self) -> Marker:
        m = CpuMarker(lane=self)
        self._q.put(m.set)
        return m

    def wait(self, marker: Marker) -> None:
        if getattr(marker, "lane", None) is self:
            return  # recorded on this lane: its FIFO order already puts the work after it
        self._q.put(marker.sync)

    def submit(self, runner: Runner, fn: Callable[[], None]) -> None:
        self._q.put(lambda: runner.run_item(fn))

    def close(self) -> None:
        self._q.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join()


def _worker(q: queue.SimpleQueue[Callable[[], None] | None]) -> None:
    while True:
        item = q.get()
        if item is None:
            return
        item()  # run_item catches the work's errors; markers never raise


class CudaMarker:
    """A CUDA event recorded on a stream (driver API, so it also works inside stream capture);
    `stream`: the handle of the stream it was recorded on."""

    __slots__ = ("event", "stream")

    def __init__(self, stream_cu: Any, stream: int = -1):
        driver = lazy.cuda_driver()

        self.stream = stream
        self.event = check_cu(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        check_cu(driver.cuEventRecord(self.event, stream_cu), "cuEventRecord")

    @property
    def is_done(self) -> bool:
        driver = lazy.cuda_driver()

        err = driver.cuEventQuery(self.event)[0]
        if err == driver.CUresult.CUDA_ERROR_NOT_READY:
            return False
        check_cu((err, None), "cuEventQuery")
        return True

    def sync(self) -> None:
        driver = lazy.cuda_driver()

        ev = self.event
        wait_gpu(lambda: driver.cuEventQuery(ev), lambda: driver.cuEventSynchronize(ev), "cuEventSynchronize")

    def __del__(self) -> None:
        try:
            driver = lazy.cuda_driver()

            driver.cuEventDestroy(self.event)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


class GpuLane(Lane):
    """A CUDA stream (cuda.core `Stream`)."""

    is_gpu = True

    def __init__(self, device: Device, stream: Any):
        driver = lazy.cuda_driver()

        self.device = device
        self.stream = stream
        self.handle = int(stream.handle)
        self.cu = driver.CUstream(self.handle)

    def record(self) -> Marker:
        ensure_current(self.device)
        return CudaMarker(self.cu, self.handle)

    def wait(self, marker: Marker) -> None:
        """Order this stream's later work after `marker`; nothing to queue when the marker was
        recorded on this very stream (stream order already does it: no event wait)."""
        if not isinstance(marker, CudaMarker):  # a future (runtime/deferred.py): its real markers

            for m in settle([marker]):
                self.wait(m)
            return
        if marker.stream == self.handle:
            return
        driver = lazy.cuda_driver()

        check_cu(driver.cuStreamWaitEvent(self.cu, marker.event, 0), "cuStreamWaitEvent")

    def submit(self, runner: Runner, fn: Callable[[], None]) -> None:  # pragma: no cover - GPU lanes queue CUDA work
        raise LaunchError("internal error: host work queued on a CUDA stream")

    # -- CUDA work, queued on this stream ---------------------------------------------------
    def launch(self, cu_config: Any, handle: Any, args: list[Any]) -> None:
        launch = lazy.cuda_core().launch

        launch(self.stream, cu_config, handle, *args)

    def copy(self, kind: str, dst: int, src: int, nbytes: int) -> None:
        driver = lazy.cuda_driver()

        if not nbytes:
            return
        ensure_current(self.device)  # type: ignore[arg-type]
        if kind == "h2d":
            check_cu(driver.cuMemcpyHtoDAsync(dst, src, nbytes, self.cu), "cuMemcpyHtoDAsync")
        elif kind == "d2h":
            check_cu(driver.cuMemcpyDtoHAsync(dst, src, nbytes, self.cu), "cuMemcpyDtoHAsync")
        else:
            check_cu(driver.cuMemcpyDtoDAsync(dst, src, nbytes, self.cu), "cuMemcpyDtoDAsync")


_CURRENT = threading.local()


def ensure_current(dev: Device) -> None:
    """Make `dev`'s CUDA context current on this thread.

    With one GPU in the process, once per thread.  Once a second GPU device exists,
    every time (`cuCtxSetCurrent`, a thread-local store): work switches between devices,
    and another library (CuPy, PyTorch) may have switched the context meanwhile."""
    if dev.kind != "cuda":
        return
    make = getattr(dev, "_make_current", None)
    if make is not None and _several_gpus():
        make()
        return
    done: set[int] | None = getattr(_CURRENT, "devices", None)
    if done is None:
        done = _CURRENT.devices = set()
    if dev.index not in done:
        dev._cu.set_current()  # type: ignore[attr-defined]
        done.add(dev.index)


def _several_gpus() -> bool:
    return len(_GPUS) > 1


_DEVICE_LANES: dict[int, Lane] = {}


def device_lane(dev: Device) -> Lane:
    """The device's own stream as a lane (GPU), or the calling thread (CPU backend)."""
    lane = _DEVICE_LANES.get(id(dev))
    if lane is None:
        lane = GpuLane(dev, dev.stream) if dev.kind == "cuda" else InlineLane()
        lane.device = dev
        _DEVICE_LANES[id(dev)] = lane
    return lane


_DEVICE_SINGLE: dict[int, SingleLane] = {}


def device_lanes(dev: Device) -> SingleLane:
    """The device's own lane as the one lane of a submission (`op.run()`): made once per
    device, so its lock is shared like a pool's by the submissions queued on that lane."""
    lanes = _DEVICE_SINGLE.get(id(dev))
    if lanes is None:
        lanes = _DEVICE_SINGLE[id(dev)] = SingleLane(dev, device_lane(dev))
    return lanes


def order_launch(dev: Device, uses: tuple[_inflight.Use, ...]) -> None:
    """Order a plain `kernel[cfg](...)` launch (or a `copy_to`) on `dev` after the in-flight work it
    conflicts with (runtime/inflight.py `launch_conflicts`).

    A launch that writes memory an in-flight operation uses, or uses memory one writes,
    waits for that operation on the device's own lane: a stream-side wait on a GPU (the
    host does not block), the operation's completion on the CPU backend.  Without this, a
    plain launch could race with submitted work across streams."""
    markers = _inflight.launch_conflicts(uses)
    if markers:
        lane = device_lane(dev)
        for marker in markers:
            lane.wait(marker)


class StreamPool:
    """`n` lanes (CUDA streams, or CPU worker threads) for independent branches of work.

        pool = az.StreamPool(dev, 4)
        handle = az.gather(op1, op2).submit(pool)   # branches on different streams
        result = handle.wait()                       # or `await handle`

    Each submission starts on the next lane (round robin); `az.gather` branches go
    to the lanes after it.  Cross-lane dependencies are events.
    """

    def __init__(self, device: Device | int | str | None = None, n: int = 2):
        dev = device if isinstance(device, _Device) else _device(device)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ArgumentError(f"a StreamPool needs a positive number of streams, got {n!r}")
        self.device = dev
        self.n = n
        self._lock = threading.RLock()
        self._next = 0
        self._closed = False
        self.lanes: list[Lane]
        if dev.kind == "cuda":
            StreamOptions = lazy.cuda_core().StreamOptions

            ensure_current(dev)
            # Blocking streams, like the device's own: ordered after the legacy default
            # stream, where CuPy and PyTorch queue work by default.
            self.lanes = [
                GpuLane(dev, dev._cu.create_stream(options=StreamOptions(nonblocking=False)))  # type: ignore[attr-defined]
                for _ in range(n)
            ]
        else:
            self.lanes = [WorkerLane(f"anodize-cpu-lane-{k}") for k in range(n)]
            for lane in self.lanes:
                lane.device = dev

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"<anodize StreamPool of {self.n} on {self.device.describe()}>"

    @property
    def streams(self) -> list[Any]:
        """The cuda.core Streams (GPU); an empty list on the CPU backend."""
        return [lane.stream for lane in self.lanes if isinstance(lane, GpuLane)]

    def first_lane(self) -> Lane:
        """The lane a new submission starts on (round robin)."""
        self._check_open()
        lane = self.lanes[self._next % self.n]
        self._next += 1
        return lane

    def other_lane(self, busy: Lane) -> Lane:
        """A lane for another branch: the next one in turn, avoiding `busy` when there is a choice."""
        lane = self.lanes[self._next % self.n]
        self._next += 1
        if lane is busy and self.n > 1:
            lane = self.lanes[self._next % self.n]
            self._next += 1
        return lane

    def synchronize(self) -> None:
        """Wait until every lane has finished what was queued on it so far."""
        for lane in self.lanes:
            lane.record().sync()

    def close(self) -> None:
        """Finish queued work and release the lanes (CPU workers stop)."""
        if self._closed:
            return
        self.synchronize()
        self._closed = True
        for lane in self.lanes:
            if isinstance(lane, WorkerLane):
                lane.close()

    def __enter__(self) -> StreamPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise LaunchError("this StreamPool is closed", help="create a new `az.StreamPool(dev, n)`")


class SingleLane:
    """One lane used for everything (what `op.run()` schedules on)."""

    first_lane_after = None  # (a dependency-following policy's lanes pick the first lane)

    def __init__(self, device: Device, lane: Lane):
        self.device = device
        self.lane = lane
        self._lock = threading.RLock()

    def first_lane(self) -> Lane:
        return self.lane

    def other_lane(self, busy: Lane) -> Lane:
        return self.lane


_DEFAULT_POOLS: dict[int, StreamPool] = {}
DEFAULT_POOL_SIZE = 4


def default_pool(dev: Device) -> StreamPool:
    """The pool `await op` submits to when the op was not submitted yet (4 lanes, made once)."""
    pool = _DEFAULT_POOLS.get(id(dev))
    if pool is None:
        pool = _DEFAULT_POOLS[id(dev)] = StreamPool(dev, DEFAULT_POOL_SIZE)
    return pool


# ---- pinned host memory ---------------------------------------------------------------------


class _PinnedBlock:
    """Page-locked host memory from `cuMemHostAlloc`, freed when the last array over it goes."""

    def __init__(self, nbytes: int, shape: tuple[int, ...], dtype: np.dtype, dev: Device | None = None):
        driver = lazy.cuda_driver()

        self.nbytes = nbytes
        self.device = dev  # the device whose context pinned it (`is_pinned` trusts it there without asking)
        self.ptr = int(check_cu(driver.cuMemHostAlloc(max(nbytes, 1), 0), "cuMemHostAlloc"))
        self.__array_interface__ = {
            "shape": shape,
            "typestr": dtype.str,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
        }

    def __del__(self) -> None:
        try:
            driver = lazy.cuda_driver()

            driver.cuMemFreeHost(self.ptr)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


def pinned_empty(dev: Device, shape: int | tuple[int, ...], dtype: object) -> np.ndarray:
    """An uninitialised NumPy array in page-locked host memory (plain memory on the CPU backend).

    Copies between it and a GPU overlap with kernels; a copy from pageable memory
    makes the driver stage it and synchronise.
    """
    shp = normalize_shape(shape)
    scalar = resolve_dtype(dtype)
    if dev.kind != "cuda":
        return np.empty(shp, dtype=scalar.dtype)
    ensure_current(dev)
    n = scalar.dtype.itemsize
    for s in shp:
        n *= s
    return np.asarray(_PinnedBlock(n, shp, scalar.dtype, dev))


STAGING_CACHE_BYTES = 1 << 30  # pinned staging memory kept for reuse per device, at most


class _StagingLease:
    """A staging array's base: a pinned block of the device's staging cache, given back to the
    cache (not freed) when the last array over it goes, i.e. once the copy that used it is
    complete (a submission keeps its staging arrays until then: `Handle.keep`, `staged`)."""

    def __init__(self, dev: Device, block: _PinnedBlock, shape: tuple[int, ...], dtype: np.dtype):
        self._dev = dev
        self._block = block
        self.__array_interface__ = {**block.__array_interface__, "shape": shape, "typestr": dtype.str}

    def __del__(self) -> None:
        cache = getattr(self._dev, "_staging", None)
        if cache is not None and cache[0] + self._block.nbytes <= STAGING_CACHE_BYTES:
            cache[0] += self._block.nbytes  # (under the GIL: at worst the cap is passed by a block)
            cache[1].setdefault(self._block.nbytes, []).append(self._block)


def staging_empty(dev: Device, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A pinned array for staging one copy of pageable host memory: a block of the device's
    staging cache (sizes rounded up to a power of two, at least 64 KiB), or a new one.
    Reusing blocks keeps `cuMemHostAlloc` (slow) and `cuMemFreeHost` (which synchronises the
    device) out of a pipeline that copies pageable arrays chunk by chunk."""
    n = dtype.itemsize
    for x in shape:
        n *= x
    size = max(1 << 16, 1 << max(0, n - 1).bit_length())
    cache = getattr(dev, "_staging", None)
    if cache is None:
        cache = dev._staging = [0, {}]  # type: ignore[attr-defined]
    try:
        block = cache[1].get(size, []).pop()
        cache[0] -= size
    except IndexError:
        ensure_current(dev)
        block = _PinnedBlock(size, (size,), np.dtype(np.uint8), dev)
    return np.asarray(_StagingLease(dev, block, shape, dtype))


def is_pinned(dev: Device, arr: np.ndarray) -> bool:
    """True when `arr`'s memory is page-locked and known to the driver (always True on the CPU backend)."""
    if dev.kind != "cuda":
        return True
    if arr.nbytes == 0:
        return True
    owner: Any = arr
    while isinstance(owner, np.ndarray):  # a view of `pinned_empty`/staging memory of this device: no driver query
        owner = owner.base
    if isinstance(owner, _StagingLease):
        owner = owner._block
    if isinstance(owner, _PinnedBlock) and owner.device is dev:
        return True
    driver = lazy.cuda_driver()

    ensure_current(dev)
    err, mtype = driver.cuPointerGetAttribute(
        driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, arr.ctypes.data
    )
    return bool(err == driver.CUresult.CUDA_SUCCESS and int(mtype) == int(driver.CUmemorytype.CU_MEMORYTYPE_HOST))


# ---- fault records, read without waiting for anything else --------------------------------

_FAULT_STREAMS: dict[int, Any] = {}


def read_device_bytes(dev: Device, out: np.ndarray, ptr: int, nbytes: int) -> None:
    """Copy device bytes to `out` on a private stream, so nothing queued elsewhere is waited for."""
    if dev.kind != "cuda":
        ctypes.memmove(out.ctypes.data, ptr, nbytes)
        return
    driver = lazy.cuda_driver()

    ensure_current(dev)
    s = _fault_stream(dev)
    check_cu(driver.cuMemcpyDtoHAsync(out.ctypes.data, ptr, nbytes, s), "cuMemcpyDtoHAsync")
    check_cu(driver.cuStreamSynchronize(s), "reading fault records")


def zero_device_bytes(dev: Device, ptr: int, nbytes: int) -> None:
    if dev.kind != "cuda":
        ctypes.memset(ptr, 0, nbytes)
        return
    driver = lazy.cuda_driver()

    ensure_current(dev)
    s = _fault_stream(dev)
    check_cu(driver.cuMemsetD8Async(ptr, 0, nbytes, s), "cuMemsetD8Async")
    check_cu(driver.cuStreamSynchronize(s), "resetting fault records")


def _fault_stream(dev: Device) -> Any:
    s = _FAULT_STREAMS.get(id(dev))
    if s is None:
        driver = lazy.cuda_driver()

        flags = driver.CUstream_flags.CU_STREAM_NON_BLOCKING
        s = _FAULT_STREAMS[id(dev)] = check_cu(driver.cuStreamCreate(flags), "cuStreamCreate")
    return s


# ---- waiting for the GPU, interruptibly ---------------------------------------------------------

WAIT_SPIN_SECONDS = 200e-6  # a wait shorter than this is a few queries: no thread, no sleep
WAIT_POLL_SECONDS = 0.05  # Ctrl-C's latency in a longer wait


def wait_gpu(query: Callable[[], Any], sync: Callable[[], Any], what: str) -> None:
    """Wait for a stream or event (`query`: cuStreamQuery/cuEventQuery; `sync`: the blocking call)
    so that Ctrl-C interrupts it: a short wait spins on `query`; a longer one runs `sync` on a
    helper thread while this thread waits on an event a slice at a time, where a
    KeyboardInterrupt lands within WAIT_POLL_SECONDS.  After an interrupt the GPU work goes on
    to its end (a kernel cannot be cancelled): its outputs are undefined until it does, later
    work on the stream queues behind it, and the device stays usable (docs/async.md)."""
    driver = lazy.cuda_driver()

    not_ready = driver.CUresult.CUDA_ERROR_NOT_READY
    end = time.perf_counter() + WAIT_SPIN_SECONDS
    while True:
        err = query()[0]
        if err != not_ready:
            check_cu((err, None), what)
            # the blocking call too, now that it returns at once: the driver flushes the kernels'
            # `print` output (the device's printf buffer) only in a synchronising call, never in a query
            check_cu(sync(), what)
            return
        if time.perf_counter() > end:
            break
    done = threading.Event()
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(sync())
        finally:
            done.set()

    threading.Thread(target=run, name="anodize-gpu-wait", daemon=True).start()
    while not done.wait(WAIT_POLL_SECONDS):
        pass
    if out:
        check_cu(out[0], what)

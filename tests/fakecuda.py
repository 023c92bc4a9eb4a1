"""The one fake CUDA backend of the tests and benchmarks: a real `CudaDevice` with no driver behind it.

Its memory is host memory, so buffers, fault records and copies work without a GPU,
and the runtime takes its GPU paths (`kind == "cuda"`, a stream, `launch_call`).
Two levels, for two kinds of test:

* `record_launches(patch)` -> `(HostGpu, calls)`: kernels go through the real GPU
  compile path (PTX for sm_90, ptxas when present) and the runtime's GPU launch path
  runs unchanged up to cuda.core's `launch(stream, config, kernel, *args)`, whose
  arguments land in `calls`; nothing executes (tests/runtime/test_launch_fastpath.py).
  `bench/launch_microbench.py` uses `HostGpu` the same way, with a no-op `launch`.
* `install(patch)` -> `(FakeGpu, FakeDriver)`: also the cuda.bindings driver calls the
  async runtime makes (events, stream waits, async copies, pinned memory, stream
  capture, graph launch) and `cuda.core.launch` get host versions, and kernels are
  compiled for the CPU backend and run at launch.  Work runs at once, in submission
  order, so this checks the Python side of the GPU paths, not concurrency
  (tests/asyncops/test_async_fakegpu.py).

Every driver call that queues, waits or synchronises is also written to `FakeDriver.log`
as `(what, stream, ...)` (a wait names the stream its event was recorded on; an allocation
of the device's stream is `("alloc", stream)`), so a test can read the stream-level trace of
an op: which stream each copy and launch went to, and which stream waited for which.

Stream capture is modelled: work queued on a capturing stream is recorded instead of
run; an event recorded there and waited on by another stream pulls that stream into
the capture; `cuGraphLaunch` runs the recording.  Work that escapes the capture would
run at capture time and give wrong results at replay, so the tests see it.

`patch` is pytest's `monkeypatch` in tests; scripts pass `Patch()`, which just sets.
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from cuda.bindings import driver

from anodize.runtime import cuda_device
from anodize.runtime.device import CpuDevice, DeviceLimits
from anodize.runtime.faults import FaultArena

OK = driver.CUresult.CUDA_SUCCESS
BAD = driver.CUresult.CUDA_ERROR_INVALID_VALUE


class Patcher(Protocol):
    def setattr(self, target: Any, name: str, value: Any) -> None: ...


class Patch:
    """`monkeypatch.setattr` for scripts: sets for good (a benchmark process ends anyway)."""

    def setattr(self, target: Any, name: str, value: Any) -> None:
        setattr(target, name, value)


# ---- the device ---------------------------------------------------------------------------


class HostGpu(cuda_device.CudaDevice):
    """A `CudaDevice` without a driver: what `CudaDevice.__init__` sets, with host memory."""

    def __init__(self, name: str = "fake GPU") -> None:
        self._host = CpuDevice()
        self.index = 0
        self.name = name
        self.compute_capability = (9, 0)
        self.arch = "sm_90"
        self.limits = DeviceLimits(1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535), 227 * 1024)
        self._stream: Any = object()
        self._stream_h = 7
        self.faults = FaultArena(self)
        self._modules = []

    def _alloc(self, nbytes: int) -> tuple[int, object]:
        return self._host._alloc(nbytes)

    def _upload(self, ptr: int, host: np.ndarray, nbytes: int) -> None:
        self._host._upload(ptr, host, nbytes)

    def _download(self, out: np.ndarray, ptr: int, nbytes: int) -> None:
        self._host._download(out, ptr, nbytes)

    def _fill_zero(self, ptr: int, nbytes: int) -> None:
        self._host._fill_zero(ptr, nbytes)

    def check(self) -> None:
        self.faults.check()

    def load(self, compiled: Any) -> Any:
        return ("kernel handle", compiled.entry)


def record_launches(patch: Patcher) -> tuple[HostGpu, list[tuple[Any, ...]]]:
    """A fresh `HostGpu` and the list every launch's `launch(stream, config, kernel, *args)` lands in."""
    calls: list[tuple[Any, ...]] = []
    patch.setattr(cuda_device, "_cu_launch", lambda *a: calls.append(a))
    return HostGpu(), calls


# ---- the driver ---------------------------------------------------------------------------


class FakeStream:
    def __init__(self, handle: int):
        self.handle = handle


class _Props:
    multiprocessor_count = 8


class FakeCu:
    """The cuda.core `Device` of a `FakeGpu`."""

    properties = _Props()

    def __init__(self, state: FakeDriver):
        self.state = state

    def set_current(self) -> None:
        self.state.set_current_calls += 1

    def create_stream(self, options: Any = None) -> FakeStream:
        return FakeStream(self.state.new_handle())


class FakeGpu(HostGpu):
    """A `HostGpu` on a `FakeDriver`: its kernels are the CPU backend's, run at launch."""

    def __init__(self, state: FakeDriver):
        super().__init__()
        self._state = state
        self._cu = FakeCu(state)
        self._stream = FakeStream(state.new_handle())
        self._stream_h = self._stream.handle
        self._cu_stream = driver.CUstream(self._stream_h)
        self._event = FakeEvent()

    def _alloc(self, nbytes: int) -> tuple[int, object]:
        self._state.log.append(("alloc", self._stream_h))  # CudaDevice allocates on the device's stream
        return super()._alloc(nbytes)

    def launch_config(self, grid: Any, block: Any, shared: int, cooperative: bool = False, handle: Any = None) -> Any:
        if cooperative:  # the real check, on the fake driver's occupancy
            cuda_device.co_resident(grid, block, shared, *self.residency(handle, block, shared))
            self._cu.state.cooperative += 1
        return (grid, block, shared)

    def launch(self, handle: Any, config: Any, args: tuple[Any, ...]) -> None:
        grid, block, shared = config
        if isinstance(handle, CountedEntry):
            self._cu.state.counter_log.append(("launch", int(args[-1]), self._stream_h))
        run_entry(handle, grid, block, args, shared, self._stream_h)


class CountedEntry:
    """The CPU entry of a kernel compiled with a grid counter (`CompiledKernel.grid_counter`):
    it takes the counter as its last argument, records (stream, counter, the counter's value at
    launch) in `launches` and runs the kernel without it."""

    def __init__(self, entry: Any, launches: list[tuple[int, int, int]]):
        self.entry = entry
        self.launches = launches


def run_entry(handle: Any, grid: Any, block: Any, args: tuple[Any, ...], shared: int, stream: int) -> None:
    """Run a fake launch's kernel (the CPU backend's entry) with the launch's packed arguments."""
    if isinstance(handle, CountedEntry):
        counter = int(args[-1])
        handle.launches.append((stream, counter, ctypes.c_uint32.from_address(counter).value))
        handle, args = handle.entry, args[:-1]
    handle(grid, block, list(args[:-2]), args[-2], int(args[-1]), shared)


class FakeEvent:
    def __init__(self) -> None:
        self.captured = False
        self.stream: int | None = None  # the stream it was last recorded on


class FakeDriver:
    """The driver state: streams under capture, the recording, pinned blocks, counters."""

    def __init__(self) -> None:
        self._ids = itertools.count(1000)
        self.capturing: set[int] = set()
        self.recording: list[Callable[[], object]] | None = None
        self.pinned: dict[int, Any] = {}
        self.graphs: dict[int, list[Callable[[], object]]] = {}
        self.set_current_calls = 0
        self.counts: dict[str, int] = {}
        self.ready = True  # False: event queries say "not ready" (work looks in flight)
        self.blocks_per_sm = 2  # cuOccupancyMaxActiveBlocksPerMultiprocessor's answer
        self.occupancy_asks: list[tuple[int, int]] = []  # (block threads, dynamic shared bytes)
        self.cooperative = 0  # cooperative launch configs made
        # stream-ordered allocations (the grid counters, runtime/grid_counter.py): every call in
        # order as (call, address, stream); a block freed is never handed out again (the real pool
        # reuses it only after the free in stream order: here the test sees every counter distinct)
        self.counter_log: list[tuple[str, int, int]] = []
        self.live: dict[int, Any] = {}
        self.counted_launches: list[tuple[int, int, int]] = []  # CountedEntry.launches
        self.log: list[tuple[Any, ...]] = []  # (what, stream, ...): see the module docstring

    def new_handle(self) -> int:
        return next(self._ids)

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def run_or_record(self, stream: Any, fn: Callable[[], object]) -> None:
        if int(stream) in self.capturing:
            assert self.recording is not None
            self.recording.append(fn)
        else:
            fn()

    # -- the driver calls --------------------------------------------------------------------
    def cuEventCreate(self, flags: Any) -> tuple[Any, Any]:
        return OK, FakeEvent()

    def cuEventRecord(self, ev: FakeEvent, stream: Any) -> tuple[Any]:
        self._count("record")
        ev.stream = int(stream)
        self.log.append(("record", int(stream)))
        ev.captured = int(stream) in self.capturing
        return (OK,)

    def cuEventQuery(self, ev: FakeEvent) -> tuple[Any]:
        return (OK,) if self.ready else (driver.CUresult.CUDA_ERROR_NOT_READY,)

    def cuEventSynchronize(self, ev: FakeEvent) -> tuple[Any]:
        self.log.append(("event_sync", ev.stream))
        return (OK,)

    def cuEventDestroy(self, ev: FakeEvent) -> tuple[Any]:
        return (OK,)

    def cuStreamWaitEvent(self, stream: Any, ev: FakeEvent, flags: int) -> tuple[Any]:
        self._count("wait")
        self.log.append(("wait", int(stream), ev.stream))
        if ev.captured:
            self.capturing.add(int(stream))  # joins the capture
        elif int(stream) in self.capturing:
            raise AssertionError("a capturing stream waited for an event from outside the capture")
        return (OK,)

    def _copy(self, kind: str, dst: int, src: int, n: int, stream: Any) -> tuple[Any]:
        self._count(kind)
        self.log.append((kind, int(stream)))
        self.run_or_record(stream, lambda: ctypes.memmove(dst, src, n))
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst: int, src: int, n: int, stream: Any) -> tuple[Any]:
        return self._copy("h2d", dst, src, n, stream)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, n: int, stream: Any) -> tuple[Any]:
        return self._copy("d2h", dst, src, n, stream)

    def cuMemcpyDtoDAsync(self, dst: int, src: int, n: int, stream: Any) -> tuple[Any]:
        return self._copy("d2d", dst, src, n, stream)

    def cuMemsetD8Async(self, ptr: int, value: int, n: int, stream: Any) -> tuple[Any]:
        self.log.append(("memset", int(stream)))
        self.run_or_record(stream, lambda: ctypes.memset(ptr, value, n))
        return (OK,)

    def cuMemAllocAsync(self, n: int, stream: Any) -> tuple[Any, Any]:
        block = (ctypes.c_char * n)(*([b"\xff"] * n))  # not zero: the memset must do that
        ptr = ctypes.addressof(block)
        self.live[ptr] = block
        self.counter_log.append(("alloc", ptr, int(stream)))
        return OK, driver.CUdeviceptr(ptr)

    def cuMemsetD32Async(self, ptr: Any, value: int, n: int, stream: Any) -> tuple[Any]:
        p = int(ptr)
        assert p in self.live, "memset of memory not allocated"
        self.counter_log.append(("memset32", p, int(stream)))
        self.run_or_record(stream, lambda: ctypes.memmove(p, (ctypes.c_uint32 * n)(*([value] * n)), 4 * n))
        return (OK,)

    def cuMemFreeAsync(self, ptr: Any, stream: Any) -> tuple[Any]:
        p = int(ptr)
        assert p in self.live, "free of memory not allocated"
        self.counter_log.append(("free", p, int(stream)))
        return (OK,)  # the block stays alive: a replayed capture may still write it

    def cuStreamSynchronize(self, stream: Any) -> tuple[Any]:
        self.log.append(("stream_sync", int(stream)))
        assert int(stream) not in self.capturing
        return (OK,)

    def cuStreamQuery(self, stream: Any) -> tuple[Any]:
        assert int(stream) not in self.capturing
        return (OK,)

    def cuStreamCreate(self, flags: Any) -> tuple[Any, Any]:
        return OK, driver.CUstream(self.new_handle())

    def cuMemHostAlloc(self, n: int, flags: int) -> tuple[Any, int]:
        self.log.append(("host_alloc", None))
        block = (ctypes.c_char * n)()
        ptr = ctypes.addressof(block)
        self.pinned[ptr] = block
        return OK, ptr

    def cuMemFreeHost(self, ptr: int) -> tuple[Any]:
        self.log.append(("host_free", None))  # a real one synchronises the device
        self.pinned.pop(ptr, None)
        return (OK,)

    def cuPointerGetAttribute(self, attr: Any, ptr: int) -> tuple[Any, Any]:
        for base, block in self.pinned.items():
            if base <= ptr < base + ctypes.sizeof(block):
                return OK, driver.CUmemorytype.CU_MEMORYTYPE_HOST
        return BAD, 0

    def cuStreamBeginCapture(self, stream: Any, mode: Any) -> tuple[Any]:
        assert not self.capturing, "nested capture"
        self.capturing = {int(stream)}
        self.recording = []
        return (OK,)

    def cuStreamEndCapture(self, stream: Any) -> tuple[Any, Any]:
        rec = self.recording
        self.capturing = set()
        self.recording = None
        handle = self.new_handle()
        self.graphs[handle] = rec or []
        return OK, handle

    def cuGraphInstantiate(self, graph: int, flags: int) -> tuple[Any, Any]:
        exe = self.new_handle()
        self.graphs[exe] = list(self.graphs[graph])
        return OK, exe

    def cuGraphDestroy(self, graph: int) -> tuple[Any]:
        self.graphs.pop(graph, None)
        return (OK,)

    def cuGraphExecDestroy(self, exe: int) -> tuple[Any]:
        self.graphs.pop(exe, None)
        return (OK,)

    def cuGraphLaunch(self, exe: int, stream: Any) -> tuple[Any]:
        self._count("graph_launch")
        for fn in self.graphs[exe]:
            self.run_or_record(stream, fn)
        return (OK,)

    def cuCtxSynchronize(self) -> tuple[Any]:
        self.log.append(("ctx_sync", None))
        return (OK,)

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, fn: Any, threads: int, shared: int) -> tuple[Any, int]:
        self.occupancy_asks.append((threads, shared))
        return (OK, self.blocks_per_sm)

    def launch(self, stream: Any, config: Any, handle: Any, *args: Any) -> None:
        """`cuda.core.launch`."""
        self._count("launch")
        grid, block, shared = config
        s = stream.handle if isinstance(stream, FakeStream) else int(stream.handle)
        if isinstance(handle, CountedEntry):
            self.counter_log.append(("launch", int(args[-1]), int(s)))
        self.log.append(("launch", int(s)))
        self.run_or_record(s, lambda: run_entry(handle, grid, block, args, shared, int(s)))


_CALLS = (
    "cuEventCreate cuEventRecord cuEventQuery cuEventSynchronize cuEventDestroy cuStreamWaitEvent "
    "cuMemcpyHtoDAsync cuMemcpyDtoHAsync cuMemcpyDtoDAsync cuMemsetD8Async cuMemAllocAsync cuMemsetD32Async cuMemFreeAsync cuStreamSynchronize cuStreamQuery "
    "cuStreamCreate cuMemHostAlloc cuMemFreeHost cuPointerGetAttribute cuStreamBeginCapture "
    "cuStreamEndCapture cuGraphInstantiate cuGraphDestroy cuGraphExecDestroy cuGraphLaunch "
    "cuOccupancyMaxActiveBlocksPerMultiprocessor cuCtxSynchronize"
).split()


def install(patch: Patcher) -> tuple[FakeGpu, FakeDriver]:
    """A `FakeGpu` on a fresh `FakeDriver`, with the driver calls, `cuda.core.launch`, the async
    runtime's per-device tables and the compile path (CPU kernels for this device) patched."""
    import cuda.core

    from anodize.runtime import compile as rt_compile
    from anodize.runtime import graphs, streams
    from anodize.runtime import launch as rt_launch
    from anodize.runtime.compile import LoadedKernel
    from anodize.runtime.faults import can_fault

    state = FakeDriver()
    for name in _CALLS:
        patch.setattr(driver, name, getattr(state, name))
    patch.setattr(cuda.core, "launch", state.launch)
    patch.setattr(streams, "_DEVICE_LANES", {})
    patch.setattr(streams, "_DEFAULT_POOLS", {})
    patch.setattr(streams, "_FAULT_STREAMS", {})
    patch.setattr(graphs, "_CAPTURE_POOLS", {})
    patch.setattr(streams, "_CURRENT", type(streams._CURRENT)())
    dev = FakeGpu(state)
    real = rt_launch.compile_for_device

    def compile_for_device(kernel: Any, device: Any, **kw: Any) -> LoadedKernel:
        if device is not dev:
            return real(kernel, device, **kw)
        compiled = rt_compile.compile_for_cpu(kernel)
        handle: Any = compiled.cpu_entry
        if compiled.contract is not None and compiled.contract.cooperative:  # as its GPU entry: a grid counter
            compiled = dataclasses.replace(compiled, grid_counter=True)
            handle = CountedEntry(handle, state.counted_launches)
        return LoadedKernel(compiled, dev, handle, dev.faults.register(compiled), may_fault=can_fault(compiled))

    patch.setattr(rt_launch, "compile_for_device", compile_for_device)
    return dev, state

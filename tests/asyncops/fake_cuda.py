"""A fake CUDA device for CI: the GPU code paths of ops, pools and graphs, run on host memory.

`install(monkeypatch)` replaces the cuda.bindings driver calls the async runtime makes
(events, stream waits, async copies, pinned memory, stream capture, graph launch) and
`cuda.core.launch` with host versions, and returns a `FakeCudaDevice` (a CPU-backend
device whose `kind` is "cuda"; kernels are the CPU backend's).  Work runs at once, in
submission order, so this checks the Python side of the GPU paths, not concurrency.

Stream capture is modelled: work queued on a capturing stream is recorded instead of
run; an event recorded there and waited on by another stream pulls that stream into
the capture; `cuGraphLaunch` runs the recording.  Work that escapes the capture would
run at capture time and give wrong results at replay, so the tests see it.
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from cuda.bindings import driver

from anodize.runtime import compile as rt_compile
from anodize.runtime import graphs, streams
from anodize.runtime import launch as rt_launch
from anodize.runtime.compile import LoadedKernel
from anodize.runtime.device import CpuDevice

OK = driver.CUresult.CUDA_SUCCESS
BAD = driver.CUresult.CUDA_ERROR_INVALID_VALUE


class FakeStream:
    def __init__(self, handle: int):
        self.handle = handle


class _Props:
    multiprocessor_count = 8


class FakeCu:
    properties = _Props()

    def __init__(self, state: FakeDriver):
        self.state = state

    def set_current(self) -> None:
        self.state.set_current_calls += 1

    def create_stream(self, options: Any = None) -> FakeStream:
        return FakeStream(self.state.new_handle())


class FakeCudaDevice(CpuDevice):
    kind = "cuda"
    poison_empty = False  # as on a real GPU: `empty` is not poisoned

    def __init__(self, state: FakeDriver):
        super().__init__()
        self.name = "fake GPU"
        self.compute_capability = (9, 0)
        self._cu = FakeCu(state)
        self._stream = FakeStream(state.new_handle())

    @property
    def stream(self) -> Any:
        return self._stream

    def _stream_handle(self) -> int | None:
        return self._stream.handle

    def launch_config(self, grid: Any, block: Any, shared: int) -> Any:
        return (grid, block, shared)

    def launch(self, handle: Any, config: Any, args: tuple[Any, ...]) -> None:
        grid, block, shared = config
        handle(grid, block, list(args[:-2]), args[-2], int(args[-1]), shared)


class FakeEvent:
    def __init__(self) -> None:
        self.captured = False


class FakeDriver:
    """The driver state: streams under capture, the recording, pinned blocks, counters."""

    def __init__(self) -> None:
        self._ids = itertools.count(1000)
        self.capturing: set[int] = set()
        self.recording: list[Callable[[], None]] | None = None
        self.pinned: dict[int, Any] = {}
        self.graphs: dict[int, list[Callable[[], None]]] = {}
        self.set_current_calls = 0
        self.counts: dict[str, int] = {}
        self.ready = True  # False: event queries say "not ready" (work looks in flight)

    def new_handle(self) -> int:
        return next(self._ids)

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def run_or_record(self, stream: Any, fn: Callable[[], None]) -> None:
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
        ev.captured = int(stream) in self.capturing
        return (OK,)

    def cuEventQuery(self, ev: FakeEvent) -> tuple[Any]:
        return (OK,) if self.ready else (driver.CUresult.CUDA_ERROR_NOT_READY,)

    def cuEventSynchronize(self, ev: FakeEvent) -> tuple[Any]:
        return (OK,)

    def cuEventDestroy(self, ev: FakeEvent) -> tuple[Any]:
        return (OK,)

    def cuStreamWaitEvent(self, stream: Any, ev: FakeEvent, flags: int) -> tuple[Any]:
        self._count("wait")
        if ev.captured:
            self.capturing.add(int(stream))  # joins the capture
        elif int(stream) in self.capturing:
            raise AssertionError("a capturing stream waited for an event from outside the capture")
        return (OK,)

    def _copy(self, kind: str, dst: int, src: int, n: int, stream: Any) -> tuple[Any]:
        self._count(kind)
        self.run_or_record(stream, lambda: ctypes.memmove(dst, src, n))
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst: int, src: int, n: int, stream: Any) -> tuple[Any]:
        return self._copy("h2d", dst, src, n, stream)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, n: int, stream: Any) -> tuple[Any]:
        return self._copy("d2h", dst, src, n, stream)

    def cuMemcpyDtoDAsync(self, dst: int, src: int, n: int, stream: Any) -> tuple[Any]:
        return self._copy("d2d", dst, src, n, stream)

    def cuMemsetD8Async(self, ptr: int, value: int, n: int, stream: Any) -> tuple[Any]:
        self.run_or_record(stream, lambda: ctypes.memset(ptr, value, n))
        return (OK,)

    def cuStreamSynchronize(self, stream: Any) -> tuple[Any]:
        assert int(stream) not in self.capturing
        return (OK,)

    def cuStreamCreate(self, flags: Any) -> tuple[Any, Any]:
        return OK, driver.CUstream(self.new_handle())

    def cuMemHostAlloc(self, n: int, flags: int) -> tuple[Any, int]:
        block = (ctypes.c_char * n)()
        ptr = ctypes.addressof(block)
        self.pinned[ptr] = block
        return OK, ptr

    def cuMemFreeHost(self, ptr: int) -> tuple[Any]:
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

    def launch(self, stream: Any, config: Any, handle: Any, *args: Any) -> None:
        """`cuda.core.launch`."""
        self._count("launch")
        grid, block, shared = config
        s = stream.handle if isinstance(stream, FakeStream) else int(stream.handle)
        self.run_or_record(s, lambda: handle(grid, block, list(args[:-2]), args[-2], int(args[-1]), shared))


_CALLS = (
    "cuEventCreate cuEventRecord cuEventQuery cuEventSynchronize cuEventDestroy cuStreamWaitEvent "
    "cuMemcpyHtoDAsync cuMemcpyDtoHAsync cuMemcpyDtoDAsync cuMemsetD8Async cuStreamSynchronize "
    "cuStreamCreate cuMemHostAlloc cuMemFreeHost cuPointerGetAttribute cuStreamBeginCapture "
    "cuStreamEndCapture cuGraphInstantiate cuGraphDestroy cuGraphExecDestroy cuGraphLaunch"
).split()


def install(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeCudaDevice, FakeDriver]:
    import cuda.core

    state = FakeDriver()
    for name in _CALLS:
        monkeypatch.setattr(driver, name, getattr(state, name))
    monkeypatch.setattr(cuda.core, "launch", state.launch)
    monkeypatch.setattr(streams, "_DEVICE_LANES", {})
    monkeypatch.setattr(streams, "_DEFAULT_POOLS", {})
    monkeypatch.setattr(streams, "_FAULT_STREAMS", {})
    monkeypatch.setattr(graphs, "_CAPTURE_POOLS", {})
    monkeypatch.setattr(streams, "_CURRENT", type(streams._CURRENT)())
    dev = FakeCudaDevice(state)
    real = rt_launch.compile_for_device

    def compile_for_device(kernel: Any, device: Any, **kw: Any) -> LoadedKernel:
        if device is not dev:
            return real(kernel, device, **kw)
        compiled = rt_compile.compile_for_cpu(kernel)
        return LoadedKernel(compiled, dev, compiled.cpu_entry, dev.faults.register(compiled))

    monkeypatch.setattr(rt_launch, "compile_for_device", compile_for_device)
    return dev, state

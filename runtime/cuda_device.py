"""The CUDA device, through cuda.core (cuda-python).  Imported only when a GPU is requested.

Buffers come from the device's stream-ordered memory resource; copies, memsets,
launches and fault reads are all ordered on one stream per device, so a
`Buffer.to_host()` sees every earlier launch.  That stream is blocking (it
synchronises with the legacy default stream), and a foreign array's
`__cuda_array_interface__` stream is honoured with an event.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from cuda.bindings import driver
from cuda.core import (
    Device as _CuDevice,
    LaunchConfig as _CuLaunchConfig,
    Linker,
    LinkerOptions,
    ObjectCode,
    StreamOptions,
    launch as _cu_launch,
)

from anodize.language import messages
from anodize.language.diagnostics import CheckError, Span
from anodize.language.errors import LaunchError
from anodize.codegen.artifact import CompiledKernel
from anodize.runtime.device import Device, DeviceLimits
from anodize.runtime import foreign_link
from anodize.runtime.faults import FaultArena
from anodize.runtime.lazy import check_cu
from anodize.runtime.streams import ensure_current, wait_gpu

_OK = driver.CUresult.CUDA_SUCCESS


class CudaDevice(Device):
    kind = "cuda"

    def __init__(self, index: int):
        cu = _CuDevice(index)
        cu.set_current()
        self._cu = cu
        # the device's primary context (current now): `_make_current` switches to it when
        # work moves between GPUs (runtime/streams.py `ensure_current`)
        self._ctx = check_cu(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
        self.index = index
        self.name = cu.name
        cc = cu.compute_capability
        self.compute_capability = (int(cc[0]), int(cc[1]))
        self.arch = f"sm_{cu.arch}"
        p = cu.properties
        self.limits = DeviceLimits(
            p.max_threads_per_block,
            (p.max_block_dim_x, p.max_block_dim_y, p.max_block_dim_z),
            (p.max_grid_dim_x, p.max_grid_dim_y, p.max_grid_dim_z),
            p.max_shared_memory_per_block,
        )
        # A blocking stream: ordered with the legacy default stream, where CuPy and PyTorch
        # queue work by default, even for arrays whose interface carries no stream.
        self._stream = cu.create_stream(options=StreamOptions(nonblocking=False))
        self._stream_h = int(self._stream.handle)
        self._cu_stream = driver.CUstream(self._stream_h)
        self._event = check_cu(
            driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate"
        )
        self.faults = FaultArena(self)
        self._modules: list[Any] = []  # loaded ObjectCode, kept alive with the device

    @property
    def stream(self) -> Any:
        return self._stream

    def _make_current(self) -> None:
        check_cu((driver.cuCtxSetCurrent(self._ctx)[0], None), "cuCtxSetCurrent")

    def _current(self) -> None:
        """Before driver calls outside the launch path: our context, when several GPUs are in use."""
        ensure_current(self)

    def _wait(self, what: str) -> None:
        """Wait for this device's stream; Ctrl-C interrupts the wait (`streams.wait_gpu`)."""
        s = self._cu_stream
        wait_gpu(lambda: driver.cuStreamQuery(s), lambda: driver.cuStreamSynchronize(s), what)

    def check(self) -> None:
        self._current()
        self._wait("a kernel launched by anodize")
        self.faults.check()

    # -- memory ---------------------------------------------------------------------------
    def _alloc(self, nbytes: int) -> tuple[int, object]:
        self._current()
        buf = self._cu.allocate(max(nbytes, 1), stream=self._stream)
        return int(buf.handle), buf

    def _upload(self, ptr: int, host: np.ndarray, nbytes: int) -> None:
        self._current()
        if nbytes:
            check_cu(driver.cuMemcpyHtoDAsync(ptr, host.ctypes.data, nbytes, self._cu_stream), "cuMemcpyHtoD")
            self._wait("cuMemcpyHtoD")

    def _download(self, out: np.ndarray, ptr: int, nbytes: int) -> None:
        self._current()
        if nbytes:
            check_cu(driver.cuMemcpyDtoHAsync(out.ctypes.data, ptr, nbytes, self._cu_stream), "cuMemcpyDtoH")
        self._wait("a kernel launched by anodize")

    def _fill_zero(self, ptr: int, nbytes: int) -> None:
        self._current()
        check_cu(driver.cuMemsetD8Async(ptr, 0, nbytes, self._cu_stream), "cuMemsetD8")

    def _fill(self, ptr: int, nbytes: int, pattern: bytes) -> None:
        self._current()
        width = len(pattern)
        if width == 8 and pattern[:4] == pattern[4:]:
            pattern, width = pattern[:4], 4  # an 8-byte element with equal halves is a 4-byte memset
        if width == 1:
            check_cu(driver.cuMemsetD8Async(ptr, pattern[0], nbytes, self._cu_stream), "cuMemsetD8")
        elif width == 2:
            value = int.from_bytes(pattern, "little")
            check_cu(driver.cuMemsetD16Async(ptr, value, nbytes // 2, self._cu_stream), "cuMemsetD16")
        elif width == 4:
            value = int.from_bytes(pattern, "little")
            check_cu(driver.cuMemsetD32Async(ptr, value, nbytes // 4, self._cu_stream), "cuMemsetD32")
        else:  # no 8-byte memset in the driver API: upload a host copy
            host = np.frombuffer(pattern * (nbytes // width), dtype=np.uint8)
            self._upload(ptr, host, nbytes)

    def _copy_d2d(self, dst: int, src: int, nbytes: int) -> None:
        self._current()
        check_cu(driver.cuMemcpyDtoDAsync(dst, src, nbytes, self._cu_stream), "cuMemcpyDtoD")

    def _dl_device(self) -> tuple[int, int]:
        return (2, self.index)  # kDLCUDA

    def _stream_handle(self) -> int | None:
        return self._stream_h

    # -- streams shared with other libraries ----------------------------------------------
    def make_stream_wait(self, consumer_stream: int | None) -> None:
        """Order another library's stream (a handle; None: the legacy default stream, -1: none)
        after the work queued so far on ours: the converse of `wait_for_stream`."""
        if consumer_stream == -1:
            return
        handle = 1 if consumer_stream is None else int(consumer_stream)  # None: the legacy default stream
        if handle == self._stream_h:
            return
        check_cu(driver.cuEventRecord(self._event, self._cu_stream), "cuEventRecord")
        check_cu(driver.cuStreamWaitEvent(driver.CUstream(handle), self._event, 0), "cuStreamWaitEvent")

    def wait_for_stream(self, producer_stream: int) -> None:
        """Make our stream wait for the work queued so far on another library's stream."""
        if producer_stream == self._stream_h or producer_stream == 1:
            return  # ours, or the legacy default stream (our blocking stream already waits for it)
        check_cu(driver.cuEventRecord(self._event, driver.CUstream(producer_stream)), "cuEventRecord")
        check_cu(driver.cuStreamWaitEvent(self._cu_stream, self._event, 0), "cuStreamWaitEvent")

    # -- kernels --------------------------------------------------------------------------
    def load(self, compiled: CompiledKernel) -> Any:
        """Load the module (the cubin when present, else the PTX; linked with the PTX of the foreign
        device functions it calls) and return the kernel handle."""
        self._cu.set_current()
        if compiled.foreign:
            obj = link_foreign(compiled, self.arch)
        elif compiled.cubin:
            obj = ObjectCode.from_cubin(compiled.cubin, name=compiled.name)
        else:
            obj = ObjectCode.from_ptx(compiled.ptx.encode(), name=compiled.name)
        self._modules.append(obj)
        kernel = obj.get_kernel(compiled.entry)
        if compiled.dynamic_shared_bytes > 48 * 1024:  # the compiler's staging buffer (a tile GEMM on wgmma)
            _raise_shared_limit(kernel, compiled.dynamic_shared_bytes, self._cu.device_id)
        return kernel

    def launch_config(self, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, cooperative: bool = False,
                      handle: Any = None) -> Any:
        """cuda.core's launch config; `cooperative` (a contract's `cooperative=True`): a cooperative
        launch, refused (LaunchError) when the grid cannot be resident at once."""
        if cooperative:
            co_resident(grid, block, shared, *self.residency(handle, block, shared))
            return _CuLaunchConfig(grid=grid, block=block, shmem_size=shared, is_cooperative=True)
        return _CuLaunchConfig(grid=grid, block=block, shmem_size=shared)

    def residency(self, handle: Any, block: tuple[int, int, int], shared: int) -> tuple[int, int]:
        """(SMs, blocks of `handle` resident on one SM at once) at this block and dynamic shared size."""
        fn = getattr(handle, "handle", handle)
        if isinstance(fn, driver.CUkernel):  # cuda.core loads through the library API
            fn = check_cu(driver.cuKernelGetFunction(fn), "cuKernelGetFunction")
        per_sm = check_cu(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, block[0] * block[1] * block[2], shared),
                          "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return int(self._cu.properties.multiprocessor_count), int(per_sm)

    def launch(self, handle: Any, config: Any, args: tuple[Any, ...]) -> None:
        _cu_launch(self._stream, config, handle, *args)

    def launch_call(self, handle: Any, config: Any) -> tuple[Any, tuple[Any, ...]]:
        """`(call, prefix)` for the launch fast path: `call(*prefix, *args)` is `launch(handle, config, args)`
        with the stream, config and kernel bound once (runtime/launch.py)."""
        if type(self).launch is not CudaDevice.launch:  # a subclass that launches its own way
            return (lambda *args: self.launch(handle, config, args)), ()
        return _cu_launch, (self._stream, config, handle)


def link_foreign(compiled: CompiledKernel, arch: str) -> Any:
    """The kernel's PTX linked with its foreign device functions' code (`az.foreign.device_function`)
    into a cubin for `arch`: PTX alone through cuda.core's Linker (nvJitLink, else the driver's
    cuLink), with LTO-IR through nvJitLink (runtime/foreign_link.py, cached by content)."""
    if any(isinstance(code, bytes) for code in compiled.links):
        return ObjectCode.from_cubin(link_lto(compiled, arch), name=compiled.name)
    parts = [ObjectCode.from_ptx(compiled.ptx.encode(), name=compiled.name)]
    parts += [ObjectCode.from_ptx(str(text).encode(), name=f"{compiled.name}.foreign{i}") for i, text in enumerate(compiled.links)]
    return Linker(*parts, options=LinkerOptions(name=compiled.name, arch=arch)).link("cubin")


def link_lto(compiled: CompiledKernel, arch: str) -> bytes:
    """The cubin nvJitLink links of the kernel's PTX and its functions' PTX and LTO-IR, for
    `arch`; a refusal (each function was checked against its declaration first) is a located
    `az-foreign-link` at the kernel."""
    try:
        return foreign_link.link_cubin(compiled.ptx, compiled.links, arch, compiled.name)
    except foreign_link.LinkFailure as e:
        span = Span.point(compiled.source_path or "<kernel>", max(compiled.source_line, 1), 0)
        raise CheckError([messages.foreign_link(span, "foreign-link-failed", help="foreign-link-report", kernel=compiled.name,
                                                arch=arch, log=e.log)]) from None


def co_resident(grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, sms: int, per_sm: int) -> None:
    """Refuse a cooperative launch whose grid the GPU cannot hold resident at once."""
    blocks = grid[0] * grid[1] * grid[2]
    if blocks > sms * per_sm:
        raise LaunchError(
            f"a cooperative launch (`cooperative=True`: the kernel calls `az.grid.sync()`) of {blocks} blocks cannot be "
            f"resident at once: this GPU holds {sms} SMs x {per_sm} blocks of {block[0] * block[1] * block[2]} threads "
            f"({shared} bytes of dynamic shared memory) per SM = {sms * per_sm} blocks; launch at most {sms * per_sm} blocks "
            "(a grid-stride loop covers any size)"
        )


def _raise_shared_limit(kernel: Any, nbytes: int, device_id: int) -> None:
    """Let `kernel` take `nbytes` of dynamic shared memory (past the 48 KiB default)."""
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = kernel.handle
    if isinstance(handle, driver.CUkernel):  # cuda.core loads through the library API
        dev = check_cu(driver.cuDeviceGet(device_id), "cuDeviceGet")
        check_cu((driver.cuKernelSetAttribute(attr, nbytes, handle, dev)[0], None), "cuKernelSetAttribute")
    else:
        check_cu((driver.cuFuncSetAttribute(handle, attr, nbytes)[0], None), "cuFuncSetAttribute")


def pointer_device(ptr: int) -> int | None:
    """The ordinal of the GPU that owns device pointer `ptr`; None for host or unknown memory."""
    err, ordinal = driver.cuPointerGetAttribute(
        driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr
    )
    return int(ordinal) if err == _OK else None

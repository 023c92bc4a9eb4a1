"""Devices: `az.device()` picks the first GPU, else the CPU backend.

    dev = az.device()          # first GPU, else CPU (with a one-line notice)
    dev = az.device(0)         # GPU 0;  az.device("cuda:1") GPU 1
    dev = az.device("cpu")     # the CPU backend (llvmlite host JIT)
    dev = az.device("cpu", 1)  # a second CPU stand-in device ("cpu:1"): its own memory and faults
    dev = az.device("debug")   # the debug device: kernels interpreted (pdb, every access and race checked)
    gpus = az.devices()        # every GPU (an empty list without one)

CUDA is imported only when a GPU device is requested, so `import anodize` works
(and stays fast) on a machine without a driver.  Devices are created once per
process and reused.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from typing import Any

import numpy as np

from anodize.language.errors import ArgumentError, LaunchError, OutOfMemoryError
from anodize.language.vocab import ScalarInfo
from anodize.runtime import lazy, probe
from anodize.runtime.buffer import MAX_RANK, Buffer, _fronts, normalize_shape, resolve_dtype
from anodize.runtime.faults import FaultArena
from anodize.runtime.probe import gpu_available, gpu_count

__all__ = ["Device", "CpuDevice", "DebugDevice", "Buffer", "DeviceLimits", "device", "devices", "devices_used"]

_ALIGN = 64


class DeviceLimits:
    """What a launch may ask of a device (the CUDA limits; the CPU backend mirrors them)."""

    __slots__ = ("max_threads_per_block", "max_block", "max_grid", "max_shared_per_block")

    def __init__(
        self,
        max_threads_per_block: int = 1024,
        max_block: tuple[int, int, int] = (1024, 1024, 64),
        max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535),
        max_shared_per_block: int = 48 * 1024,
    ):
        self.max_threads_per_block = max_threads_per_block
        self.max_block = max_block
        self.max_grid = max_grid
        self.max_shared_per_block = max_shared_per_block


# Limits every CUDA device shares (checked when `kernel[config]` is built: runtime/launch_checks.py);
# a device's own limits are checked again at its first launch.
UNIVERSAL = DeviceLimits(max_shared_per_block=227 * 1024)


class Device:
    """One place kernels run: a CUDA GPU (`kind == "cuda"`) or the CPU backend (`kind == "cpu"`)."""

    kind: str = ""
    name: str = ""
    index: int = 0
    stream_work = 0  # allocations queued on the device's stream so far (a counter)
    compute_capability: tuple[int, int] | None = None
    poison_empty: bool = False  # `empty` fills with `poison_pattern` (the CPU backend)
    limits: DeviceLimits
    faults: FaultArena

    # -- buffers --------------------------------------------------------------------------
    def to_device(self, host: Any) -> Buffer:
        """Copy a 1-D, 2-D or 3-D host array (any anodize dtype) into a new Buffer on this device."""
        if isinstance(host, Buffer):
            raise ArgumentError(
                "`to_device` takes a host array, got an anodize Buffer",
                help="a Buffer is already on a device; use `buf.to_host()` to copy it back, or `buf.copy()`",
            )
        arr = np.asarray(host)
        if not 1 <= arr.ndim <= MAX_RANK:
            raise ArgumentError(
                f"`to_device` takes a 1-D, 2-D or 3-D array, got {arr.ndim}-D with shape {arr.shape}",
                help="reshape to (n,), (rows, cols) or (layers, rows, cols) first",
            )
        scalar = resolve_dtype(arr.dtype)
        buf = self._new(tuple(int(s) for s in arr.shape), scalar)
        if buf.nbytes:
            self._upload(buf.ptr, np.ascontiguousarray(arr), buf.nbytes)
        return buf

    def empty(self, shape: int | tuple[int, ...], dtype: object) -> Buffer:
        """An uninitialised Buffer; `dtype` is `az.f32` (etc.) or a NumPy dtype.

        On the CPU backend the elements are poisoned (NaN for floats, 0xA5 bytes for
        integers and bools) so that an element a kernel forgot to write shows up."""
        buf = self._new(normalize_shape(shape), resolve_dtype(dtype))
        if buf.nbytes and self.poison_empty:
            self._fill(buf.ptr, buf.nbytes, poison_pattern(buf.scalar))
        return buf

    def zeros(self, shape: int | tuple[int, ...], dtype: object) -> Buffer:
        """A new buffer of `shape` elements of `dtype` on this device, filled with zeros."""
        buf = self._new(normalize_shape(shape), resolve_dtype(dtype))
        if buf.nbytes:
            self._fill_zero(buf.ptr, buf.nbytes)
        return buf

    def full(self, shape: int | tuple[int, ...], value: object, dtype: object) -> Buffer:
        """A Buffer with every element `value`."""
        buf = self._new(normalize_shape(shape), resolve_dtype(dtype))
        buf.fill(value)
        return buf

    def copy_op(self, dst: Any, src: Any) -> Any:
        """A lazy copy: Buffer <- Buffer, Buffer <- NumPy array, or NumPy array <- Buffer
        (runtime/copy_ops.py `copy_op`)."""
        return _fronts().copy_op(self, dst, src)

    def _new(self, shape: tuple[int, ...], scalar: ScalarInfo) -> Buffer:
        n = 1
        for s in shape:
            n *= s
        ptr, owner = self._alloc_or_raise(n * scalar.dtype.itemsize)
        mark_used(self)
        self.stream_work += 1  # work queued on the device's stream since: see runtime/submission.py
        return Buffer(self, ptr, shape, scalar, owner)

    def _alloc_or_raise(self, nbytes: int) -> tuple[int, object]:
        """`_alloc`, with an out-of-memory failure turned into `az.OutOfMemoryError`."""
        try:
            return self._alloc(nbytes)
        except MemoryError as e:
            if isinstance(e, OutOfMemoryError):
                raise
            raise OutOfMemoryError(nbytes, self.describe(), "the host allocation failed") from None
        except Exception as e:  # cuda.core reports CUDA_ERROR_OUT_OF_MEMORY as its own error type
            if "OUT_OF_MEMORY" not in str(e).upper().replace(" ", "_"):
                raise

            raise OutOfMemoryError(nbytes, self.describe(), "CUDA_ERROR_OUT_OF_MEMORY") from None

    # -- synchronisation and faults -------------------------------------------------------
    def synchronize(self) -> None:
        """Wait for all work on this device; raise the first pending `KernelFault`."""
        self.check()

    def check(self) -> None:
        """Raise the first `KernelFault` recorded since the last check (waits for the device)."""
        raise NotImplementedError

    @property
    def stream(self) -> Any:
        """The stream anodize launches on (a cuda.core Stream; None on the CPU backend)."""
        return None

    def describe(self) -> str:
        """A one-line description: `cuda:0 (NVIDIA H100 ...)` or `cpu (...)`."""
        if self.kind == "cuda" or self.index:
            return f"{self.kind}:{self.index} ({self.name})"
        return f"cpu ({self.name})"  # the one CPU backend most programs use

    def __repr__(self) -> str:
        return f"<anodize Device {self.describe()}>"

    # -- backend hooks (used by Buffer, compile and launch) -------------------------------
    def _alloc(self, nbytes: int) -> tuple[int, object]:
        raise NotImplementedError

    def _upload(self, ptr: int, host: np.ndarray, nbytes: int) -> None:
        raise NotImplementedError

    def _download(self, out: np.ndarray, ptr: int, nbytes: int) -> None:
        raise NotImplementedError

    def _fill_zero(self, ptr: int, nbytes: int) -> None:
        raise NotImplementedError

    def _fill(self, ptr: int, nbytes: int, pattern: bytes) -> None:
        """Repeat `pattern` (one element's bytes) over `nbytes` at `ptr`."""
        raise NotImplementedError

    def _copy_d2d(self, dst: int, src: int, nbytes: int) -> None:
        """Copy `nbytes` between two disjoint ranges of this device's memory."""
        raise NotImplementedError

    def _dl_device(self) -> tuple[int, int]:
        raise NotImplementedError

    def _stream_handle(self) -> int | None:
        return None

    def make_stream_wait(self, consumer_stream: int | None) -> None:
        """Order a consumer's stream after our pending work (DLPack `stream=`, az.torch's ops on
        PyTorch's current stream); nothing to order on the CPU backend."""


class CpuDevice(Device):
    """The CPU backend: buffers are aligned NumPy arrays; kernels run synchronously.

    `az.device("cpu", n)` is the n-th CPU device: the same host JIT, but a Device of its
    own (its own fault arena, its buffers its own memory space), so a second CPU device
    stands in for a second GPU in tests and in the CPU path of multi-device programs."""

    kind = "cpu"
    poison_empty = True

    def __init__(self, index: int = 0) -> None:
        self.name = f"llvmlite host JIT, {platform.machine() or 'cpu'}"
        self.index = index
        self.compute_capability = None
        self.limits = DeviceLimits()
        self.faults = FaultArena(self)

    def check(self) -> None:
        self.faults.check()

    def _alloc(self, nbytes: int) -> tuple[int, object]:
        raw = np.zeros(nbytes + _ALIGN, dtype=np.uint8)
        base = raw.ctypes.data
        off = (-base) % _ALIGN
        mem = raw[off : off + nbytes]
        return base + off, mem

    def _upload(self, ptr: int, host: np.ndarray, nbytes: int) -> None:
        ctypes.memmove(ptr, host.ctypes.data, nbytes)

    def _download(self, out: np.ndarray, ptr: int, nbytes: int) -> None:
        if nbytes:
            ctypes.memmove(out.ctypes.data, ptr, nbytes)

    def _fill_zero(self, ptr: int, nbytes: int) -> None:
        ctypes.memset(ptr, 0, nbytes)

    def _fill(self, ptr: int, nbytes: int, pattern: bytes) -> None:
        if len(set(pattern)) == 1:
            ctypes.memset(ptr, pattern[0], nbytes)
            return
        dst = (ctypes.c_uint8 * nbytes).from_address(ptr)
        np.frombuffer(dst, dtype=np.uint8).reshape(-1, len(pattern))[:] = np.frombuffer(pattern, np.uint8)

    def _copy_d2d(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def _dl_device(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU


class DebugDevice(CpuDevice):
    """The debug device: `az.device("debug")` runs kernels through an interpreter of the typed IR.

        dev = az.device("debug")       # buffers in host memory, like the CPU backend
        x = dev.to_device(a)
        kernel[cfg](x, ...)            # interpreted: breakpoint(), pdb, every access checked
        x.to_host()                    # a fault or a race is a KernelFault naming file:line

    Its buffers are the CPU backend's (aligned host NumPy memory, `empty` poisoned); the
    launch path is the CPU backend's too (the same argument, aliasing, `requires` and
    dimension checks), but `compile_for_device` hands the kernel to `codegen/debug/run.py`
    instead of LLVM.  `az.device("debug", n)` is a second debug device (own memory, own
    faults), as `az.device("cpu", n)` is for the CPU backend."""

    kind = "debug"

    def __init__(self, index: int = 0) -> None:
        super().__init__(index)
        self.name = "Python interpreter of the typed kernel IR"
        # the GPU's opt-in shared memory per block (UNIVERSAL): the interpreted IR counts a tile
        # kernel's shared tiles as static, which the GPU's lowering makes dynamic
        self.limits = DeviceLimits(max_shared_per_block=UNIVERSAL.max_shared_per_block)

    def describe(self) -> str:
        return f"debug:{self.index} ({self.name})" if self.index else f"debug ({self.name})"


def poison_pattern(scalar: ScalarInfo) -> bytes:
    """One element of `empty`'s poison: a NaN for floats, 0xA5 bytes for integers and bools."""
    if scalar.kind == "f":
        return np.array(np.nan, dtype=scalar.dtype).tobytes()
    return b"\xa5" * scalar.dtype.itemsize


_CPUS: dict[int, CpuDevice] = {}
_DEBUG: dict[int, DebugDevice] = {}
_GPUS: dict[int, Device] = {}
_DEFAULT: Device | None = None
_USED: dict[int, Device] = {}


def mark_used(dev: Device) -> None:
    """Count `dev` among the devices this process has launched on or allocated on (`devices_used`)."""
    _USED.setdefault(id(dev), dev)


def devices_used() -> list[Device]:
    """The devices that allocated a buffer or ran a kernel in this process (for `anodize run`)."""
    return list(_USED.values())


def cpu_device(index: int = 0) -> CpuDevice:
    """The `index`-th CPU device (0: the CPU backend; 1, 2, ...: stand-ins for more GPUs)."""
    dev = _CPUS.get(index)
    if dev is None:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ArgumentError(f"a CPU device index is a non-negative int, got {index!r}")
        dev = _CPUS[index] = CpuDevice(index)
    return dev


def devices() -> list[Device]:
    """Every CUDA GPU of this machine, in ordinal order; an empty list without one.

    CPU stand-in devices are not listed: ask for them with `az.device("cpu", n)`."""
    return [cuda_device(i) for i in range(gpu_count())]


def cuda_device(index: int) -> Device:
    dev = _GPUS.get(index)
    if dev is not None:
        return dev
    if not probe.init_beside() or probe.known_count() == 0:  # (no GPU, and the driver said so already: no import to start)
        _check_index(index)
    # The device's primary context is made while cuda.core imports (both are a process's
    # first-GPU cost; the context waits in the driver without the GIL), and so does the driver's
    # start (cuInit, in the first `gpu_count`) unless `ANODIZE_INIT_BESIDE=0`; an error of the
    # check is raised first.
    def start() -> None:
        _check_index(index)
        _retain_primary_context(index)

    CudaDevice = lazy.cuda_device_beside(start).CudaDevice

    dev = CudaDevice(index)
    _GPUS[index] = dev
    return dev


def _check_index(index: int) -> None:
    """Raise the LaunchError for a CUDA device `index` this machine lacks."""
    count = gpu_count()
    if count == 0:
        raise LaunchError(
            f"no CUDA GPU found, so device cuda:{index} does not exist",
            help='use `az.device("cpu")` for the CPU backend, or run `anodize doctor`',
        )
    if not 0 <= index < count:
        raise LaunchError(f"there is no CUDA device {index}; this machine has {count} (cuda:0 to cuda:{count - 1})")


def _retain_primary_context(index: int) -> None:
    """Create (retain) GPU `index`'s primary context through the driver alone: cuda.core's
    `Device.set_current()` then finds it made.  Errors are left for cuda.core to report."""
    driver = lazy.cuda_driver()
    err, dev = driver.cuDeviceGet(index)
    if err == driver.CUresult.CUDA_SUCCESS:
        driver.cuDevicePrimaryCtxRetain(dev)


def debug_device(index: int = 0) -> DebugDevice:
    """The debug device `index` (`az.device("debug", index)`), created once."""
    dev = _DEBUG.get(index)
    if dev is None:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ArgumentError(f"a debug device index is a non-negative int, got {index!r}")
        dev = _DEBUG[index] = DebugDevice(index)
    return dev


def device(which: int | str | Device | None = None, index: int | None = None) -> Device:
    """`device()` (first GPU, else CPU), `device(0)`, `device("cuda:0")`, `device("cuda", 1)`,
    `device("cpu")`, and `device("cpu", n)` / `device("cpu:n")`, the n-th CPU stand-in device;
    `device("debug")` (`"debug:n"`, `("debug", n)`), the debug device (`DebugDevice`)."""
    global _DEFAULT
    if isinstance(which, Device):
        return which
    if index is not None:
        if not isinstance(which, str) or which.strip().lower() not in ("cpu", "cuda", "gpu", "debug"):
            raise ArgumentError(
                f"`device({which!r}, {index!r})`: an index goes with \"cpu\" or \"cuda\"",
                help='use `az.device("cuda", 1)`, `az.device("cpu", 1)` or `az.device(1)`',
            )
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)) or index < 0:
            raise ArgumentError(f"a device index is a non-negative int, got {index!r}")
        if which.strip().lower() == "cpu":
            return cpu_device(int(index))
        if which.strip().lower() == "debug":
            return debug_device(int(index))
        return cuda_device(int(index))
    if which is None:
        if _DEFAULT is None:
            if os.environ.get("ANODIZE_DEVICE", "").strip().lower() == "debug":  # an unchanged program, interpreted
                _DEFAULT = debug_device()
            elif gpu_available():
                _DEFAULT = cuda_device(0)
            else:
                print("anodize: no CUDA GPU found; using the CPU backend", file=sys.stderr)
                _DEFAULT = cpu_device()
        return _DEFAULT
    if isinstance(which, (bool, np.bool_)):
        raise ArgumentError(f"device index must be an int or a string, got {which!r}")
    if isinstance(which, (int, np.integer)):
        return cuda_device(int(which))
    if isinstance(which, str):
        text = which.strip().lower()
        if text == "cpu":
            return cpu_device()
        if text.startswith("cpu:") and text[4:].isdigit():
            return cpu_device(int(text[4:]))
        if text == "debug" or (text.startswith("debug:") and text[6:].isdigit()):
            return debug_device(int(text[6:]) if text != "debug" else 0)
        if text in ("cuda", "gpu"):
            return cuda_device(0)
        for prefix in ("cuda:", "gpu:"):
            if text.startswith(prefix) and text[len(prefix) :].isdigit():
                return cuda_device(int(text[len(prefix) :]))
    raise ArgumentError(
        f"unknown device {which!r}",
        help='use an index (`0`), "cuda:0", "cpu", "cpu:1", "debug", or nothing for the default',
    )


def args_device(args: tuple[Any, ...]) -> Device:
    """The device of the first array argument (NumPy arrays mean the CPU backend), else the default
    (a launch's device: runtime/launch.py, and the outputs it allocates: runtime/outputs.py)."""
    for a in args:
        if isinstance(a, Buffer):
            return a.device
        if isinstance(a, np.ndarray):
            return cpu_device()
        if hasattr(a, "__cuda_array_interface__"):
            pointer_device = lazy.cuda_device().pointer_device

            try:
                ptr = int(a.__cuda_array_interface__["data"][0] or 0)
            except Exception:
                continue
            ordinal = pointer_device(ptr) if ptr else None
            return cuda_device(ordinal or 0)
        if hasattr(a, "__dlpack_device__"):
            try:
                dev_type, dev_id = a.__dlpack_device__()
            except Exception:
                continue
            if int(dev_type) == 2:
                return cuda_device(int(dev_id))
            if int(dev_type) == 1:
                return cpu_device()
    return device()

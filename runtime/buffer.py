"""`Buffer`: a typed, C-contiguous 1-D or 2-D array in one device's memory.

A Buffer is a pointer, a shape and a dtype, plus an `owner` that keeps the
allocation alive (a cuda.core Buffer on a GPU, an aligned NumPy array on the
CPU backend).  Views (`buf[a:b]`, `buf.view()`) share the owner.  Buffers export
`__cuda_array_interface__` (GPU only) and DLPack, so CuPy, PyTorch and NumPy can
read them without a copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from anodize.language.vocab import SCALARS, ScalarInfo, scalar_for_dtype
from anodize.language.errors import ArgumentError
from anodize.runtime import inflight as _inflight  # issue 7: writes to in-flight buffers are refused

if TYPE_CHECKING:
    from anodize.runtime.device import Device

__all__ = ["Buffer", "resolve_dtype", "normalize_shape"]


def resolve_dtype(dtype: object) -> ScalarInfo:
    """The element type named by `az.f32`-style classes, NumPy dtypes or their names."""
    if isinstance(dtype, type) and dtype.__module__ == "anodize.types" and dtype.__name__ in SCALARS:
        return SCALARS[dtype.__name__]
    if isinstance(dtype, str) and dtype in SCALARS:
        return SCALARS[dtype]
    info = scalar_for_dtype(dtype)
    if info is None:
        raise ArgumentError(
            f"dtype {dtype!r} is not an anodize element type",
            help="use one of " + ", ".join(f"az.{n}" for n in SCALARS) + " (or the matching NumPy dtype)",
        )
    return info


def normalize_shape(shape: object) -> tuple[int, ...]:
    t = (shape,) if isinstance(shape, int) and not isinstance(shape, bool) else shape
    if (
        not isinstance(t, tuple)
        or not 1 <= len(t) <= 2
        or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in t)
    ):
        raise ArgumentError(
            f"a buffer shape must be `n` or `(rows, cols)` of non-negative ints, got {shape!r}",
            help="anodize buffers are 1-D or 2-D",
        )
    return tuple(int(s) for s in t)


class Buffer:
    """A typed array in device memory (host memory on the CPU backend)."""

    __slots__ = ("_device", "_ptr", "_shape", "_scalar", "_dtype", "_nbytes", "_owner", "__weakref__")

    def __init__(self, device: Device, ptr: int, shape: tuple[int, ...], scalar: ScalarInfo, owner: object):
        self._device = device
        self._ptr = ptr
        self._shape = shape
        self._scalar = scalar
        self._dtype = scalar.dtype
        n = 1
        for s in shape:
            n *= s
        self._nbytes = n * scalar.dtype.itemsize
        self._owner = owner

    # -- description ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def scalar(self) -> ScalarInfo:
        """The anodize element type (`scalar.name` is "f32", ...)."""
        return self._scalar

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return self._nbytes // self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self._nbytes

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ptr(self) -> int:
        """The address of the first element (device memory on a GPU)."""
        return self._ptr

    def __len__(self) -> int:
        return self._shape[0]

    def __repr__(self) -> str:
        return f"<anodize Buffer shape={self._shape} dtype={self._scalar.name} on {self._device.describe()}>"

    # -- data movement --------------------------------------------------------------------
    def to_host(self) -> np.ndarray:
        """A NumPy copy; waits for pending work and raises any pending `KernelFault` first."""
        if _inflight._ACTIVE:  # issue 7: refuse to read what an in-flight op writes
            _inflight.check_host_read(self, "copy this buffer to the host")
        out = np.empty(self._shape, dtype=self._dtype)
        self._device._download(out, self._ptr, self._nbytes)
        self._device.check()
        return out

    def copy_from(self, host: Any) -> None:
        """Overwrite this buffer with a host array of the same shape and dtype."""
        arr = np.asarray(host)
        if arr.dtype != self._dtype:
            raise ArgumentError(
                f"`copy_from` needs dtype {self._scalar.name} ({self._dtype}), got {arr.dtype}",
                help=f"convert first: `arr.astype(np.{self._dtype.name})`",
            )
        if arr.shape != self._shape:
            raise ArgumentError(f"`copy_from` needs shape {self._shape}, got {arr.shape}")
        if _inflight._ACTIVE:  # issue 7: refuse to overwrite what an in-flight op uses
            _inflight.check_host_write(self, "`copy_from` into this buffer")
        self._device._upload(self._ptr, np.ascontiguousarray(arr), self._nbytes)

    # ADDED for issue 7 (runtime/ops.py): a lazy copy to a new host array.
    def to_host_op(self) -> Any:
        """A lazy copy to a new host array (pinned on a GPU); the array is the op's result."""
        from anodize.runtime.ops import ToHostOp

        return ToHostOp(self)

    # -- views ----------------------------------------------------------------------------
    def __getitem__(self, key: object) -> Buffer:
        if not isinstance(key, slice):
            raise TypeError(
                "a Buffer can only be sliced with `buf[a:b]` (a view sharing memory); "
                "call `.to_host()` to read elements"
            )
        start, stop, step = key.indices(self._shape[0])
        if step != 1:
            raise ArgumentError(
                f"a Buffer view must be contiguous (step 1), got step {step}",
                help="copy to the host and slice there, or write a kernel that strides",
            )
        stop = max(start, stop)
        row_elems = self._shape[1] if len(self._shape) == 2 else 1
        ptr = self._ptr + start * row_elems * self._dtype.itemsize
        return Buffer(self._device, ptr, (stop - start, *self._shape[1:]), self._scalar, self._owner)

    def view(self, shape: int | tuple[int, ...] | None = None) -> Buffer:
        """A new Buffer over the same memory, optionally reshaped (same number of elements)."""
        new = self._shape if shape is None else normalize_shape(shape)
        n = 1
        for s in new:
            n *= s
        if n != self.size:
            raise ArgumentError(f"cannot view {self.size} elements as shape {new}")
        return Buffer(self._device, self._ptr, new, self._scalar, self._owner)

    # -- interop --------------------------------------------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self._device.kind != "cuda":
            raise AttributeError("a CPU-backend Buffer has no __cuda_array_interface__ (it is host memory)")
        return {
            "shape": self._shape,
            "typestr": self._dtype.str,
            "data": (self._ptr, False),
            "version": 3,
            "strides": None,
            "stream": self._device._stream_handle(),
        }

    @property
    def __array_interface__(self) -> dict[str, Any]:
        if self._device.kind != "cpu":
            raise AttributeError("a GPU Buffer has no __array_interface__; call `.to_host()`")
        return {
            "shape": self._shape,
            "typestr": self._dtype.str,
            "data": (self._ptr, False),
            "version": 3,
            "strides": None,
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device._dl_device()

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object:
        from anodize.runtime import dlpack

        if dl_device is not None and tuple(dl_device) != self._device._dl_device():
            raise BufferError(f"this Buffer lives on {self._device.describe()}; it cannot be exported elsewhere")
        if copy:
            raise BufferError("anodize exports Buffers without copying; call `.to_host()` for a copy")
        self._device._export_sync(stream)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dlpack.export(
            self._ptr, self._shape, self._scalar, self._device._dl_device(), self, versioned=versioned
        )

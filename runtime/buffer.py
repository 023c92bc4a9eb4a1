"""`Buffer`: a typed 1-D, 2-D or 3-D array in one device's memory.

A Buffer is a pointer, a shape, element strides and a dtype, plus an `owner` that
keeps the allocation alive (a cuda.core Buffer on a GPU, an aligned NumPy array on
the CPU backend).  Buffers made by a device are C-contiguous.  Basic slicing
(`buf[2:10]`, `buf[1:3, :]`, `buf[:, ::2]`) gives views that share the owner; a
view that is not C-contiguous is a `StridedView` (a Buffer subclass), which a
kernel launch refuses (`view.copy()` makes a contiguous Buffer).  An index on
every dimension (`buf[i]`, `buf[i, j]`) reads one element to the host.  Buffers
export `__cuda_array_interface__` (GPU only), `__array_interface__` and
`__array__` (CPU backend only, zero-copy) and DLPack (contiguous buffers).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from anodize.language.errors import ArgumentError
from anodize.language.vocab import SCALARS, ScalarInfo, scalar_for_dtype
from anodize.runtime import (
    inflight as _inflight,  # writes to in-flight buffers are refused
    lazy,
)

if TYPE_CHECKING:
    from anodize.runtime.device import Device
    from anodize.runtime.ops import Op

__all__ = ["Buffer", "StridedView", "resolve_dtype", "normalize_shape", "MAX_RANK", "Fronts", "FRONTS"]

MAX_RANK = 3


def resolve_dtype(dtype: object) -> ScalarInfo:
    """The element type named by `az.f32`-style classes, NumPy dtypes or their names."""
    if isinstance(dtype, type) and dtype.__module__ == "anodize.types" and dtype.__name__ in SCALARS:
        return SCALARS[dtype.__name__]
    if isinstance(dtype, str) and dtype in SCALARS:
        return SCALARS[dtype]
    rec = getattr(dtype, "__az_record__", None)
    if rec is not None:  # an `@az.record` class
        return rec.info  # type: ignore[no-any-return]
    if isinstance(dtype, np.dtype) and dtype.fields is not None:  # a structured dtype
        return _structured(dtype)
    info = scalar_for_dtype(dtype)
    if info is None:
        raise ArgumentError(
            f"dtype {dtype!r} is not an anodize element type",
            help="use one of " + ", ".join(f"az.{n}" for n in SCALARS) + " (or the matching NumPy dtype)",
        )
    return info


def _records() -> ModuleType:
    """language/record_types.py, loaded by the first record dtype (the first buffer of a plain
    dtype stays light: tests/runtime/test_startup_imports.py)."""
    from anodize.language import record_types

    return record_types


class Fronts:
    """Copies that a `Buffer` or a `Device` fronts and modules built on them do, so that this
    module and runtime/device.py import neither: runtime/peer.py fills `copy_to` and
    `copy_between` (copies between devices), runtime/copy_ops.py `to_host_op` and `copy_op`
    (lazy copies, ops of runtime/ops.py), each as it loads.  The first such copy of a program
    that has not loaded them loads them (runtime/lazy.py `copies`); the first buffer needs none."""

    ready = False  # (set by runtime/copy_ops.py, which loads after runtime/peer.py)
    copy_to: Callable[[Buffer, Any], Buffer]
    copy_between: Callable[[Buffer, Buffer], bool]
    to_host_op: Callable[[Buffer], Op]
    copy_op: Callable[[Device, Any, Any], Op]


FRONTS = Fronts()


def _fronts() -> Fronts:
    if not FRONTS.ready:
        lazy.copies()
    return FRONTS


def _structured(dtype: np.dtype) -> ScalarInfo:
    rec = _records().record_from_dtype(dtype)
    if rec is None:
        raise ArgumentError(
            f"the structured dtype {dtype} is not an anodize record: every field must be an anodize scalar, "
            "a 1-D array of one or a structured field, at C's offsets",
            help="build it as `np.dtype([...], align=True)` (or use an `@az.record` class's `.dtype`)",
        )
    return rec.info


def normalize_shape(shape: object) -> tuple[int, ...]:
    t = (shape,) if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)) else shape
    if (
        not isinstance(t, tuple)
        or not 1 <= len(t) <= MAX_RANK
        or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in t)
    ):
        raise ArgumentError(
            f"a buffer shape must be `n`, `(rows, cols)` or `(layers, rows, cols)` of non-negative ints, got {shape!r}",
            help="anodize buffers are 1-D, 2-D or 3-D",
        )
    return tuple(int(s) for s in t)


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    step = 1
    for s in reversed(shape):
        out.append(step)
        step *= s
    return tuple(reversed(out))


def _is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    step = 1
    for s, st in zip(reversed(shape), reversed(strides)):
        if s > 1 and st != step:
            return False
        step *= s
    return True


def _element(scalar: ScalarInfo, value: object, what: str) -> np.ndarray:
    """`value` as a 0-d array of the buffer's dtype; ArgumentError when it does not fit."""
    dt = scalar.dtype
    if isinstance(value, Buffer) or isinstance(value, np.ndarray) and value.ndim:
        raise ArgumentError(f"{what} takes one value, got an array", help="use `copy_from(array)` to write an array")
    if scalar.kind == "b":
        if not isinstance(value, (bool, np.bool_)):
            raise ArgumentError(f"{what} on a bool_ buffer takes True or False, got {value!r}")
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ArgumentError(f"{what} on a {scalar.name} buffer takes a number, got {value!r}")
    elif scalar.kind in "iu":
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise ArgumentError(
                f"{what}: {value!r} is not an integer, and the buffer holds {scalar.name}",
                help="convert explicitly with `int(x)` if truncation is intended",
            )
        info = np.iinfo(dt)
        if not info.min <= int(value) <= info.max:
            raise ArgumentError(f"{what}: {value!r} does not fit in {scalar.name} (range {info.min} to {info.max})")
        return np.array(int(value), dtype=dt)
    elif scalar.bits == 32 and abs(float(value)) > float(np.finfo(np.float32).max) and np.isfinite(float(value)):
        raise ArgumentError(f"{what}: {value!r} does not fit in f32")
    return np.array(value, dtype=dt)


class Buffer:
    """A typed array in device memory (host memory on the CPU backend)."""

    __slots__ = ("_device", "_ptr", "_shape", "_scalar", "_dtype", "_nbytes", "_owner", "_strides", "__weakref__")

    def __init__(
        self,
        device: Device,
        ptr: int,
        shape: tuple[int, ...],
        scalar: ScalarInfo,
        owner: object,
        strides: tuple[int, ...] | None = None,
    ):
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
        self._strides = _c_strides(shape) if strides is None else strides  # in elements

    # -- description ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The buffer's extents (one per dimension, row-major)."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the elements."""
        return self._dtype

    @property
    def scalar(self) -> ScalarInfo:
        """The anodize element type (`scalar.name` is "f32", ...)."""
        return self._scalar

    @property
    def ndim(self) -> int:
        """The number of dimensions (1 or 2)."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return self._nbytes // self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        """The bytes of the elements (for a strided view, not the span they are spread over)."""
        return self._nbytes

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides, as NumPy reports them."""
        return tuple(s * self._dtype.itemsize for s in self._strides)

    @property
    def is_contiguous(self) -> bool:
        """True when the elements are C-contiguous (what a kernel launch needs)."""
        return True

    @property
    def device(self) -> Device:
        """The device whose memory holds the buffer."""
        return self._device

    @property
    def ptr(self) -> int:
        """The address of the first element (device memory on a GPU)."""
        return self._ptr

    def __len__(self) -> int:
        return self._shape[0]

    def __repr__(self) -> str:
        view = "" if self.is_contiguous else " (non-contiguous view)"
        return f"<anodize Buffer shape={self._shape} dtype={self._scalar.name}{view} on {self._device.describe()}>"

    def _extent(self) -> tuple[int, int]:
        """[lo, hi): the bytes the elements lie in."""
        if not self._nbytes:
            return self._ptr, self._ptr
        item = self._dtype.itemsize
        lo = hi = self._ptr
        for s, st in zip(self._shape, self._strides):
            if st < 0:
                lo += (s - 1) * st * item
            else:
                hi += (s - 1) * st * item
        return lo, hi + item

    # -- data movement --------------------------------------------------------------------
    def to_host(self) -> np.ndarray:
        """A NumPy copy; waits for pending work and raises any pending `KernelFault` first."""
        if _inflight._ACTIVE:  # refuse to read what an in-flight op writes
            _inflight.check_host_read(self, "copy this buffer to the host")
        if self.is_contiguous:
            out = np.empty(self._shape, dtype=self._dtype)
            self._device._download(out, self._ptr, self._nbytes)
        else:
            out = np.array(self._staged()[0])
        self._device.check()
        return out

    def _staged(self) -> tuple[np.ndarray, np.ndarray]:
        """(view, raw): the elements as a strided NumPy view of a host copy `raw` of the extent."""
        lo, hi = self._extent()
        raw = np.empty(hi - lo, dtype=np.uint8)
        self._device._download(raw, lo, hi - lo)
        view = np.lib.stride_tricks.as_strided(
            raw[self._ptr - lo :].view(self._dtype)[:1] if hi > lo else raw.view(self._dtype),
            shape=self._shape, strides=self.strides, writeable=True,
        )
        return view, raw

    def copy_from(self, source: Any) -> None:
        """Overwrite this buffer with a host array or another Buffer of the same shape and dtype."""
        if isinstance(source, Buffer):
            what = f"a Buffer of {source.scalar.name} ({source.dtype})"
            dtype, shape = source.dtype, source.shape
        else:
            arr = np.asarray(source)
            what, dtype, shape = f"{arr.dtype}", arr.dtype, arr.shape
        if dtype != self._dtype:
            raise ArgumentError(
                f"`copy_from` needs dtype {self._scalar.name} ({self._dtype}), got {what}",
                help=f"convert first: `arr.astype(np.{self._dtype.name})`",
            )
        if tuple(shape) != self._shape:
            raise ArgumentError(
                f"`copy_from` needs shape {self._shape}, got {tuple(shape)}",
                help="copy into a view of the matching shape (`buf[a:b]`), or reshape the source",
            )
        if _inflight._ACTIVE:  # refuse to overwrite what an in-flight op uses
            _inflight.check_host_write(self, "`copy_from` into this buffer")
        if isinstance(source, Buffer):
            if _inflight._ACTIVE:
                _inflight.check_host_read(source, "`copy_from` out of this buffer")
            lo, hi = self._extent()
            slo, shi = source._extent()
            disjoint = hi <= slo or shi <= lo
            if (
                source._device is self._device and disjoint and self.is_contiguous and source.is_contiguous
            ):
                if self._nbytes:
                    self._device._copy_d2d(self._ptr, source._ptr, self._nbytes)
                return
            if source._device is not self._device and self.is_contiguous and source.is_contiguous:
                if _fronts().copy_between(self, source):  # another device of the same kind: a peer copy
                    return
            arr = source.to_host()  # another kind of device, overlapping memory or a strided view: via the host
        self._write(np.asarray(arr))

    def _write(self, arr: np.ndarray) -> None:
        if not self._nbytes:
            return
        if self.is_contiguous:
            self._device._upload(self._ptr, np.ascontiguousarray(arr, dtype=self._dtype), self._nbytes)
            return
        if self._device.kind in ("cpu", "debug"):
            np.asarray(self)[...] = arr
            return
        view, raw = self._staged()  # read the extent, change the view's elements, write it back
        view[...] = arr
        lo, hi = self._extent()
        self._device._upload(lo, raw, hi - lo)

    def fill(self, value: object) -> None:
        """Set every element to `value` (checked to fit the dtype)."""
        v = _element(self._scalar, value, "`fill`")
        if _inflight._ACTIVE:
            _inflight.check_host_write(self, "`fill` this buffer")
        if not self._nbytes:
            return
        if self.is_contiguous:
            self._device._fill(self._ptr, self._nbytes, v.tobytes())
        else:
            self._write(np.full(self._shape, v, dtype=self._dtype))

    def copy_to(self, device: Any) -> Buffer:
        """A new C-contiguous Buffer on `device` with the same elements (a peer copy between
        GPUs that can access each other, else staged through the host; runtime/peer.py)."""
        return _fronts().copy_to(self, device)

    def copy(self) -> Buffer:
        """A new C-contiguous Buffer on the same device with the same elements."""
        out = self._device._new(self._shape, self._scalar)
        out.copy_from(self)
        return out

    def to_host_op(self) -> Any:
        """A lazy copy to a new host array (pinned on a GPU); the array is the op's result
        (runtime/copy_ops.py `ToHostOp`)."""
        return _fronts().to_host_op(self)

    # -- indexing and views ---------------------------------------------------------------
    def __getitem__(self, key: object) -> Any:
        """`buf[i, j]` reads one element to the host; slices give views sharing memory."""
        keys = _expand(key, len(self._shape))
        item = self._dtype.itemsize
        ptr = self._ptr
        shape: list[int] = []
        strides: list[int] = []
        for axis, (k, n, st) in enumerate(zip(keys, self._shape, self._strides)):
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                count = len(range(start, stop, step))
                if count:
                    ptr += start * st * item
                shape.append(count)
                strides.append(st * step)
            else:
                i = int(k)  # type: ignore[call-overload]
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
                ptr += (i % n) * st * item
        if not shape:
            return self._read_element(ptr)
        return _make_view(self, ptr, tuple(shape), tuple(strides))

    def _read_element(self, ptr: int) -> Any:
        if _inflight._ACTIVE:
            _inflight.check_host_read(self, "read an element of this buffer")
        out = np.empty((), dtype=self._dtype)
        self._device._download(out, ptr, self._dtype.itemsize)
        self._device.check()
        return out[()]

    def view(self, shape: int | tuple[int, ...] | object | None = None) -> Buffer:
        """A new Buffer over the same memory: reshaped (`buf.view((r, c))`, same number of
        elements) or, given an element type, its bytes reinterpreted as that type
        (`buf.view(az.u32)`, `buf.view(np.uint8)`), as NumPy's `ndarray.view(dtype)` does: the
        last axis scales by the ratio of the element sizes, which must divide its bytes."""
        if not self.is_contiguous:
            raise ArgumentError(
                "cannot reshape a non-contiguous view", help="make a contiguous copy first: `view.copy()`"
            )
        if shape is not None and not isinstance(shape, (int, np.integer, tuple)) or isinstance(shape, (bool, np.bool_)):
            return self._view_dtype(resolve_dtype(shape))
        new = self._shape if shape is None else normalize_shape(shape)
        n = 1
        for s in new:
            n *= s
        if n != self.size:
            raise ArgumentError(f"cannot view {self.size} elements as shape {new}")
        return Buffer(self._device, self._ptr, new, self._scalar, self._owner)

    def field(self, name: str) -> Buffer:
        """A view of one field of a record buffer (`@az.record` elements): the same memory, a
        strided view of the field's elements (shape `buf.shape`, plus `(n,)` for an
        `az.Array[T, n]` field); reads, writes and `to_host()` go through to the records.  Like
        every strided view, a kernel launch refuses it (pass `view.copy()`)."""
        R = _records()
        ArrayFieldTy, RecordTy, record_of_info = R.ArrayFieldTy, R.RecordTy, R.record_of_info
        if self._scalar.kind != "r":
            raise ArgumentError(f"`field` is for record buffers; this one holds {self._scalar.name}")
        rec = record_of_info(self._scalar)
        f = rec.field(name)
        if f is None:
            raise ArgumentError(f"the record {rec.name} has no field {name!r}", help="its fields: " + ", ".join(x.name for x in rec.fields))
        ty = f.ty
        if isinstance(ty, RecordTy):
            info, size, extra, inner = ty.info, ty.size, (), ()
        elif isinstance(ty, ArrayFieldTy):
            info, size, extra, inner = ty.elem.info, ty.align, (ty.n,), (1,)
        else:
            info, size, extra, inner = ty.info, ty.info.mem_bits // 8, (), ()
        if rec.size % size or len(self._shape) + len(extra) > MAX_RANK:
            raise ArgumentError(
                f"the field {name!r} ({size} bytes) cannot be viewed with element strides of a {rec.size}-byte record",
                help="copy the records to the host (`buf.to_host()[name]`)",
            )
        strides = tuple(s * (rec.size // size) for s in self._strides) + inner
        return StridedView(self._device, self._ptr + f.offset, (*self._shape, *extra), info, self._owner, strides)

    def _view_dtype(self, scalar: ScalarInfo) -> Buffer:
        old, item = self._dtype.itemsize, scalar.dtype.itemsize
        last = self._shape[-1] * old
        if last % item:
            raise ArgumentError(
                f"cannot view a last axis of {self._shape[-1]} {self._scalar.name} ({last} bytes) as {scalar.name} "
                f"({item} bytes each): the sizes do not divide",
                help=f"view a buffer whose last axis holds a multiple of {item} bytes (slice it first: `buf[:k]`)",
            )
        if self._ptr % item and self._shape[-1]:
            raise ArgumentError(
                f"cannot view this buffer as {scalar.name}: its first element (address {self._ptr:#x}) "
                f"is not aligned to {item} bytes",
                help="view a slice that starts at a multiple of the new element size",
            )
        return Buffer(self._device, self._ptr, (*self._shape[:-1], last // item), scalar, self._owner)

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
            "strides": None if self.is_contiguous else self.strides,
            "stream": self._device._stream_handle(),
        }

    @property
    def __array_interface__(self) -> dict[str, Any]:
        if self._device.kind not in ("cpu", "debug"):
            raise AttributeError("a GPU Buffer has no __array_interface__; call `.to_host()`")
        return {
            "shape": self._shape,
            "typestr": self._dtype.str,
            "data": (self._ptr, False),
            "version": 3,
            "strides": None if self.is_contiguous else self.strides,
        }

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """`np.asarray(buf)`: zero-copy on the CPU backend; a GPU Buffer needs `.to_host()`."""
        if self._device.kind not in ("cpu", "debug"):
            raise TypeError(
                f"a GPU Buffer ({self._device.describe()}) does not convert to a NumPy array implicitly; "
                "call `buf.to_host()` for a host copy"
            )
        arr = np.asarray(_Interface(self))
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"converting {self._dtype} to {np.dtype(dtype)} needs a copy")
            return arr.astype(dtype)
        return arr.copy() if copy else arr

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
        if not self.is_contiguous:
            raise BufferError("a non-contiguous view cannot be exported; export `view.copy()`")
        self._device.make_stream_wait(stream)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dlpack.export(
            self._ptr, self._shape, self._scalar, self._device._dl_device(), self, versioned=versioned
        )


class StridedView(Buffer):
    """A view that is not C-contiguous (`buf[:, 1:3]`, `buf[::2]`).  It reads, writes,
    fills and copies like a Buffer; a kernel launch refuses it (pass `view.copy()`)."""

    __slots__ = ()

    @property
    def is_contiguous(self) -> bool:
        return False


class _Interface:
    """`__array_interface__` alone, so `np.asarray` inside `Buffer.__array__` does not recurse."""

    __slots__ = ("__array_interface__", "_keep")

    def __init__(self, buf: Buffer):
        self.__array_interface__ = buf.__array_interface__
        self._keep = buf  # the array's base keeps the Buffer (and so its memory) alive


def _make_view(base: Buffer, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> Buffer:
    if _is_c_contiguous(shape, strides):
        return Buffer(base._device, ptr, shape, base._scalar, base._owner)
    return StridedView(base._device, ptr, shape, base._scalar, base._owner, strides)


def _expand(key: object, ndim: int) -> tuple[object, ...]:
    """A basic index (ints, slices, one `...`) as one entry per dimension."""
    keys = key if isinstance(key, tuple) else (key,)
    for k in keys:
        if k is Ellipsis or isinstance(k, slice):
            continue
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            raise TypeError(
                f"a Buffer index is an int, a slice or `...`, got {type(k).__name__} {k!r}; "
                "for fancy indexing copy to the host first (`buf.to_host()[...]`)"
            )
    if sum(1 for k in keys if k is Ellipsis) > 1:
        raise IndexError("an index can only have one ellipsis (`...`)")
    if Ellipsis in keys:
        at = keys.index(Ellipsis)
        fill = ndim - (len(keys) - 1)
        keys = (*keys[:at], *([slice(None)] * max(fill, 0)), *keys[at + 1 :])
    if len(keys) > ndim:
        raise IndexError(f"too many indices for a {ndim}-D Buffer: {len(keys)} were given")
    return (*keys, *([slice(None)] * (ndim - len(keys))))

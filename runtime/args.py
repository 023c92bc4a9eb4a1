"""Argument adapters: one host value -> the kernel ABI's flat values, validated.

A launch plan picks one adapter per parameter from the argument's Python type
(once); the adapter then runs on every launch.  Slice adapters return the data
pointer, the shape and the byte size; scalar converters return a NumPy scalar of
the parameter's exact type (the GPU launcher needs the width, the CPU entry
accepts it as a number).  Every failure is an `ArgumentError` naming the
parameter, what it expects and what it got.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from anodize.codegen.artifact import ParamSpec
from anodize.language.errors import ArgumentError
from anodize.language.halfbits import F8_MAX_BITS, bits_to_float, round_bits
from anodize.language.vocab import ML_DTYPES
from anodize.runtime import dlpack, lazy
from anodize.runtime.buffer import Buffer

SliceAdapter = Callable[[Any], tuple[int, tuple[int, ...], int]]
ScalarConverter = Callable[[Any], Any]

_INT_RANGE = {
    "i8": (-(2**7), 2**7 - 1),
    "i16": (-(2**15), 2**15 - 1),
    "u8": (0, 2**8 - 1),
    "u16": (0, 2**16 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "u32": (0, 2**32 - 1),
    "u64": (0, 2**64 - 1),
}
_F32_MAX = float(np.finfo(np.float32).max)


def describe_param(p: ParamSpec) -> str:
    if p.slice_kind is None:
        return f"a scalar {p.scalar.name}"
    return f"{p.slice_kind.name}[{p.scalar.name}]"


def describe_value(v: object) -> str:
    if isinstance(v, Buffer):
        return f"a Buffer of {v.scalar.name} with shape {v.shape} on {v.device.describe()}"
    if isinstance(v, np.ndarray):
        return f"a NumPy array of {v.dtype} with shape {v.shape}"
    if isinstance(v, (bool, np.bool_)):
        return f"the bool {v!r}"
    if isinstance(v, (int, float, np.generic)):
        return f"the {type(v).__name__} {v!r}"
    if hasattr(v, "__cuda_array_interface__") or hasattr(v, "__dlpack__"):
        return f"a {type(v).__module__}.{type(v).__qualname__} array"
    return f"a {type(v).__qualname__}"


def arg_error(kernel: str, p: ParamSpec, problem: str, *, help: str | None = None) -> ArgumentError:
    return ArgumentError(f"kernel `{kernel}`, parameter `{p.name}`: {problem}", help=help)


def non_contiguous_view(kernel: str, p: ParamSpec, v: Buffer) -> ArgumentError:
    return arg_error(
        kernel, p, f"got a non-contiguous view of shape {v.shape} (byte strides {v.strides}); "
        "a kernel needs C-contiguous memory",
        help="pass a contiguous copy (`view.copy()`), or a view of whole rows (`buf[a:b]`, `buf[a:b, :]`)",
    )


def alias_help(out: ParamSpec, other: ParamSpec) -> str:
    """The help of an `AliasingError`: a separate buffer, or, for an in-place update, one
    `DisjointSlice` parameter that each thread reads and writes at its own index."""
    text = (
        "an output may not share memory with any other argument; pass a separate buffer "
        f"(for example `dev.empty(...)`) for `{out.name}`"
    )
    if other.is_output or out.slice_kind is None or not out.slice_kind.name.startswith("Disjoint"):
        return text
    return (
        f"{text}; to update in place, drop `{other.name}` and read-modify-write through the output: "
        f"`{out.name}[i] = f({out.name}[i])` reads this thread's own element of the `{out.slice_kind.name}` "
        "before writing it"
    )


def is_array_like(v: object) -> bool:
    return isinstance(v, (Buffer, np.ndarray)) or hasattr(v, "__cuda_array_interface__") or hasattr(v, "__dlpack__")


# ---- scalars ----------------------------------------------------------------------------


def scalar_converter(kernel: str, p: ParamSpec, sample: object) -> ScalarConverter:
    """A converter for arguments of `type(sample)` to parameter `p`; raises for a wrong kind."""
    s = p.scalar
    np_type = s.dtype.type if not s.is_half else np.uint8 if s.is_f8 else np.uint16
    if is_array_like(sample):
        raise arg_error(
            kernel, p, f"expects {describe_param(p)}, got {describe_value(sample)}",
            help="pass a number (a Python int/float/bool or a NumPy scalar) for a scalar parameter",
        )
    if s.kind == "b":
        if not isinstance(sample, (bool, np.bool_)):
            raise arg_error(kernel, p, f"expects a bool, got {describe_value(sample)}")
        return lambda v: np.uint8(bool(v))  # bool_ travels as an i8
    if s.kind == "f":
        if isinstance(sample, (bool, np.bool_)) or not isinstance(sample, (int, float, np.integer, np.floating)):
            raise arg_error(kernel, p, f"expects a number for {s.name}, got {describe_value(sample)}")
        if s.bits == 32:

            def to_f32(v: Any) -> Any:
                f = _as_float(kernel, p, v)
                if abs(f) > _F32_MAX and f == f and abs(f) != float("inf"):
                    raise arg_error(kernel, p, f"{_short(v)} does not fit in f32 (largest finite value {_F32_MAX:.6g})")
                return np.float32(f)

            return to_f32
        if s.is_half:
            return _half_converter(kernel, p)
        return lambda v: np.float64(_as_float(kernel, p, v))
    lo, hi = _INT_RANGE[s.name]
    if isinstance(sample, (bool, np.bool_)) or not isinstance(sample, (int, np.integer)):
        raise arg_error(
            kernel, p, f"expects an integer for {s.name}, got {describe_value(sample)}",
            help=f"pass an int (convert explicitly with `int(x)` if truncation is intended)",
        )

    def to_int(v: Any) -> Any:
        n = int(v)
        if n < lo or n > hi:
            raise arg_error(kernel, p, f"{_short(n)} does not fit in {s.name} (range {lo} to {hi})")
        return np_type(n)

    return to_int


def _half_converter(kernel: str, p: ParamSpec) -> ScalarConverter:
    """f16/bf16 scalars travel as their 16-bit pattern (a `np.uint16`), rounded to nearest even;
    f8e4m3/f8e5m2 as their 8-bit pattern (a `np.uint8`), refused beyond the largest finite value."""
    name = p.scalar.name
    if p.scalar.is_f8:
        top = bits_to_float(F8_MAX_BITS[name], name)

        def to_f8(v: Any) -> Any:
            f = _as_float(kernel, p, v)
            if abs(f) > top and f == f:
                raise arg_error(kernel, p, f"{_short(v)} does not fit in {name} (largest finite value {top:g})")
            return np.uint8(round_bits(f, name))

        return to_f8
    inf = 0x7C00 if name == "f16" else 0x7F80

    def to_half(v: Any) -> Any:
        f = _as_float(kernel, p, v)
        h = round_bits(f, name)
        if h & 0x7FFF == inf and f == f and abs(f) != float("inf"):
            raise arg_error(kernel, p, f"{_short(v)} does not fit in {name} (it would round to infinity)")
        return np.uint16(h)

    return to_half


def _as_float(kernel: str, p: ParamSpec, v: Any) -> float:
    """`float(v)`; an int too large for any float (`10**400`) is an ArgumentError, not an
    OverflowError."""
    try:
        return float(v)
    except OverflowError:
        raise arg_error(kernel, p, f"{_short(v)} does not fit in {p.scalar.name} (it is beyond every float's range)") from None


def _short(v: Any) -> str:
    """A value for a message: a huge int by its first digits and its length."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**24:
        text = str(v)
        return f"{text[:12]}... ({len(text.lstrip('-'))} digits)"
    return repr(v)


# ---- slices -----------------------------------------------------------------------------


_TORCH_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}


def _c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None, unit: int) -> bool:
    """Row-major with no gaps; `strides` in units of `unit` bytes (1 for bytes, itemsize for elements)."""
    if strides is None:
        return True
    expect = unit
    for dim, st in zip(reversed(shape), reversed(strides), strict=True):
        if dim > 1 and st != expect:
            return False
        expect *= dim
    return True


def _element_matches(p: ParamSpec, dtype: np.dtype | None) -> bool:
    """Whether `dtype` is the parameter's element type; bf16 by its name (ml_dtypes' dtype, which
    whoever made the array imported: comparing with `p.scalar.dtype` would import it here)."""
    if dtype is None:
        return False
    if p.scalar.numpy_name in ML_DTYPES:  # bf16, f8e4m3, f8e5m2
        return dtype.name == p.scalar.numpy_name and dtype.itemsize * 8 == p.scalar.mem_bits
    return bool(dtype == p.scalar.dtype)


def _expect(
    kernel: str, p: ParamSpec, dtype: np.dtype | None, shape: tuple[int, ...], dtype_text: str, scalar: str | None = None
) -> None:
    """`scalar`: the element type the producer names (a DLPack capsule's, runtime/dlpack.py
    `scalar_of`: bf16 too, which has no NumPy dtype of its own), else read from `dtype`."""
    if not (p.scalar.name == scalar if scalar is not None else _element_matches(p, dtype)):
        if p.scalar.numpy_name == "bfloat16" or scalar == "bf16":
            raise arg_error(
                kernel, p, f"expects elements of {p.scalar.name}, got {dtype_text}",
                help=f"convert it to {p.scalar.name} in its own library first "
                f"(in PyTorch: `t.to(torch.{_TORCH_NAMES.get(p.scalar.name, p.scalar.numpy_name)})`)",
            )
        raise arg_error(
            kernel, p, f"expects elements of {p.scalar.name} ({p.scalar.dtype}), got {dtype_text}",
            help=f"convert with `.astype(np.{p.scalar.dtype.name})` before the launch",
        )
    if len(shape) != p.rank:
        raise arg_error(
            kernel, p, f"expects a {p.rank}-D array ({describe_param(p)}), got {len(shape)}-D with shape {shape}",
            help="reshape to (n,) for a 1-D slice or (rows, cols) for a 2-D slice",
        )


def numpy_adapter(kernel: str, p: ParamSpec) -> SliceAdapter:
    """A NumPy array used in place (CPU backend only)."""

    def adapt(a: np.ndarray) -> tuple[int, tuple[int, ...], int]:
        _expect(kernel, p, a.dtype, a.shape, str(a.dtype))
        if not a.flags.c_contiguous:
            raise arg_error(
                kernel, p, f"expects a C-contiguous array, got strides {a.strides} for shape {a.shape}",
                help="pass `np.ascontiguousarray(x)` (a copy)",
            )
        if p.is_output and not a.flags.writeable:
            raise arg_error(kernel, p, "is an output, but the NumPy array is read-only")
        return a.ctypes.data, a.shape, a.nbytes

    return adapt


def cai_adapter(kernel: str, p: ParamSpec, device: Any) -> SliceAdapter:
    """An object with `__cuda_array_interface__` (v3): CuPy, PyTorch, Numba, ... (GPU only)."""
    pointer_device = lazy.cuda_device().pointer_device

    index = device.index
    fallback: list[SliceAdapter] = []

    def adapt(a: Any) -> tuple[int, tuple[int, ...], int]:
        try:
            cai = a.__cuda_array_interface__
        except Exception as e:  # a CPU torch tensor, a tensor that requires grad, ...
            if hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
                if not fallback:
                    fallback.append(dlpack_adapter(kernel, p, device))
                return fallback[0](a)
            raise arg_error(kernel, p, f"its __cuda_array_interface__ failed: {e}") from None
        shape = tuple(int(s) for s in cai["shape"])
        typestr = cai["typestr"]
        try:
            dtype: np.dtype | None = np.dtype(typestr)
        except TypeError:
            dtype = None
        if (dtype is None or dtype.kind == "V") and hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
            # an element type the interface cannot spell (bf16 is `|V2` there): DLPack names it, zero-copy too
            if not fallback:
                fallback.append(dlpack_adapter(kernel, p, device))
            return fallback[0](a)
        _expect(kernel, p, dtype, shape, str(dtype) if dtype is not None else typestr)
        assert dtype is not None
        strides = cai.get("strides")
        if not _c_contiguous(shape, tuple(strides) if strides is not None else None, dtype.itemsize):
            raise arg_error(
                kernel, p, f"expects a C-contiguous array, got strides {tuple(strides)} for shape {shape}",
                help="pass a contiguous copy (`x.copy()` in CuPy, `x.contiguous()` in PyTorch)",
            )
        if cai.get("mask") is not None:
            raise arg_error(kernel, p, "masked arrays are not supported")
        ptr, readonly = cai["data"]
        ptr = int(ptr or 0)
        if readonly and p.is_output:
            raise arg_error(kernel, p, "is an output, but the array is marked read-only")
        nbytes = dtype.itemsize
        for s in shape:
            nbytes *= s
        if nbytes and ptr:
            owner = pointer_device(ptr)
            if owner != index:
                where = "host memory" if owner is None else f"cuda:{owner}"
                raise arg_error(
                    kernel, p, f"lives in {where}, but the launch runs on cuda:{index}",
                    help="move the array to the launch's device first",
                )
        stream = cai.get("stream")
        if stream is not None and stream != 0:
            device.wait_for_stream(int(stream))
        return ptr, shape, nbytes

    return adapt


DLPACK_LEGACY_STREAM = 1  # DLPack's name for CUDA's legacy default stream


def dlpack_adapter(kernel: str, p: ParamSpec, device: Any) -> SliceAdapter:
    """An object with `__dlpack__` but no CUDA array interface (GPU only)."""
    index = device.index

    def adapt(a: Any) -> tuple[int, tuple[int, ...], int]:
        dev_type, dev_id = a.__dlpack_device__()
        if int(dev_type) != dlpack.KDL_CUDA or int(dev_id) != index:
            where = "host memory" if int(dev_type) in (1, 3) else f"DLPack device {(int(dev_type), int(dev_id))}"
            raise arg_error(
                kernel, p, f"lives in {where}, but the launch runs on cuda:{index}",
                help="move the array to the launch's device first",
            )
        try:
            # The consumer stream named is the legacy default stream (1), not ours: every stream a
            # launch runs on is a blocking stream, which already waits for the legacy stream's
            # work, so a producer on the legacy stream (PyTorch's default) adds nothing, and one on
            # another stream orders the legacy stream after it.  Naming ours made PyTorch record
            # and wait on an event every launch: a bubble between kernels (0.290 vs 0.274 ms a
            # vecadd of 2^26 back to back on an H100) and twice the event-timed latency.
            capsule = a.__dlpack__(stream=DLPACK_LEGACY_STREAM)
        except TypeError:
            capsule = a.__dlpack__()
        except Exception as e:  # e.g. a torch tensor that requires grad
            raise arg_error(kernel, p, f"its __dlpack__ failed: {e}") from None
        try:
            t = dlpack.read_capsule(capsule)
        except TypeError as e:  # a versioned capsule unasked for, a malformed one
            raise arg_error(kernel, p, f"its __dlpack__ gave a capsule anodize cannot read: {e}") from None
        _expect(kernel, p, None, t.shape, t.dtype_text, scalar=t.scalar)  # (the capsule's scalar alone decides)
        if not _c_contiguous(t.shape, t.strides, 1):
            raise arg_error(
                kernel, p, f"expects a C-contiguous array, got element strides {t.strides} for shape {t.shape}",
                help="pass a contiguous copy",
            )
        nbytes = t.itemsize
        for s in t.shape:
            nbytes *= s
        return t.ptr, t.shape, nbytes

    return adapt

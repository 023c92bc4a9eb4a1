"""The kernel language's types: scalars, slices and index witnesses.

These classes exist for three readers: the kernel author (documentation and
autocompletion), plain mypy (which already rejects a write to a `Slice` or a
`DisjointSlice` written at an int), and the compiler, which never executes a
kernel body but reads its annotations.  The semantic tables (dtype, bit width,
signedness) live in `anodize.language.vocab`, the one shared kernel model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, Protocol, Self, TypeVar, final

# the index witnesses live in witnesses.py; this module is their public home (`__all__`)
from anodize.witnesses import BlockWitness1D, Index1D, Index2D, Index3D, LocalIndex, LocalIndex2D, Tile2D, _device_only

__all__ = [
    "Constant",
    "f32",
    "f64",
    "i32",
    "i64",
    "u32",
    "u64",
    "bool_",
    "f16",
    "bf16",
    "i8",
    "i16",
    "u8",
    "u16",
    "f8e4m3",
    "f8e5m2",
    "Scalar",
    "Slice",
    "DisjointSlice",
    "Slice2D",
    "DisjointSlice2D",
    "Slice3D",
    "DisjointSlice3D",
    "AtomicSlice",
    "LocalArray",
    "Index1D",
    "Index2D",
    "Index3D",
    "BlockWitness1D",
    "Tile2D",
    "LocalIndex",
    "LocalIndex2D",
    "CudaArray",
    "DLPackArray",
]


class _Float(float):
    """Arithmetic between a float scalar type and a Python float keeps the scalar type
    (weak literals): `x * 2.0` with `x: f32` is an f32."""

    def __add__(self, other: float) -> Self: ...  # type: ignore[override]
    def __radd__(self, other: float) -> Self: ...  # type: ignore[override]
    def __sub__(self, other: float) -> Self: ...  # type: ignore[override]
    def __rsub__(self, other: float) -> Self: ...  # type: ignore[override]
    def __mul__(self, other: float) -> Self: ...  # type: ignore[override]
    def __rmul__(self, other: float) -> Self: ...  # type: ignore[override]
    def __truediv__(self, other: float) -> Self: ...  # type: ignore[override]
    def __rtruediv__(self, other: float) -> Self: ...  # type: ignore[override]
    def __floordiv__(self, other: float) -> Self: ...  # type: ignore[override]
    def __mod__(self, other: float) -> Self: ...  # type: ignore[override]
    def __pow__(self, other: float) -> Self: ...  # type: ignore[override]
    def __neg__(self) -> Self: ...
    def __pos__(self) -> Self: ...
    def __abs__(self) -> Self: ...


class _Int(int):
    """Arithmetic between an integer scalar type and a Python int keeps the scalar type."""

    def __add__(self, other: int) -> Self: ...  # type: ignore[override]
    def __radd__(self, other: int) -> Self: ...  # type: ignore[override]
    def __sub__(self, other: int) -> Self: ...  # type: ignore[override]
    def __rsub__(self, other: int) -> Self: ...  # type: ignore[override]
    def __mul__(self, other: int) -> Self: ...  # type: ignore[override]
    def __rmul__(self, other: int) -> Self: ...  # type: ignore[override]
    def __floordiv__(self, other: int) -> Self: ...  # type: ignore[override]
    def __mod__(self, other: int) -> Self: ...  # type: ignore[override]
    def __lshift__(self, other: int) -> Self: ...  # type: ignore[override]
    def __rshift__(self, other: int) -> Self: ...  # type: ignore[override]
    def __and__(self, other: int) -> Self: ...  # type: ignore[override]
    def __or__(self, other: int) -> Self: ...  # type: ignore[override]
    def __xor__(self, other: int) -> Self: ...  # type: ignore[override]
    def __neg__(self) -> Self: ...
    def __pos__(self) -> Self: ...
    def __abs__(self) -> Self: ...
    def __invert__(self) -> Self: ...


# The arithmetic stubs above are declarations for type checkers; at run time the
# scalar types behave as the Python numbers they subclass, so `f32(1.5)` works on the host.
for _base, _num in ((_Float, float), (_Int, int)):
    for _name in list(vars(_base)):
        if _name.startswith("__") and _name not in ("__doc__", "__module__", "__qualname__", "__dict__", "__weakref__"):
            if hasattr(_num, _name):
                delattr(_base, _name)


@final
class f32(_Float):
    """32-bit IEEE float (`float` in CUDA C)."""


@final
class f64(_Float):
    """64-bit IEEE float (`double`)."""


@final
class i32(_Int):
    """32-bit signed integer, two's complement, wraps on overflow."""


@final
class i64(_Int):
    """64-bit signed integer, two's complement, wraps on overflow."""


@final
class u32(_Int):
    """32-bit unsigned integer; arithmetic wraps modulo 2**32."""


@final
class u64(_Int):
    """64-bit unsigned integer; arithmetic wraps modulo 2**64."""


@final
class bool_(_Int):
    """A kernel boolean (`i1` in LLVM, a byte in memory)."""


@final
class f16(_Float):
    """16-bit IEEE half float (`__half`); computed in f32 and rounded to nearest even after
    every operation.  Host arrays: NumPy `float16`."""


@final
class bf16(_Float):
    """bfloat16 (`__nv_bfloat16`): f32's range with 8 bits of precision; computed in f32 and
    rounded to nearest even after every operation.  Host arrays: `ml_dtypes.bfloat16`."""


@final
class i8(_Int):
    """8-bit signed integer; wraps on overflow (`i8 + i8` stays i8, as in NumPy)."""


@final
class i16(_Int):
    """16-bit signed integer; wraps on overflow."""


@final
class u8(_Int):
    """8-bit unsigned integer; arithmetic wraps modulo 2**8."""


@final
class u16(_Int):
    """16-bit unsigned integer; arithmetic wraps modulo 2**16."""


class _Float8(float):
    """An 8-bit float: stored as 8 bits, promoted to f16 in arithmetic (`x + y` of two f8
    values is an f16), converted to with `f8e4m3(x)` / `f8e5m2(x)` (round to nearest even,
    saturating to the largest finite value, as the GPU's `cvt.rn.satfinite`)."""

    if TYPE_CHECKING:
        def __add__(self, other: float) -> f16: ...  # type: ignore[override]
        def __radd__(self, other: float) -> f16: ...  # type: ignore[override]
        def __sub__(self, other: float) -> f16: ...  # type: ignore[override]
        def __rsub__(self, other: float) -> f16: ...  # type: ignore[override]
        def __mul__(self, other: float) -> f16: ...  # type: ignore[override]
        def __rmul__(self, other: float) -> f16: ...  # type: ignore[override]
        def __truediv__(self, other: float) -> f16: ...  # type: ignore[override]
        def __rtruediv__(self, other: float) -> f16: ...  # type: ignore[override]
        def __neg__(self) -> f16: ...  # type: ignore[override]
        def __abs__(self) -> f16: ...  # type: ignore[override]


@final
class f8e4m3(_Float8):
    """OCP FP8 E4M3 (`__nv_fp8_e4m3`): 4 exponent bits, 3 fraction bits, no infinity, largest
    value 448.  Host arrays: `ml_dtypes.float8_e4m3fn`."""


@final
class f8e5m2(_Float8):
    """OCP FP8 E5M2 (`__nv_fp8_e5m2`): 5 exponent bits, 2 fraction bits (an f16's upper byte),
    largest finite value 57344.  Host arrays: `ml_dtypes.float8_e5m2`."""


Scalar = f32 | f64 | i32 | i64 | u32 | u64 | bool_ | f16 | bf16 | i8 | i16 | u8 | u16 | f8e4m3 | f8e5m2

T = TypeVar("T", f32, f64, i32, i64, u32, u64, bool_, f16, bf16, i8, i16, u8, u16, f8e4m3, f8e5m2)

# a slice's element: a scalar type or an `@az.record` class (`Slice[Particle]`)
_E = TypeVar("_E")

_V = TypeVar("_V", int, float, bool)
Constant = Annotated[_V, "anodize.Constant"]
"""`n: az.Constant[int]` (or `[float]`, `[bool]`): a compile-time parameter. Each value a
launch passes compiles its own specialisation, in which `n` is a constant (it may size a
`range` to unroll or a shared array). Type checkers read `Constant[int]` as `int`."""


class _SliceBase(Generic[_E]):
    __slots__ = ()

    def __init__(self) -> None:
        _device_only(type(self).__name__)

    def __len__(self) -> int:
        _device_only("len")


@final
class LocalArray(Generic[T]):
    """A per-thread array made by `az.local.array(shape, T)`: `a[i]` / `a[i, j]` read and
    write, `len(a)`.  Private to its thread; it cannot be returned, stored or rebound.  A
    helper parameter annotated `LocalArray[T]` (or unannotated) takes the caller's array by
    reference."""

    __slots__ = ()

    def __init__(self) -> None:
        _device_only("LocalArray")

    def __getitem__(self, i: int | tuple[int, ...]) -> T:
        _device_only("LocalArray.__getitem__")

    def __setitem__(self, i: int | tuple[int, ...], v: T | float) -> None:
        _device_only("LocalArray.__setitem__")

    def __len__(self) -> int:
        _device_only("len")


@final
class Slice(_SliceBase[_E]):
    """A shared, read-only 1-D input: `a[j]` reads, `len(a)`; no write of any kind."""

    def __getitem__(self, j: int | Index1D) -> _E:
        _device_only("Slice.__getitem__")

    def __contains__(self, j: int | Index1D) -> bool:
        """`i in a`: a bounds guard on a read."""
        _device_only("Slice.__contains__")


@final
class DisjointSlice(_SliceBase[_E]):
    """A 1-D output in which each element has exactly one writer: this thread's witness."""

    def __getitem__(self, i: Index1D | BlockWitness1D) -> _E:
        _device_only("DisjointSlice.__getitem__")

    def __setitem__(self, i: Index1D | BlockWitness1D, v: _E | float) -> None:
        _device_only("DisjointSlice.__setitem__")

    def __contains__(self, i: Index1D | BlockWitness1D) -> bool:
        _device_only("DisjointSlice.__contains__")

    def write_unchecked(self, j: int, v: _E | float) -> None:
        """Unsafe tier only: write element `j` with no ownership proof."""
        _device_only("DisjointSlice.write_unchecked")


@final
class Slice2D(_SliceBase[_E]):
    """A shared, read-only row-major 2-D input: `m[r, c]` reads, `.shape`."""

    @property
    def shape(self) -> tuple[int, int]:
        """`(rows, cols)` of the slice."""
        _device_only("Slice2D.shape")

    def __getitem__(self, rc: tuple[int, int] | Index2D) -> _E:
        _device_only("Slice2D.__getitem__")

    def __contains__(self, rc: tuple[int, int] | Index2D) -> bool:
        """`ij in m`: a bounds guard on a read."""
        _device_only("Slice2D.__contains__")


@final
class DisjointSlice2D(_SliceBase[_E]):
    """A row-major 2-D output written only at this thread's `Index2D`."""

    @property
    def shape(self) -> tuple[int, int]:
        """`(rows, cols)` of the slice."""
        _device_only("DisjointSlice2D.shape")

    def __getitem__(self, i: Index2D) -> _E:
        _device_only("DisjointSlice2D.__getitem__")

    def __setitem__(self, i: Index2D, v: _E | float) -> None:
        _device_only("DisjointSlice2D.__setitem__")

    def __contains__(self, i: Index2D) -> bool:
        _device_only("DisjointSlice2D.__contains__")

    def write_unchecked(self, rc: tuple[int, int], v: _E | float) -> None:
        """Unsafe tier only: write element `(row, col)` with no ownership proof."""
        _device_only("DisjointSlice2D.write_unchecked")


AtomicScope = Literal["device", "system"]
AtomicOrder = Literal["relaxed", "acquire", "release", "acq_rel", "seq_cst"]


@final
class Slice3D(_SliceBase[_E]):
    """A shared, read-only row-major 3-D input of shape `(layers, rows, cols)`:
    `v[l, r, c]` reads, `.shape`."""

    @property
    def shape(self) -> tuple[int, int, int]:
        """`(layers, rows, cols)` of the 3-D slice, as ints."""
        _device_only("Slice3D.shape")

    def __getitem__(self, lrc: tuple[int, int, int] | Index3D) -> _E:
        _device_only("Slice3D.__getitem__")

    def __contains__(self, lrc: tuple[int, int, int] | Index3D) -> bool:
        """`ijk in v`: a bounds guard on a read."""
        _device_only("Slice3D.__contains__")


@final
class DisjointSlice3D(_SliceBase[_E]):
    """A row-major 3-D output `(layers, rows, cols)` written only at this thread's `Index3D`."""

    @property
    def shape(self) -> tuple[int, int, int]:
        """`(layers, rows, cols)` of the 3-D slice, as ints."""
        _device_only("DisjointSlice3D.shape")

    def __getitem__(self, i: Index3D) -> _E:
        _device_only("DisjointSlice3D.__getitem__")

    def __setitem__(self, i: Index3D, v: _E | float) -> None:
        _device_only("DisjointSlice3D.__setitem__")

    def __contains__(self, i: Index3D) -> bool:
        _device_only("DisjointSlice3D.__contains__")

    def write_unchecked(self, lrc: tuple[int, int, int], v: _E | float) -> None:
        """Unsafe tier only: write element `(layer, row, col)` with no ownership proof."""
        _device_only("DisjointSlice3D.write_unchecked")


@final
class AtomicSlice(_SliceBase[T]):
    """A shared output updated only through atomics; each read-modify-write returns the old value.

    Every method takes `scope="device"|"system"` and `order="relaxed"|"acquire"|"release"|
    "acq_rel"|"seq_cst"` (keywords; defaults device, relaxed)."""

    def add(self, j: int | Index1D, v: T | float, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> T:
        """Atomically adds `v`; returns the old value."""
        _device_only("AtomicSlice.add")

    def sub(self, j: int | Index1D, v: T | float, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> T:
        """Atomically subtracts `v`; returns the old value."""
        _device_only("AtomicSlice.sub")

    def min(self, j: int | Index1D, v: T | float, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> T:
        """Atomically keeps the smaller of the element and `v`; returns the old value."""
        _device_only("AtomicSlice.min")

    def max(self, j: int | Index1D, v: T | float, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> T:
        """Atomically keeps the larger of the element and `v`; returns the old value."""
        _device_only("AtomicSlice.max")

    def exchange(self, j: int | Index1D, v: T | float, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> T:
        """Atomically stores `v`; returns the old value."""
        _device_only("AtomicSlice.exchange")

    def and_(self, j: int | Index1D, v: T | int, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> T:
        """Atomically bitwise-ands `v` in (integer elements); returns the old value."""
        _device_only("AtomicSlice.and_")

    def or_(self, j: int | Index1D, v: T | int, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> T:
        """Atomically bitwise-ors `v` in (integer elements); returns the old value."""
        _device_only("AtomicSlice.or_")

    def xor(self, j: int | Index1D, v: T | int, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> T:
        """Atomically bitwise-xors `v` in (integer elements); returns the old value."""
        _device_only("AtomicSlice.xor")

    def compare_exchange(self, j: int | Index1D, expected: T | int, new: T | int, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> T:
        """Atomically stores `new` if the element equals `expected` (integer elements); returns the old value."""
        _device_only("AtomicSlice.compare_exchange")

    def load(self, j: int | Index1D, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> T:
        """Atomically reads the element atomically; returns it."""
        _device_only("AtomicSlice.load")

    def store(self, j: int | Index1D, v: T | float, *, scope: AtomicScope = "device", order: AtomicOrder = "relaxed") -> None:
        """Atomically writes `v` atomically; returns None."""
        _device_only("AtomicSlice.store")


# ---- host-side array protocols (typing only) -------------------------------------------


class CudaArray(Protocol):
    """Any device array that exposes the CUDA array interface (an anodize `Buffer`, CuPy,
    PyTorch, numba): what a launch accepts for a slice parameter."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...


class DLPackArray(Protocol):
    """Any array exchanged through DLPack (`__dlpack__`): also accepted for a slice parameter."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

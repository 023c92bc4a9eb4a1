"""DLPack in both directions, with ctypes: export a Buffer as a `dltensor` capsule, read a foreign one.

The capsule holds a `DLManagedTensor` whose `manager_ctx` keeps the exporting
Buffer (and so its memory) alive until the consumer calls `deleter`.  A capsule
nobody consumed is released by its own destructor, which calls `deleter` too.
"""

from __future__ import annotations

import ctypes
import functools
import struct
from typing import Any

import numpy as np

from anodize.language.records import dataclass
from anodize.language.vocab import SCALARS, ScalarInfo

KDL_CPU = 1
KDL_CUDA = 2

_KDL_INT, _KDL_UINT, _KDL_FLOAT, _KDL_BOOL = 0, 1, 2, 6
_KDL_BFLOAT = 4
_KDL_F8 = {"f8e4m3": 10, "f8e5m2": 12}  # DLPack 1.1's kDLFloat8_e4m3fn, kDLFloat8_e5m2
_KIND_CODE = {"i": _KDL_INT, "u": _KDL_UINT, "f": _KDL_FLOAT, "b": _KDL_BOOL}
_CODE_KIND = {v: k for k, v in _KIND_CODE.items()}


def dl_dtype(scalar: ScalarInfo) -> tuple[int, int]:
    """DLPack's (type code, bits) of a scalar's elements (one lane)."""
    code = _KDL_BFLOAT if scalar.name == "bf16" else _KDL_F8.get(scalar.name) or _KIND_CODE[scalar.kind]
    return code, scalar.mem_bits


_SCALAR_OF = {dl_dtype(info): name for name, info in SCALARS.items()}


def scalar_of(code: int, bits: int, lanes: int = 1) -> str | None:
    """The anodize scalar (its name: `f16`, `bool_`, ...) whose elements a DLPack data type
    describes; None where none is (another width, several lanes, a type anodize lacks).  The one
    table both directions read: `export` writes `dl_dtype`, whoever reads a capsule this."""
    return _SCALAR_OF.get((code, bits)) if lanes == 1 else None


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _DELETER),
]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Must outlive every capsule: PyCapsule keeps the pointer, not a copy.
_NAME = b"dltensor"
_NAME_V = b"dltensor_versioned"

# Exported tensors still owned by a consumer or an unconsumed capsule: address -> keep-alive.
_LIVE: dict[int, tuple[Any, ...]] = {}


def _release(addr: int | None) -> None:
    if addr:
        _LIVE.pop(addr, None)


_deleter_c = _DELETER(_release)

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# Inside a capsule destructor the capsule has no references left: take it as a raw pointer.
_capsule_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_capsule_get_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


def _destroy_capsule(capsule: int | None) -> None:
    if capsule and _capsule_is_valid_raw(capsule, _NAME):  # renamed ("used_dltensor") once consumed
        _release(_capsule_get_pointer_raw(capsule, _NAME))


def _destroy_capsule_v(capsule: int | None) -> None:
    if capsule and _capsule_is_valid_raw(capsule, _NAME_V):
        _release(_capsule_get_pointer_raw(capsule, _NAME_V))


_destructor_c = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_destroy_capsule)
_destructor_v_c = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_destroy_capsule_v)


def export(
    ptr: int,
    shape: tuple[int, ...],
    scalar: ScalarInfo,
    device: tuple[int, int],
    owner: object,
    *,
    versioned: bool = False,
) -> object:
    """A DLPack capsule for C-contiguous memory at `ptr`; `owner` stays alive until released.

    `versioned` gives a DLPack 1.0 `dltensor_versioned` capsule (writable, flags 0),
    else a legacy `dltensor` one."""
    ndim = len(shape)
    mt: DLManagedTensor | DLManagedTensorVersioned
    if versioned:
        mt = DLManagedTensorVersioned()
        mt.version = DLPackVersion(1, 0)
        mt.flags = 0
    else:
        mt = DLManagedTensor()
    c_shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides = [1] * ndim
    for k in range(ndim - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    c_strides = (ctypes.c_int64 * max(ndim, 1))(*strides)
    t = mt.dl_tensor
    t.data = ptr or None
    t.device = DLDevice(device[0], device[1])
    t.ndim = ndim
    t.dtype = DLDataType(*dl_dtype(scalar), 1)
    t.shape = ctypes.cast(c_shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(c_strides, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    addr = ctypes.addressof(mt)
    mt.manager_ctx = addr
    mt.deleter = _deleter_c
    _LIVE[addr] = (mt, c_shape, c_strides, owner)
    if versioned:
        return _capsule_new(addr, _NAME_V, ctypes.cast(_destructor_v_c, ctypes.c_void_p).value)
    return _capsule_new(addr, _NAME, ctypes.cast(_destructor_c, ctypes.c_void_p).value)


def live_exports() -> int:
    """How many exported tensors are still held by a consumer (for tests)."""
    return len(_LIVE)


@dataclass(frozen=True)
class ForeignTensor:
    """What a foreign `dltensor` capsule describes (the capsule is left unconsumed)."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements; None means C-contiguous
    dtype: np.dtype | None  # None when DLPack's type has no NumPy equivalent
    device_type: int
    device_id: int
    dtype_text: str
    itemsize: int = 0  # bytes per element (bf16's too, which has no NumPy dtype of its own)
    bf16: bool = False  # DLPack's kDLBfloat, 16 bits: anodize's bf16 (no ml_dtypes needed)
    scalar: str | None = None  # the anodize scalar of the elements (`scalar_of`), None where none is


# DLTensor's bytes (48 on every 64-bit ABI): data, device (type, id), ndim, dtype (code, bits,
# lanes), shape, strides, byte_offset; read with one `string_at` and one unpack instead of ctypes
# field by field (a launch reads one capsule per DLPack argument: 5.1 us instead of 9.4 on the dev VM)
_DLTENSOR = struct.Struct("<QiiiBBHQQQ")
assert _DLTENSOR.size == ctypes.sizeof(DLTensor)
_INT64S: dict[int, struct.Struct] = {}


def _int64s(addr: int, n: int) -> tuple[int, ...]:
    st = _INT64S.get(n)
    if st is None:
        st = _INT64S[n] = struct.Struct(f"<{n}q")
    return st.unpack(ctypes.string_at(addr, 8 * n)) if n else ()


@functools.cache
def _type_of(code: int, bits: int, lanes: int) -> tuple[np.dtype | None, str, int, bool, str | None]:
    """What a DLPack data type is here: (NumPy dtype or None, its text, bytes per element, bf16?,
    the anodize scalar or None); remembered per type seen."""
    kind = _CODE_KIND.get(code)
    dtype: np.dtype | None = None
    if code == _KDL_BFLOAT and bits == 16 and lanes == 1:
        kind = "bf"  # (no NumPy dtype: the caller reads `bf16`, ml_dtypes stays unloaded)
    elif kind is not None and lanes == 1:
        try:
            dtype = np.dtype(f"{kind}{bits // 8}") if kind != "b" else np.dtype(np.bool_)
        except TypeError:
            dtype = None
    text = f"{kind or f'code{code}'}{bits}" + (f"x{lanes}" if lanes != 1 else "")
    return dtype, text, bits * lanes // 8, kind == "bf", scalar_of(code, bits, lanes)


def read_capsule(capsule: object) -> ForeignTensor:
    """Describe a legacy `dltensor` capsule without consuming it (its destructor frees it)."""
    try:
        addr = _capsule_get_pointer(capsule, _NAME)  # DLManagedTensor begins with its DLTensor
    except ValueError:  # another name: consumed ("used_dltensor"), versioned, not DLPack at all
        addr = None
    if not addr:
        raise TypeError("not an unconsumed `dltensor` capsule (a versioned DLPack capsule is not supported)")
    data, dev_type, dev_id, ndim, code, bits, lanes, shape_p, strides_p, offset = _DLTENSOR.unpack(
        ctypes.string_at(addr, _DLTENSOR.size)
    )
    if ndim < 0 or (ndim and not shape_p):  # (`string_at` of address 0 gives uninitialised bytes, no error)
        raise TypeError(f"a malformed `dltensor` capsule (ndim {ndim}, shape array {'given' if shape_p else 'NULL'})")
    shape = _int64s(shape_p, ndim)
    strides = _int64s(strides_p, ndim) if strides_p else None
    dtype, text, itemsize, bf16, scalar = _type_of(code, bits, lanes)
    return ForeignTensor(
        ptr=data + offset,
        shape=shape,
        strides=strides,
        dtype=dtype,
        device_type=dev_type,
        device_id=dev_id,
        dtype_text=text,
        itemsize=itemsize,
        bf16=bf16,
        scalar=scalar,
    )

"""runtime/dlpack.py `read_capsule` (one `string_at` and one unpack) on every capsule shape a
producer may hand over, and on malformed ones: a 0-d tensor with no shape array, NULL strides
(C-contiguous), a byte offset, several lanes, a 1-byte bool; a versioned, consumed or foreign
capsule is a TypeError; a negative ndim or a NULL shape array with ndim > 0 is a TypeError too
(`string_at` of address 0 returns uninitialised bytes, not an error: the shape would be garbage
and a launch would take it for the array's extent).  The argument path (runtime/args.py
`dlpack_adapter`) reports a capsule it cannot read as the parameter's ArgumentError."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from anodize.language.errors import ArgumentError
from anodize.language.ir import ParamSpec
from anodize.language.vocab import SCALARS, SLICE_KINDS
from anodize.runtime import args as A
from anodize.runtime import dlpack


def _capsule(dims: tuple[int, ...] = (2, 3), name: str = "f32", device: tuple[int, int] = (1, 0), **fields: Any) -> Any:
    """An exported legacy capsule at 4096 with DLTensor fields rewritten (`lanes`, `bits` in its dtype)."""
    cap = dlpack.export(4096, dims, SCALARS[name], device, None)
    t = dlpack.DLManagedTensor.from_address(dlpack._capsule_get_pointer(cap, dlpack._NAME)).dl_tensor
    for k, v in fields.items():
        if k in ("lanes", "bits", "code"):
            setattr(t.dtype, k, v)
        else:
            setattr(t, k, v)
    return cap


def test_the_shapes_a_producer_may_hand_over_read_as_described() -> None:
    t = dlpack.read_capsule(_capsule((), shape=None, strides=None))
    assert (t.shape, t.strides, t.ptr) == ((), None, 4096)
    t = dlpack.read_capsule(_capsule(strides=None, byte_offset=64))
    assert (t.shape, t.strides, t.ptr, t.itemsize) == ((2, 3), None, 4160, 4)
    t = dlpack.read_capsule(_capsule(lanes=4))
    assert (t.dtype, t.scalar, t.itemsize, t.dtype_text) == (None, None, 16, "f32x4")
    t = dlpack.read_capsule(_capsule(name="bool_"))
    assert (t.dtype.name, t.scalar, t.itemsize) == ("bool", "bool_", 1)  # type: ignore[union-attr]


def test_a_capsule_read_cannot_describe_is_a_type_error() -> None:
    cases = {
        "versioned": dlpack.export(0, (2,), SCALARS["f32"], (1, 0), None, versioned=True),
        "not a capsule": 42,
        "no shape array": _capsule(shape=None),
        "negative ndim": _capsule(ndim=-1),
    }
    for what, cap in cases.items():
        with pytest.raises(TypeError):
            dlpack.read_capsule(cap)
            pytest.fail(what)


def test_the_argument_path_reports_an_unreadable_capsule_on_its_parameter() -> None:
    class Versioned:
        def __dlpack__(self, stream: Any = None) -> Any:
            return dlpack.export(0, (2,), SCALARS["f32"], (dlpack.KDL_CUDA, 0), None, versioned=True)

        def __dlpack_device__(self) -> tuple[int, int]:
            return (dlpack.KDL_CUDA, 0)

    device = SimpleNamespace(index=0, _stream_handle=lambda: None)
    adapt = A.dlpack_adapter("k", ParamSpec("x", SLICE_KINDS["Slice"], SCALARS["f32"]), device)
    with pytest.raises(ArgumentError, match="parameter `x`.*capsule"):
        adapt(Versioned())

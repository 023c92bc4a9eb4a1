"""One DLPack data-type table (runtime/dlpack.py `dl_dtype` / `scalar_of`) for every reader: the
generic launch's specialisation (runtime/generic.py `_dlpack_dtype_name`), the argument path's
element check (runtime/args.py `dlpack_adapter`) and the exporter.  Every (code, bits) the two
readers took before maps as it did; what the table adds is named below."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from anodize.language.errors import ArgumentError
from anodize.language.ir import ParamSpec
from anodize.language.vocab import SCALARS, SLICE_KINDS
from anodize.runtime import args as A
from anodize.runtime import dlpack
from anodize.runtime.generic import _dlpack_dtype_name

_BY_NUMPY = {info.numpy_name: name for name, info in SCALARS.items()}
CODES = range(16)
BITS = (1, 8, 16, 32, 64, 128)


def _before(code: int, bits: int, lanes: int) -> str | None:
    """What both readers made of a DLPack type before the table: read_capsule's NumPy dtype
    (kinds i/u/f/b, one lane) by its NumPy name, and kDLBfloat 16 as bf16."""
    if code == 4 and bits == 16 and lanes == 1:
        return "bf16"
    kind = {0: "i", 1: "u", 2: "f", 6: "b"}.get(code)
    if kind is None or lanes != 1:
        return None
    try:
        dt = np.dtype(f"{kind}{bits // 8}") if kind != "b" else np.dtype(np.bool_)
    except TypeError:
        return None
    return _BY_NUMPY.get(dt.name)


def _capsule(code: int, bits: int, lanes: int, device: tuple[int, int] = (1, 0)) -> Any:
    """An unconsumed `dltensor` capsule of one element of any DLPack type (made by the exporter,
    then its type rewritten)."""
    cap = dlpack.export(0, (1,), SCALARS["u8"], device, None)
    addr = dlpack._capsule_get_pointer(cap, dlpack._NAME)
    dlpack.DLManagedTensor.from_address(addr).dl_tensor.dtype = dlpack.DLDataType(code, bits, lanes)
    return cap


class _Foreign:
    """A tensor seen through `__dlpack__` alone (no `dtype`, no CUDA array interface)."""

    def __init__(self, code: int, bits: int, lanes: int = 1) -> None:
        self.t = (code, bits, lanes)

    def __dlpack__(self, stream: Any = None) -> Any:
        return _capsule(*self.t, device=(dlpack.KDL_CUDA, 0))

    def __dlpack_device__(self) -> tuple[int, int]:
        return (dlpack.KDL_CUDA, 0)


def test_every_code_both_readers_had_maps_as_before() -> None:
    changed = {}
    for code in CODES:
        for bits in BITS:
            for lanes in (1, 2):
                now, was = dlpack.scalar_of(code, bits, lanes), _before(code, bits, lanes)
                if now != was:
                    changed[(code, bits, lanes)] = (was, now)
    # added: DLPack 1.1's f8 codes (the exporter's already); refused: a "bool" of another width
    # than a byte (NumPy's bool_ had been taken for any width)
    assert changed == {(10, 8, 1): (None, "f8e4m3"), (12, 8, 1): (None, "f8e5m2"),
                       **{(6, b, 1): ("bool_", None) for b in BITS if b != 8}}


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_the_exporter_and_the_readers_share_the_table(name: str) -> None:
    code, bits = dlpack.dl_dtype(SCALARS[name])
    assert dlpack.scalar_of(code, bits) == name and dlpack.scalar_of(code, bits, 2) is None
    cap = dlpack.export(0, (3,), SCALARS[name], (1, 0), None)
    assert dlpack.read_capsule(cap).scalar == name


def test_the_generic_launch_reads_the_table() -> None:
    for code in CODES:
        for bits in BITS:
            assert _dlpack_dtype_name(_Foreign(code, bits)) == dlpack.scalar_of(code, bits), (code, bits)
    assert _dlpack_dtype_name(_Foreign(2, 32, 4)) is None


def test_the_argument_path_reads_the_table() -> None:
    device = SimpleNamespace(index=0, _stream_handle=lambda: None)
    for want in sorted(SCALARS):
        adapt = A.dlpack_adapter("k", ParamSpec("x", SLICE_KINDS["Slice"], SCALARS[want]), device)
        for code in CODES:
            for bits in BITS:
                got = dlpack.scalar_of(code, bits)
                if got == want:
                    assert adapt(_Foreign(code, bits)) == (0, (1,), bits // 8)
                else:
                    with pytest.raises(ArgumentError, match=f"expects elements of {want}"):
                        adapt(_Foreign(code, bits))


def test_the_argument_path_names_the_legacy_default_stream() -> None:
    """The consumer stream a launch names to `__dlpack__` is DLPack's 1 (the legacy default
    stream), whatever the device's own stream is: every launch stream is a blocking stream, so a
    producer on the legacy stream needs no event (PyTorch then records none) and one on another
    stream orders the legacy stream, and with it ours, after its work."""
    seen: list[Any] = []

    class Recording(_Foreign):
        def __dlpack__(self, stream: Any = None) -> Any:
            seen.append(stream)
            return super().__dlpack__()

    device = SimpleNamespace(index=0, _stream_handle=lambda: 0x5EED)
    adapt = A.dlpack_adapter("k", ParamSpec("x", SLICE_KINDS["Slice"], SCALARS["f32"]), device)
    assert adapt(Recording(2, 32)) == (0, (1,), 4)
    assert seen == [A.DLPACK_LEGACY_STREAM] == [1]

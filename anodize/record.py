"""Records: `@az.record` classes and their `az.Array[T, n]` fields (docs/records.md).

    @az.record
    class Particle:
        pos: az.Array[f32, 3]
        mass: f32

`Particle.dtype` is the NumPy structured dtype (`align=True`) of the record's C layout;
`dev.empty(n, Particle)` allocates n of them, `dev.to_device(structured_array)` copies such
an array, kernels take `Slice[Particle]` / `DisjointSlice[Particle]` / `Slice2D[Particle]`
and read `p[i].mass`, write `out[i] = Particle(pos=..., mass=...)` or `out[i].mass = m`.
On the host a record is a plain dataclass (`Particle(pos=(0.0, 0.0, 1.0), mass=2.0)`).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Generic, TypeVar, dataclass_transform

from anodize.language.record_types import ArrayFieldTy, layout
from anodize.language.types import BY_NAME

__all__ = ["record", "Array"]

_T = TypeVar("_T")
_C = TypeVar("_C", bound=type)


class Array(Generic[_T]):
    """`az.Array[T, n]`: a record field of n scalars of type T (n a constant int).  In a kernel,
    `p[i].ids[k]` reads element k (a constant) and `out[i].ids[k] = v` writes it."""

    __slots__ = ()

    def __class_getitem__(cls, params: Any) -> Any:  # `Array[i32, 4]` at run time
        if not (isinstance(params, tuple) and len(params) == 2 and isinstance(params[1], int)):
            raise TypeError("`az.Array` takes a scalar type and a length: `az.Array[i32, 4]`")
        return _ArrayField(params[0], params[1])

    def __getitem__(self, k: int) -> _T: ...  # noqa: D105 - kernels only

    def __setitem__(self, k: int, v: _T) -> None: ...  # noqa: D105 - kernels only


@dataclasses.dataclass(frozen=True)
class _ArrayField:
    elem: Any
    n: int


def _field_type(hint: Any, where: str) -> Any:
    if isinstance(hint, _ArrayField):
        return ArrayFieldTy(_field_type(hint.elem, where), hint.n)
    rec = getattr(hint, "__az_record__", None)
    if rec is not None:
        return rec
    if isinstance(hint, type) and hint.__module__ == "anodize.types" and hint.__name__ in BY_NAME:
        return BY_NAME[hint.__name__]
    raise TypeError(f"{where}: {hint!r} is not a record field type (a scalar, `az.Array[T, n]` or an `@az.record` class)")


@dataclass_transform()
def record(cls: _C) -> _C:
    """Make `cls` a record type: its annotated fields, in order, with C's layout (that of
    NumPy's `np.dtype([...], align=True)`, given as `cls.dtype`)."""
    hints = typing.get_type_hints(cls)
    own = [n for n in cls.__dict__.get("__annotations__", {})]
    out = dataclasses.dataclass(cls)
    try:
        fields = [(n, _field_type(hints[n], f"{cls.__name__}.{n}")) for n in own]
    except TypeError as e:  # `anodize check` reports it (az-type); buffers and kernels of it are refused
        out.__az_record_error__ = str(e)  # type: ignore[attr-defined]
        return out  # type: ignore[no-any-return]
    rec = layout(cls.__name__, fields)
    out.__az_record__ = rec  # type: ignore[attr-defined]
    out.dtype = rec.info.dtype  # type: ignore[attr-defined]
    return out  # type: ignore[no-any-return]

"""`az.Bundle`: several slices of their own roles passed as one kernel parameter
(docs/records.md, "Bundles").

    class State(az.Bundle):
        pos: Slice[f32]
        vel: DisjointSlice[f32]

    step[cfg](State(pos=a, vel=b), 0.01)

A bundle class is a dataclass of its fields (buffers or any array a slice parameter takes);
a launch passes its fields, in declaration order, as the kernel's parameters `s.pos`,
`s.vel` (the front end reads a bundle parameter as its fields: language/bundles.py), so each
field keeps its role and the aliasing check covers every pair of fields and every other
argument.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, dataclass_transform

import numpy as np

__all__ = ["Bundle", "expand", "has_bundles"]


@dataclass_transform()
class Bundle:
    """Base of a bundle class: its annotated fields, in order, each a slice type."""

    __az_fields__: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(cls)
        cls.__az_fields__ = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def has_bundles(fn: Any) -> bool:
    """Does the kernel function take a bundle, or a record by value (both launched as their parts)?"""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - an annotation the runtime cannot resolve: no bundle it can see
        return False
    return any(isinstance(h, type) and (issubclass(h, Bundle) or hasattr(h, "__az_record__")) for h in hints.values())


def record_leaves(value: Any, rec: Any) -> list[Any]:
    """The scalars of a record value (an `@az.record` instance, or a NumPy structured scalar),
    in the record's layout order (`RecordTy.leaves`): a kernel's record parameter by value."""
    out: list[Any] = []
    for path, _, _ in rec.leaves():
        v = value
        for part in path:
            if part.isdigit():
                v = v[int(part)]
            elif isinstance(v, np.void):  # a structured scalar (`arr[0]` of a record array)
                v = v[part]
            else:
                v = getattr(v, part)
        out.append(v)
    return out


def expand(args: tuple[Any, ...], records: dict[int, Any] | None = None) -> tuple[Any, ...]:
    """A launch's arguments with each bundle replaced by its fields, in declaration order, and
    each record value (at the positions of `records`: position -> its RecordTy) by its scalars."""
    out: list[Any] = []
    for k, a in enumerate(args):
        if isinstance(a, Bundle):
            out.extend(getattr(a, f) for f in a.__az_fields__)
        elif records and k in records:
            out.extend(record_leaves(a, records[k]))
        else:
            out.append(a)
    return tuple(out)


def bundle_positions(fn: Any) -> tuple[tuple[int, ...], dict[int, Any]]:
    """The positions of a kernel's bundle parameters, and of its records by value (-> RecordTy)."""
    hints = typing.get_type_hints(fn)
    names = list(inspect.signature(fn).parameters)
    bundles = tuple(i for i, n in enumerate(names) if isinstance(hints.get(n), type) and issubclass(hints[n], Bundle))
    records = {i: hints[n].__az_record__ for i, n in enumerate(names) if hasattr(hints.get(n), "__az_record__")}
    return bundles, records

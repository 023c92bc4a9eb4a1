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
import typing
from typing import Any, dataclass_transform

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
    """Does the kernel function take a bundle parameter?"""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - an annotation the runtime cannot resolve: no bundle it can see
        return False
    return any(isinstance(h, type) and issubclass(h, Bundle) for h in hints.values())


def expand(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A launch's arguments with each bundle replaced by its fields, in declaration order."""
    out: list[Any] = []
    for a in args:
        if isinstance(a, Bundle):
            out.extend(getattr(a, f) for f in a.__az_fields__)
        else:
            out.append(a)
    return tuple(out)


class BundleLaunch:
    """A launch object of a kernel with a bundle parameter: bundles expanded, then launched."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Any):
        self._inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner(*expand(args), **kwargs)

    def op(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.op(*expand(args), **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

"""Per-thread local arrays: `az.local.array(shape, T)` (safe; see docs/language.md, "Local values")."""

from __future__ import annotations

from typing import Any, NoReturn

from anodize.types import LocalArray

__all__ = ["array"]


def _device_only(name: str) -> NoReturn:
    raise TypeError(f"`local.{name}` can only be called inside an anodize kernel")


def array(shape: int | tuple[int, ...], dtype: type) -> LocalArray[Any]:
    """A per-thread array of `shape` elements (a constant int or a tuple of 1-3 constant ints)
    of scalar type `dtype`, zeroed where it is declared, private to the thread, bounds-checked."""
    _device_only("array")

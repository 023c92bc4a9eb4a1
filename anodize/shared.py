"""Block shared memory (unsafe tier only)."""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["array"]


def _device_only(name: str) -> NoReturn:
    raise TypeError(f"`shared.{name}` can only be called inside an anodize kernel")


def array(shape: int | tuple[int, ...], dtype: type) -> Any:
    """A block-shared array of `shape` elements of scalar type `dtype`.

    A shape of 0 means dynamic shared memory sized by the launch config's `shared_mem`."""
    _device_only("array")

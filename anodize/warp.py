"""Warp-level operations on the full warp (unsafe tier only)."""

from __future__ import annotations

from typing import NoReturn, TypeVar

T = TypeVar("T", bound=float)

__all__ = ["shfl_down", "shfl_up", "shfl_xor", "shfl_idx", "ballot", "any", "all"]


def _device_only(name: str) -> NoReturn:
    raise TypeError(f"`warp.{name}` can only be called inside an anodize kernel")


def shfl_down(v: T, delta: int) -> T:
    _device_only("shfl_down")


def shfl_up(v: T, delta: int) -> T:
    _device_only("shfl_up")


def shfl_xor(v: T, mask: int) -> T:
    _device_only("shfl_xor")


def shfl_idx(v: T, lane: int) -> T:
    _device_only("shfl_idx")


def ballot(pred: bool) -> int:
    _device_only("ballot")


def any(pred: bool) -> bool:  # noqa: A001 - the language's name
    _device_only("any")


def all(pred: bool) -> bool:  # noqa: A001
    _device_only("all")

"""Warp-level operations on the full warp.

The shuffles and votes are unsafe tier only; `sync()` is allowed everywhere (the
checker requires every lane of the warp to reach it: az-warp-divergence).
"""

from __future__ import annotations

from typing import NoReturn, TypeVar

T = TypeVar("T", bound=float)

__all__ = ["shfl_down", "shfl_up", "shfl_xor", "shfl_idx", "ballot", "any", "all", "sync"]


def _device_only(name: str) -> NoReturn:
    raise TypeError(f"`warp.{name}` can only be called inside an anodize kernel")


def shfl_down(v: T, delta: int) -> T:
    """The value `v` of the lane `delta` lanes above this one (`shfl.sync.down`); unsafe tier."""
    _device_only("shfl_down")


def shfl_up(v: T, delta: int) -> T:
    """The value `v` of the lane `delta` lanes below this one (`shfl.sync.up`); unsafe tier."""
    _device_only("shfl_up")


def shfl_xor(v: T, mask: int) -> T:
    """The value `v` of the lane whose id is this lane's XOR `mask` (`shfl.sync.bfly`); unsafe tier."""
    _device_only("shfl_xor")


def shfl_idx(v: T, lane: int) -> T:
    """The value `v` of lane `lane` (`shfl.sync.idx`); unsafe tier."""
    _device_only("shfl_idx")


def ballot(pred: bool) -> int:
    """A 32-bit mask with bit k set when lane k's `pred` is true (`vote.sync.ballot`); unsafe tier."""
    _device_only("ballot")


def any(pred: bool) -> bool:  # noqa: A001 - the language's name
    """Whether `pred` is true on any lane of the warp (`vote.sync.any`); unsafe tier."""
    _device_only("any")


def all(pred: bool) -> bool:  # noqa: A001
    """Whether `pred` is true on every lane of the warp (`vote.sync.all`); unsafe tier."""
    _device_only("all")


def sync() -> None:
    """Wait until every lane of the warp reaches this point, and order their memory
    accesses (`bar.warp.sync 0xffffffff`; the CPU backend runs the warp's lanes to
    the same point).  Safe: it moves no data between lanes."""
    raise TypeError("`warp.sync` can only be called inside an anodize kernel")

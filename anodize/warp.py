"""Warp-level operations on the full warp.

The shuffles and votes are unsafe tier only; `sync()` and `reduce()` are allowed
everywhere (the checker requires every lane of the warp to reach them:
az-warp-divergence; they need a contract whose block is a multiple of 32 threads).
"""

from __future__ import annotations

from typing import Literal, NoReturn, TypeVar

T = TypeVar("T", bound=float)

__all__ = ["shfl_down", "shfl_up", "shfl_xor", "shfl_idx", "ballot", "any", "all", "sync", "reduce"]


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


def reduce(v: T, op: Literal["sum", "max", "min", "and", "or"]) -> T:
    """Combine `v` over the 32 lanes of this warp with `op` and return the result to every lane.

    Safe: called by every lane of the warp (az-warp-divergence otherwise), in a kernel whose
    contract gives a literal block that is a multiple of 32.  `op` is a string literal:
    "sum", "max", "min", or (integers and bools only) "and", "or".  Lowered to shuffles
    (`shfl.sync.bfly`); every lane gets the bit-identical result.
    """
    raise TypeError("`warp.reduce` can only be called inside an anodize kernel")

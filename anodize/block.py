"""Block-level collectives: every thread of the block calls them, every thread gets the result.

Safe tier.  Each one needs the kernel's `@launch_contract` to give a literal `block`
whose thread count is a multiple of 32; it uses a shared scratch buffer the compiler
owns (apart from the kernel's own shared memory) and ends with a barrier, so it
counts as one: calling it under thread-dependent control flow, or after a
thread-dependent `return`, is az-barrier-divergence.  `op` is a string literal:
"sum", "max", "min", or (integers and bools only) "and", "or".

    s = az.block.reduce(v, "sum")        # the block's total, on every thread
    p = az.block.scan(v, "sum")          # inclusive prefix over the threads' linear ids
    q = az.block.scan(v, "sum", inclusive=False)   # exclusive (thread 0 gets the identity)
    m = az.block.broadcast(v, 0)         # thread 0's `v`, on every thread
"""

from __future__ import annotations

from typing import Literal, NoReturn, TypeVar

T = TypeVar("T", bound=float)

Op = Literal["sum", "max", "min", "and", "or"]

__all__ = ["reduce", "scan", "broadcast"]


def _device_only(name: str) -> NoReturn:
    raise TypeError(f"`block.{name}` can only be called inside an anodize kernel")


def reduce(v: T, op: Op) -> T:
    """Combine every thread's `v` with `op`; every thread of the block gets the result
    (bit-identical on all of them: the per-warp partials are combined in warp order)."""
    _device_only("reduce")


def scan(v: T, op: Op, inclusive: bool = True) -> T:
    """The prefix of `v` under `op` over the block's threads in linear order (x fastest):
    thread t gets v_0 op ... op v_t (inclusive) or v_0 op ... op v_(t-1) (exclusive; thread
    0 gets the identity of `op`: 0, the type's lowest/highest value, all ones, or 0).
    `inclusive=` must be a literal `True` or `False`."""
    _device_only("scan")


def broadcast(v: T, src: int) -> T:
    """Thread `src`'s `v` (its linear index in the block), on every thread.  `src` is a
    compile-time constant in `range(block)`."""
    _device_only("broadcast")

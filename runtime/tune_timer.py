"""How the autotuner times a configuration: `timer(dev)(fn, n)` is the device time of n calls.

On a GPU the n calls are queued between two events on the device's stream.  A small kernel (a
1024^3 GEMM runs about 10 us, a launch costs the host 7-10 us) would leave the GPU waiting for
the host between calls, and the events would time the host's launch rate, not the kernel: every
configuration then measures alike and the choice is noise (session 15 on an H100: the autotuned
1024^3 GEMM 18% slower than the best single configuration, the gap the autotuned launch's extra
host cost).  So each timed batch is preceded by a *cushion*: memsets of a scratch buffer, queued
first, enough of them to keep the GPU busy while the host queues the batch (their count from the
host's measured time a call and one memset's device time, `cushion_count`).  The GPU then runs
the batch back to back and the events time the kernels alone.  The memsets also evict what the
previous batch left in L2, as Triton's `do_bench` does with its cache flush.

On the CPU backend and the debug device, whose launches are synchronous, it is wall-clock time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from anodize.runtime import lazy

__all__ = ["CUSHION_BYTES", "cushion_count", "timer"]

CUSHION_BYTES = 32 << 20  # one memset of the cushion (32 MiB: ~13 us on an H100)
_CUSHION_MAX = 512  # memsets before one batch, at most
_MARGIN = 1.5  # the cushion lasts this many times the host's expected queueing time


def cushion_count(calls: int, host_ms_per_call: float, memset_ms: float) -> int:
    """The memsets to queue before `calls` calls so that the GPU is still busy with them when the
    host has queued the last call: `_MARGIN` x the host's expected time over one memset's, at
    least 1, at most `_CUSHION_MAX`."""
    if calls <= 0:
        return 0
    need = _MARGIN * calls * max(host_ms_per_call, 0.0) / max(memset_ms, 1e-3)
    return max(1, min(_CUSHION_MAX, math.ceil(need)))


def timer(dev: Any) -> Callable[[Callable[[], None], int], float]:
    """`timer(fn, n) -> ms`: the device time of n calls of fn (the module docstring)."""
    if dev.kind != "cuda":
        def wall(fn: Callable[[], None], n: int) -> float:
            t = time.perf_counter()
            for _ in range(n):
                fn()
            dev.check()
            return (time.perf_counter() - t) * 1e3

        return wall
    return _CushionedTimer(dev)


class _CushionedTimer:
    """Events around a batch queued behind its cushion (the module docstring); holds the scratch
    buffer the memsets write, a memset's device time (re-measured from every cushion, so a slow
    first memset on fresh memory does not make the next cushions too short), and the host's time
    a call in the last batch (the next cushion's measure)."""

    def __init__(self, dev: Any) -> None:
        self.dev, self.stream = dev, dev.stream
        self.opts = lazy.cuda_core().EventOptions(timing_enabled=True)
        self.scratch = dev.empty(CUSHION_BYTES, np.uint8)
        self._cushion(2)  # (the first touch of the scratch memory)
        self.memset_ms = self._timed_cushion(4) / 4
        self.host_ms = 0.02  # (none seen yet: assume 20 us of host a call)

    def _cushion(self, k: int) -> None:
        for _ in range(k):
            self.dev._fill_zero(self.scratch.ptr, CUSHION_BYTES)

    def _timed_cushion(self, k: int) -> float:
        c0 = self.stream.record(options=self.opts)
        self._cushion(k)
        c1 = self.stream.record(options=self.opts)
        c1.sync()
        return float(c1 - c0)

    def __call__(self, fn: Callable[[], None], n: int) -> float:
        k = cushion_count(n, self.host_ms, self.memset_ms)
        c0 = self.stream.record(options=self.opts)
        self._cushion(k)
        e0 = self.stream.record(options=self.opts)
        t = time.perf_counter()
        for _ in range(n):
            fn()
        self.host_ms = (time.perf_counter() - t) * 1e3 / max(n, 1)
        e1 = self.stream.record(options=self.opts)
        e1.sync()
        self.dev.check()
        self.memset_ms = float(e0 - c0) / k
        return float(e1 - e0)

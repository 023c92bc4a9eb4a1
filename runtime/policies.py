"""Scheduling policies: which streams (lanes) submitted work runs on.

    h = op.submit(az.RoundRobin(4))            # per submission
    az.set_policy(dev, az.SingleStream())      # per device: `op.submit()` and `await op` use it

A policy gives, per device, the lanes a submission is queued on (runtime/streams.py: a
`StreamPool`, or one lane).  Every policy keeps the rules of docs/async.md: work that shares
memory with in-flight work is ordered after it (an event wait when it runs on another
stream), so a policy changes only what may overlap, never a result.

* `RoundRobin(n)`: `n` streams per device.  Each submission starts on the next stream in
  turn; the branches of a gather (or zip) go to the streams after it.  Independent
  submissions overlap (up to `n` at once).
* `SingleStream()`: one stream per device, for all work submitted with this policy object.
  Submissions run one after another in submission order, gather branches one after the
  other; nothing of it overlaps, and no event is needed within it.
* `DependencyChains(n)`: `n` streams per device.  A submission that depends on in-flight
  work (shares memory one of them writes) continues on the stream that work ended on, in
  stream order and without an event; an independent submission starts on the stream that
  was least recently started on; only independent branches (of a gather or zip) fork to
  other streams.  A dependency chain thus stays on one stream, and only what may overlap
  is spread.

`StreamPool` objects are accepted wherever a policy is (a pool is round robin).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from anodize.language.errors import ArgumentError
from anodize.runtime import streams as S

if TYPE_CHECKING:
    from anodize.runtime.device import Device

__all__ = ["Policy", "RoundRobin", "SingleStream", "DependencyChains", "set_policy", "policy_of"]


class Policy:
    """Where submitted work runs: `lanes(dev)` gives a device's lanes (made once per device)."""

    size = 1

    def __init__(self) -> None:
        self._pools: dict[int, S.StreamPool] = {}
        self._lock = threading.Lock()

    def lanes(self, dev: Device) -> Any:
        with self._lock:
            pool = self._pools.get(id(dev))
            if pool is None:
                pool = self._pools[id(dev)] = self._make(dev)
            return pool

    def _make(self, dev: Device) -> Any:
        return S.StreamPool(dev, self.size)

    def synchronize(self) -> None:
        """Wait for everything queued through this policy so far."""
        for pool in list(self._pools.values()):
            pool.synchronize()

    def close(self) -> None:
        """Finish queued work and release the streams (CPU workers stop)."""
        for pool in list(self._pools.values()):
            pool.close()
        self._pools.clear()


def _count(n: object, what: str) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ArgumentError(f"`{what}` takes a positive number of streams, got {n!r}")
    return n


class RoundRobin(Policy):
    """`az.RoundRobin(n)`: each submission on the next of `n` streams; branches on the following ones."""

    def __init__(self, n: int = S.DEFAULT_POOL_SIZE):
        super().__init__()
        self.size = _count(n, "RoundRobin")

    def __repr__(self) -> str:
        return f"az.RoundRobin({self.size})"


class SingleStream(Policy):
    """`az.SingleStream()`: all work on one stream per device, in submission order."""

    def __repr__(self) -> str:
        return "az.SingleStream()"


class _ChainPool(S.StreamPool):
    """A pool whose submissions continue on the stream of the work they depend on."""

    def __init__(self, device: Device, n: int):
        super().__init__(device, n)
        self._used = {id(lane): 0 for lane in self.lanes}
        self._tick = 0

    def _touch(self, lane: S.Lane) -> S.Lane:
        self._tick += 1
        self._used[id(lane)] = self._tick
        return lane

    def first_lane_after(self, earlier: list[Any]) -> S.Lane:
        """The lane the last of `earlier` (in-flight work this submission depends on) ended
        on, when it is one of ours; else the least recently started lane."""
        self._check_open()
        mine = {id(lane) for lane in self.lanes}
        for e in reversed(earlier):
            lane = getattr(e, "end_lane", None)
            if lane is not None and id(lane) in mine:
                return self._touch(lane)
        return self.first_lane()

    def first_lane(self) -> S.Lane:
        self._check_open()
        return self._touch(min(self.lanes, key=lambda lane: self._used[id(lane)]))

    def other_lane(self, busy: S.Lane) -> S.Lane:
        idle = [lane for lane in self.lanes if lane is not busy] or self.lanes
        return self._touch(min(idle, key=lambda lane: self._used[id(lane)]))


class DependencyChains(Policy):
    """`az.DependencyChains(n)`: a dependent submission stays on its producer's stream;
    independent work (submissions, branches) goes to the least recently used of `n` streams."""

    def __init__(self, n: int = S.DEFAULT_POOL_SIZE):
        super().__init__()
        self.size = _count(n, "DependencyChains")

    def _make(self, dev: Device) -> Any:
        return _ChainPool(dev, self.size)

    def __repr__(self) -> str:
        return f"az.DependencyChains({self.size})"


_DEVICE_POLICY: dict[int, Policy] = {}


def set_policy(dev: Device, policy: Policy | None) -> None:
    """`az.set_policy(dev, policy)`: what `op.submit()` and `await op` use for work on `dev`
    (None: back to the default, a round-robin pool of 4 streams)."""
    if policy is not None and not isinstance(policy, Policy):
        raise ArgumentError(
            f"`set_policy` takes an az.RoundRobin, az.SingleStream or az.DependencyChains, got {policy!r}"
        )
    if policy is None:
        _DEVICE_POLICY.pop(id(dev), None)
    else:
        _DEVICE_POLICY[id(dev)] = policy


def policy_of(dev: Device) -> Any:
    """The lanes a submission without an explicit pool or policy uses on `dev`."""
    p = _DEVICE_POLICY.get(id(dev))
    return p.lanes(dev) if p is not None else S.default_pool(dev)

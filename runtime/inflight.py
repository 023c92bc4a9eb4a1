"""Ownership across time: the memory that in-flight operations use, and the host writes refused meanwhile.

A submitted operation registers every array it reads or writes (a pointer range
in device or host memory) until the host observes its completion.  While it is
registered:

* a host write into that memory (`Buffer.copy_from`) is refused, and so is a
  host read of memory it writes (`Buffer.to_host`);
* another submission that writes memory it uses, or uses memory it writes, is
  ordered after it on the device (it waits for its completion marker; memory is
  compared as byte ranges, so disjoint slices of one array do not conflict, and of a
  chain of such submissions only the last is waited for: `_needed`);
* NumPy arrays it uses are made read-only (restored afterwards).

Operations hold strong references to their arrays, so nothing is freed while they
run.  An operation nobody waits for is retired when a later check finds its
completion marker done.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from anodize.language.errors import LaunchError
from anodize.runtime.deferred import FutureMarker

if TYPE_CHECKING:
    from anodize.runtime.buffer import Buffer

__all__ = ["InFlightError", "Use", "UseSpec", "begin", "extend", "end", "launch_conflicts", "check_host_write", "check_host_read", "in_flight"]


class InFlightError(LaunchError):
    """A host write (or read) of memory that an in-flight operation uses."""


InFlightError.__module__ = "anodize"  # printed as `anodize.InFlightError`, the name it is imported by


class Use(NamedTuple):
    """One array an operation uses: its memory range, whether it writes it, and a label for messages."""

    space: int  # id(device) for device memory, 0 for host memory
    lo: int
    hi: int
    writes: bool
    label: str
    obj: Any  # the array itself (kept alive while in flight)


# how a lazy kernel op records an array it uses without the array itself (runtime/ops.py
# `KernelOp.spec`, runtime/op_memo.py): ((space, lo, hi), writes, label, argument index)
UseSpec = tuple[tuple[int, int, int], bool, str, int]


class Execution(Protocol):
    def describe(self) -> str: ...

    def poll(self) -> bool: ...


_lock = threading.RLock()
_ACTIVE: dict[int, tuple[Execution, tuple[Use, ...]]] = {}
_LOCKED: dict[int, tuple[np.ndarray, int]] = {}  # id(array) -> (array, count): arrays we made read-only
_SEQ = itertools.count(1)
# id(exe) -> (its sequence number, the numbers of the submissions every lane of it waited for
# (`begin`), the numbers of all it is ordered after (`extend` too)): see `_needed`
_ORDER: dict[int, tuple[int, frozenset[int], set[int]]] = {}


def in_flight() -> int:
    """How many submissions are registered (after retiring the finished ones)."""
    _reap()
    return len(_ACTIVE)


def use_of_buffer(buf: Buffer, writes: bool, label: str) -> Use:
    lo, hi = buf._extent()  # a strided view's elements lie in a wider span than `nbytes`
    return Use(id(buf.device), lo, hi, writes, label, buf)


def use_of_host(arr: np.ndarray, writes: bool, label: str) -> Use:
    ptr = arr.ctypes.data
    return Use(0, ptr, ptr + arr.nbytes, writes, label, arr)


def _overlap(a: Use, b: Use) -> bool:
    return a.space == b.space and a.lo < b.hi and b.lo < a.hi and a.hi > a.lo and b.hi > b.lo


def _reap() -> None:
    """Retire submissions whose completion the device already reached."""
    for key, (exe, _) in list(_ACTIVE.items()):
        if exe.poll():
            end(exe)


def _compact(uses: tuple[Use, ...]) -> tuple[Use, ...]:
    """One use per memory range (a writer wins): a chain of 100 launches over two buffers
    registers two uses, not 200, so conflict checks stay cheap."""
    if len(uses) < 2:
        return uses
    seen: dict[tuple[int, int, int], Use] = {}
    for u in uses:
        k = (u.space, u.lo, u.hi)
        prev = seen.get(k)
        if prev is None or (u.writes and not prev.writes):
            seen[k] = u
    return tuple(seen.values()) if len(seen) < len(uses) else uses


def _seq(exe: Any) -> int:
    entry = _ORDER.get(id(exe))
    return entry[0] if entry is not None else 0


def _needed(after: list[Any], already: frozenset[int] = frozenset()) -> list[Any]:
    """The members of `after` (in-flight work to be ordered after) that are not implied: one
    that another member is ordered after is left out (waiting for that member's completion
    waits for it too), and so is one in `already`.  A dependency chain then waits for its
    last link only, not for every earlier one (chunk k of a double buffer for chunk k - 2,
    not also k - 4, k - 6, ...).  Sequence numbers, not ids: an id is reused after its
    submission ended."""
    if len(after) < 2 and not already:
        return after
    implied = set(already)
    for o in after:
        entry = _ORDER.get(id(o))
        # (a future marker may resolve to nothing when a step fails: it implies nothing)
        if entry is not None and not isinstance(getattr(o, "marker", None), FutureMarker):
            implied |= entry[2]
    return [o for o in after if _seq(o) not in implied or not _seq(o)]


def _note_order(exe: Any, after: list[Any], every_lane: bool) -> None:
    seqs = {q for q in map(_seq, after) if q}
    entry = _ORDER.get(id(exe))
    if entry is None:
        _ORDER[id(exe)] = (next(_SEQ), frozenset(seqs) if every_lane else frozenset(), seqs)
    else:
        entry[2].update(seqs)


def begin(exe: Execution, uses: tuple[Use, ...], compact: bool = False) -> list[Any]:
    """Register a submission's uses; return the in-flight submissions it must be ordered after.

    Two submissions conflict when one writes memory the other uses.  The caller makes
    the new one wait for the conflicting ones (device-side ordering), so work that
    reuses a buffer is never refused, only ordered.  (The submission itself keeps its
    arrays alive; the registry keeps one use per memory range: `compact` says `uses` has
    one already.)"""
    if not compact:
        uses = _compact(uses)
    after: list[Any] = []
    with _lock:
        if _ACTIVE:
            _reap()
        for other, theirs in _ACTIVE.values():
            hit = next(
                (
                    (mine, t)
                    for mine in uses
                    for t in theirs
                    if (mine.writes or t.writes) and _overlap(mine, t)
                ),
                None,
            )
            if hit is None:
                continue
            if getattr(other, "held", False):
                raise _held_error(f"submit {exe.describe()}", hit[0], other, hit[1])
            if getattr(other, "marker", None) is None:
                mine, t = hit
                raise InFlightError(
                    f"cannot submit {exe.describe()}: it {'writes' if mine.writes else 'reads'} {mine.label}, "
                    f"which {other.describe()} is using ({t.label}) while another thread is still submitting it",
                    help="submit work that shares buffers from one thread, or order it with `first.then(second)`",
                )
            after.append(other)
        needed = _needed(after)
        _note_order(exe, after, every_lane=True)
        for other in after:
            # (never for work with staging memory of its own: that must stay registered and alive)
            if not getattr(other, "keep", None) and not getattr(other, "finalizers", None) and not getattr(
                other, "staged", None
            ) and not _deferred(other) and _covers(
                uses, _ACTIVE[id(other)][1]
            ):
                # The new submission is ordered after `other` and uses all of its memory at least
                # as strongly, so it stands in for `other` in every later check: retire `other`
                # (a replay loop then keeps one entry, not one per replay).
                end(other)
        _ACTIVE[id(exe)] = (exe, uses)
        for u in uses:
            if u.space == 0 and isinstance(u.obj, np.ndarray):
                _lock_array(u.obj)
    return needed


def extend(exe: Execution, uses: tuple[Use, ...]) -> list[Any]:
    """Register more uses of a submission that is already in flight (work an `and_then`
    built while it was being queued); return the other in-flight submissions it must now be
    ordered after, as `begin` does."""
    after: list[Any] = []
    with _lock:
        entry = _ACTIVE.get(id(exe))
        old = entry[1] if entry is not None else ()
        for other, theirs in _ACTIVE.values():
            if other is exe:
                continue
            if any((m.writes or t.writes) and _overlap(m, t) for m in uses for t in theirs):
                if getattr(other, "held", False):
                    hit = next((m, t) for m in uses for t in theirs if (m.writes or t.writes) and _overlap(m, t))
                    raise _held_error(f"queue the work {exe.describe()} built", hit[0], other, hit[1])
                if getattr(other, "marker", None) is None:
                    raise InFlightError(
                        f"cannot queue the work {exe.describe()} built: {other.describe()} uses the same "
                        "memory and is still being submitted by another thread",
                        help="submit work that shares buffers from one thread",
                    )
                after.append(other)
        known = {(u.space, u.lo, u.hi) for u in old}
        _ACTIVE[id(exe)] = (exe, _compact(old + uses))
        for u in uses:
            if u.space == 0 and isinstance(u.obj, np.ndarray) and (u.space, u.lo, u.hi) not in known:
                known.add((u.space, u.lo, u.hi))
                _lock_array(u.obj)
        mine = _ORDER.get(id(exe))
        # (what every lane of `exe` waited for when it began needs no second wait)
        needed = _needed(after, mine[1] if mine is not None else frozenset())
        _note_order(exe, after, every_lane=False)
    return needed


class Held:
    """The inputs and outputs of an op built by `k[cfg].call_op(...)`: handed to the op when it
    is built, guarded until it completes.  Registered like a submission with no completion
    marker (host reads and writes are refused, conflicting submissions and launches too) until
    the op is submitted (its own registration takes over), captured, or dropped unrun."""

    held = True
    marker = None

    def __init__(self, op: Any):
        self._op = weakref.ref(op)
        self._what = op.describe()

    def describe(self) -> str:
        return f"{self._what} (built by `call_op`, not completed yet)"

    def poll(self) -> bool:
        return self._op() is None  # dropped without running: nothing holds the memory any more


def hold(op: Any, uses: tuple[Use, ...]) -> Held:
    """Guard `uses` for `op`, which has not been submitted yet (see `Held`)."""
    h = Held(op)
    with _lock:
        _ACTIVE[id(h)] = (h, _compact(uses))
    return h


def _held_error(what: str, mine: Use, other: Any, t: Use) -> InFlightError:
    return InFlightError(
        f"cannot {what}: it {'writes' if mine.writes else 'reads'} {mine.label}, which was handed to "
        f"{other.describe()} ({t.label})",
        help="run that op first (`op.run()`, `await op`), or queue this work after it: `op.then(...)` / `op.and_then(...)`",
    )


def _deferred(exe: Any) -> bool:
    """Whether `exe` still has steps to queue (its completion marker is a future)."""
    m = getattr(exe, "marker", None)
    return isinstance(m, FutureMarker) and not m.is_done


def _covers(new: tuple[Use, ...], old: tuple[Use, ...]) -> bool:
    return all(
        any(n.space == o.space and n.lo <= o.lo and o.hi <= n.hi and (n.writes or not o.writes) for n in new)
        for o in old
    )


def end(exe: Execution) -> None:
    """Release a submission's uses (idempotent)."""
    with _lock:
        entry = _ACTIVE.pop(id(exe), None)
        if entry is None:
            return
        _ORDER.pop(id(exe), None)
        for u in entry[1]:
            if u.space == 0 and isinstance(u.obj, np.ndarray):
                _unlock_array(u.obj)


def _lock_array(arr: np.ndarray) -> None:
    hit = _LOCKED.get(id(arr))
    if hit is not None:
        _LOCKED[id(arr)] = (arr, hit[1] + 1)
    elif arr.flags.writeable:
        arr.flags.writeable = False
        _LOCKED[id(arr)] = (arr, 1)


def _unlock_array(arr: np.ndarray) -> None:
    hit = _LOCKED.get(id(arr))
    if hit is None:
        return
    if hit[1] > 1:
        _LOCKED[id(arr)] = (arr, hit[1] - 1)
        return
    del _LOCKED[id(arr)]
    try:
        arr.flags.writeable = True
    except ValueError:  # pragma: no cover - the base became read-only meanwhile
        pass


def _find(buf: Buffer, writers_only: bool) -> tuple[Execution, Use] | None:
    probe = use_of_buffer(buf, True, "")
    with _lock:
        if not _ACTIVE:
            return None
        _reap()
        for exe, uses in _ACTIVE.values():
            for u in uses:
                if (u.writes or not writers_only) and _overlap(probe, u):
                    return exe, u
    return None


def check_host_write(buf: Buffer, action: str) -> None:
    """Refuse a host write into `buf` while in-flight work uses its memory."""
    if not _ACTIVE:
        return
    hit = _find(buf, writers_only=False)
    if hit is not None:
        exe, u = hit
        verb = "writes" if u.writes else "reads"
        raise InFlightError(
            f"cannot {action}: {exe.describe()} {verb} this buffer ({u.label}) and is still in flight",
            help="wait for it first (`await op`, `op.wait()` or `handle.wait()`); until then the device "
            "may still read or write this memory",
        )


def check_host_read(buf: Buffer, action: str) -> None:
    """Refuse a host read of `buf` while in-flight work writes its memory."""
    if not _ACTIVE:
        return
    hit = _find(buf, writers_only=True)
    if hit is not None:
        exe, u = hit
        raise InFlightError(
            f"cannot {action}: {exe.describe()} writes this buffer ({u.label}) and is still in flight",
            help="wait for it first (`await op`, `op.wait()` or `handle.wait()`), or queue the read "
            "after it: `op.then(buf.to_host_op())`",
        )


def launch_conflicts(uses: tuple[Use, ...]) -> list[Any]:
    """The markers of the in-flight operations a plain `kernel[cfg](...)` launch (or a `copy_to`)
    using `uses` must wait for; the launch's lane waits for them (runtime/streams.py `order_launch`).

    Memory is identified per device (`Use.space`), and the work waited for may run on
    another device than the launch's: a CUDA stream may wait for another device's event.
    A conflict with held work, or with work another thread is still submitting, is refused."""
    with _lock:
        if not _ACTIVE:
            return []
        _reap()
        conflicts = [
            exe
            for exe, theirs in _ACTIVE.values()
            if any((m.writes or t.writes) and _overlap(m, t) for m in uses for t in theirs)
        ]
    markers = []
    for exe in conflicts:
        marker = getattr(exe, "marker", None)
        if getattr(exe, "held", False):
            mine, t = next((m, t) for m in uses for t in _ACTIVE.get(id(exe), (None, ()))[1] if (m.writes or t.writes) and _overlap(m, t))
            raise _held_error("launch", mine, exe, t)
        if marker is None:
            raise InFlightError(
                f"cannot launch: {exe.describe()} uses the same memory and is still being submitted by another thread",
                help="launch work that shares buffers from one thread, or order it with `first.then(second)`",
            )
        markers.append(marker)
    return markers

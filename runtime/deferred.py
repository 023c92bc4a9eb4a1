"""Work whose queueing waits for the host: `op.map(fn)` and an `and_then` over a host value.

Most of an op's work is queued at once when it is submitted (runtime/submission.py).  Two
steps cannot be: `op.map(fn)` runs `fn` on the host after `op` completed, and
`op.and_then(fn)` whose `op` produces a host value (a `to_host_op` array) can only call
`fn` once that value is there.  The work after such a step is queued later, by a helper
thread, once the host observed what it waits for; meanwhile its successors wait for a
`FutureMarker`: a completion marker that does not exist on any lane yet.

A `FutureMarker` is resolved to the markers the deferred work ended with.  Lanes never
queue a wait for an unresolved one (a CPU worker would block, a CUDA stream cannot wait for
an event not yet recorded): whoever meets one defers its own queueing until it is resolved
(`unresolved`, `defer`).  `is_done` and `sync` make it a marker for the host.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["FutureMarker", "unresolved", "settle", "defer"]


class FutureMarker:
    """A completion marker of work that is not queued yet; resolved to real markers later."""

    __slots__ = ("_ev", "inner")

    def __init__(self) -> None:
        self._ev = threading.Event()
        self.inner: list[Any] = []

    def resolve(self, markers: Sequence[Any]) -> None:
        self.inner = list(markers)
        self._ev.set()

    @property
    def resolved(self) -> bool:
        return self._ev.is_set()

    @property
    def is_done(self) -> bool:
        return self._ev.is_set() and all(m.is_done for m in self.inner)

    def sync(self) -> None:
        self._ev.wait()
        for m in self.inner:
            m.sync()


def unresolved(markers: Sequence[Any]) -> list[FutureMarker]:
    """The markers among `markers` (at any depth) that are futures not resolved yet."""
    out: list[FutureMarker] = []
    for m in markers:
        if isinstance(m, FutureMarker):
            if m.resolved:
                out.extend(unresolved(m.inner))
            else:
                out.append(m)
    return out


def settle(markers: Sequence[Any]) -> list[Any]:
    """The real markers behind `markers`, waiting (on the host) for futures to be resolved."""
    out: list[Any] = []
    for m in markers:
        if isinstance(m, FutureMarker):
            m._ev.wait()
            out.extend(settle(m.inner))
        else:
            out.append(m)
    return out


def _in_event_loop() -> bool:
    """Whether the calling thread runs an asyncio event loop (asyncio is not imported for this)."""
    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and asyncio._get_running_loop() is not None


def defer(wait_for: Sequence[Any], then: Callable[[list[Any]], None], *, host_sync: bool, on_error: Callable[[BaseException], None]) -> None:
    """Call `then(real_markers)` once every future in `wait_for` is resolved, and (when
    `host_sync`) once the device finished all of `wait_for`.

    When nothing is left to wait for (the CPU backend's inline `op.run()`), `then` runs
    now, in the calling thread; otherwise in a helper thread of its own (one per deferred
    step: two deferred steps never wait behind each other).  A host step (`host_sync`: it
    runs user code, a `map` function or an `and_then` over a host value) never runs in a
    thread that runs an asyncio event loop, even when its work is done already (a GPU often
    finishes small work before `await op` has queued it all): it goes to a helper thread,
    so `await op` never runs it on the loop."""

    def ready() -> bool:
        return not unresolved(wait_for) and (not host_sync or all(m.is_done for m in settle(wait_for)))

    def body() -> None:
        try:
            real = settle(wait_for)
            if host_sync:
                for m in real:
                    m.sync()
            then(real)
        except BaseException as e:  # noqa: BLE001 - reported at the op's completion
            on_error(e)

    if ready() and not (host_sync and _in_event_loop()):
        body()
        return
    threading.Thread(target=body, name="anodize-deferred", daemon=True).start()

"""`az.select(op1, op2, ...)`: submit each op on its own and take the first to complete.

    first = az.select(op1, op2)
    k, result = first.wait()          # or `await first`: the index and result of the first done

The others keep running; each is guarded by its own handle (runtime/inflight.py) until it
completes.
"""

from __future__ import annotations

import time
from typing import Any

from anodize.runtime import lazy
from anodize.runtime.ops import Op, _common_device

__all__ = ["Selection", "select"]


class Selection:
    """`az.select(op1, op2, ...)`: each op submitted on its own; `wait()` (or `await`) gives
    `(index, result)` of the first to complete.  The others keep running, each guarded by its
    own handle (`selection.handles`) until it completes: wait for them before reusing their
    memory from the host."""

    def __init__(self, handles: list[Any]):
        self.handles = handles

    def _first(self) -> int | None:
        for k, h in enumerate(self.handles):
            if h.poll():
                return k
        return None

    def wait(self, poll_s: float = 5e-5) -> tuple[int, Any]:
        """Block until one op completes; its index and result (raising its error)."""
        delay = 0.0
        while (k := self._first()) is None:
            time.sleep(delay)
            delay = min(2e-3, max(poll_s, delay * 2))
        return k, self.handles[k].wait()

    def __await__(self) -> Any:
        return self._wait_async().__await__()

    async def _wait_async(self) -> tuple[int, Any]:
        asyncio = lazy.asyncio()  # (loaded already: an event loop awaits this)
        delay = 0.0
        while (k := self._first()) is None:
            await asyncio.sleep(delay)  # never blocks the event loop
            delay = min(2e-3, max(5e-5, delay * 2))
        return k, self.handles[k].wait()


def select(*ops: Op, policy: Any = None) -> Selection:
    """`az.select(op1, op2, ...)`: submit each op (with `policy`, else each device's default)
    and give the first to complete; see `Selection`."""
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = tuple(ops[0])
    _common_device(ops, "`az.select`")
    return Selection([o.submit(policy) for o in ops])

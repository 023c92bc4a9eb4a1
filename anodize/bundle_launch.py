"""The launch object of a kernel with a bundle parameter (anodize/bundle.py): the bundles
expanded into their fields, then launched by the kernel's launcher; relaunches with the very
objects of a recent launch memoised (runtime/bundle_memo.py).  Loaded with the launch path
(anodize/kernel_runtime.py), so that defining a bundle class loads no runtime."""

from __future__ import annotations

import operator
from typing import Any

from anodize.bundle import Bundle, expand
from anodize.runtime import inflight as _inflight
from anodize.runtime.bundle_memo import bundle_memo_maker

__all__ = ["BundleLaunch"]


class BundleLaunch:
    """A launch object of a kernel with a bundle parameter: bundles expanded, then launched.

    A relaunch with the very field objects (and other arguments) of one of the last two
    launches takes the bundle memo (runtime/bundle_memo.py): one generated function reads each
    field, compares it with what was checked and relaunches the packed arguments, so a bundle
    costs about what separate slices cost (bench/records_bench.py).  Anything else expands the
    bundles (a bundle first, the usual form, by one `attrgetter` of its class) and launches
    through the quick path of the kernel's launcher (every check; runtime/launch_fast.py) or, where that
    does not take them, the launcher itself, which plans and reports errors; a launch of the
    quick path is then memoised."""

    __slots__ = ("_inner", "_first", "_cls", "_get", "_records", "_positions", "_memo", "_memo2", "_misses",
                 "_quick", "_maker")

    def __init__(self, inner: Any, plan: tuple[tuple[int, ...], dict[int, Any]] = ((), {})):
        self._inner = inner
        self._positions, self._records = plan
        self._first = self._positions == (0,) and not self._records
        self._cls: type | None = None
        self._get: Any = None
        self._memo: Any = None  # `fire(args) -> bool` of the last memoised launch
        self._memo2: Any = None  # of the one before (bundles of ping-pong buffers)
        self._misses = 0
        self._maker: Any = None  # ((plan, argument types), the bundle memo's `make` for them)
        self._quick: Any = getattr(inner, "quick_packed", None)  # a generic kernel's launch has none

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        memo = self._memo
        if memo is not None and not kwargs and not _inflight._ACTIVE:
            if memo(args):
                self._misses = 0
                return None
            memo = self._memo2
            if memo is not None and memo(args):
                self._misses = 0
                return None
        if args and args[0].__class__ is self._cls:
            flat = (*self._get(args[0]), *args[1:])
        else:
            if self._first and args and isinstance(args[0], Bundle):
                fields = type(args[0]).__az_fields__
                self._cls = type(args[0])
                self._get = operator.attrgetter(*fields) if len(fields) > 1 else (lambda b, f=fields[0]: (getattr(b, f),))
            flat = expand(args, self._records)
        quick = self._quick
        if quick is not None and not kwargs and not _inflight._ACTIVE:
            hit = quick(flat)  # the launcher's quick path: every check, for the last launch's types
            if hit is not None:
                plan, packed = hit
                plan.arena.dirty = True
                plan.call(*packed)
                self._remember(args, flat, plan, packed)
                return None
        return self._inner(*flat, **kwargs)  # the launcher's own paths: plans, errors, in-flight ordering

    def _remember(self, args: tuple[Any, ...], flat: tuple[Any, ...], plan: Any, packed: list[Any]) -> None:
        """Memoise a launch that passed every check, unless the memos keep missing (new
        buffers every launch): then only every 16th launch, as the `Launcher` does."""
        misses = self._misses = self._misses + 1
        if self._records or not (misses < 4 or not misses & 15):
            return
        key = (plan, *map(type, args))
        maker = self._maker
        if maker is None or maker[0] != key:
            positions = self._positions
            layout = tuple(
                type(a).__az_fields__ if k in positions and isinstance(a, Bundle) else None for k, a in enumerate(args)
            )
            maker = self._maker = (key, bundle_memo_maker(layout, plan))
        make = maker[1]
        if make is not None:
            self._memo2 = self._memo
            self._memo = make(plan.call, packed, plan.arena, args, flat)

    def op(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.op(*expand(args, self._records), **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

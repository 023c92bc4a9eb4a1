"""The launch side of an autotuned kernel (runtime/tuning.py is the engine): `TunedLaunch`, what
`tuned_kernel[grid]` returns, and the warm launch's fast path.

A launch finds its configuration by the tuning key of its arguments (`Tuner.key_of`: the key
arguments' shapes or values, every array's dtype).  Computing that key is most of a warm launch's
cost, so the tuner remembers the last launch (`Tuner.hit`) and the one before (`Tuner.hit2`: a
loop alternating two sets of buffers matches it): a matcher of its argument objects, the key,
the configuration, the LaunchConfig and the launcher.  A launch whose arguments are
those very objects has the same key, because the matcher accepts only arguments whose key cannot
change under the same identity: anodize Buffers (shape and dtype fixed at creation; held by weak
reference) and plain scalars (`int`, `float`, `bool`, NumPy scalars: immutable; held as they are).
A launch with any other argument (a PyTorch tensor can be resized in place, a NumPy array's shape
and dtype can be assigned) takes the full path and recomputes its key every time.  The choice for
the key is still the remembered one: every change of `Tuner.best` (a `Choices`: a re-tuning, a
choice loaded or set) forgets the hit.  The fast path still calls the grid function (its result
may depend on more than the key); only an identical LaunchConfig reuses the launcher.

Having matched the objects itself, the fast path need not have the launcher match them again:
from the first repeat on, the hit also holds the launcher's memo of these objects
(`Launcher.remember`), and while the launcher still holds that memo (no other launch of it has
replaced it) and no lazy op is in flight, the launch is the memo's own relaunch of the packed
arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from types import FunctionType
from typing import TYPE_CHECKING, Any
from weakref import ref as _ref

import numpy as np

from anodize.language.errors import USER_ERRORS
from anodize.runtime import inflight as _inflight
from anodize.runtime.buffer import Buffer
from anodize.runtime.config import LaunchConfig

if TYPE_CHECKING:
    from anodize.runtime.tune_config import Config
    from anodize.runtime.tuning import Tuner

__all__ = ["Choices", "Hit", "TunedLaunch", "same_objects"]

_SCALARS = (int, float, bool)

# the tuner's last launch: (matcher of its argument objects, key, configuration, LaunchConfig,
# launcher, and from its first repeat on the launcher's memo of those objects (memo, launcher,
# fault arena, relaunch); None before, () where the launcher keeps no memo of them)
Hit = tuple[Callable[[tuple[Any, ...]], bool], tuple[Any, ...], "Config", Any, Any, "tuple[Any, Any, Any, Callable[[], None]] | tuple[()] | None"]


class TunedLaunch:
    """What `tuned_kernel[grid]` returns: picks the configuration for the arguments' key (tuning on
    a new key), then launches its specialisation."""

    __slots__ = ("tuner", "grid", "fn")

    def __init__(self, tuner: Tuner, grid: Any):
        self.tuner = tuner
        self.grid = grid
        # (an inline `lambda cfg: ...` makes one of these every launch: a function is taken at sight)
        self.fn: Callable[[Config], Any] | None = (
            grid if type(grid) is FunctionType or (callable(grid) and not isinstance(grid, LaunchConfig)) else None)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        try:
            t = self.tuner
            hit = t.hit
            if not kwargs:
                if hit is None or not hit[0](args):
                    hit = t.hit2  # (alternating argument sets: double buffers)
                    if hit is not None and hit[0](args):
                        t.hit, t.hit2 = hit, t.hit
                    else:
                        hit = None
                if hit is not None:  # the very objects: the same key, whose choice `c` still is (`Choices`)
                    _, _, c, lc0, _, warm = hit
                    fn = self.fn
                    if (fn(c) if fn is not None else self.grid) is lc0:
                        if warm and not _inflight._ACTIVE:
                            memo, held, arena, again = warm
                            if held._memo is memo or held._memo2 is memo:  # (the launcher's own memo of `args`)
                                arena.dirty = True
                                again()
                                return
                        self.settle(args, hit)
                        return
            self.full(args, kwargs)
        except USER_ERRORS as e:
            __tracebackhide__ = True
            raise e.with_traceback(None)

    def settle(self, args: tuple[Any, ...], hit: Hit) -> None:
        """The launch of the last launch's very objects under its LaunchConfig, without the memo
        of the launcher in `hit` (its first repeat, or the launcher launched other objects since):
        launched, and that memo made (`Launcher.remember`) for the next."""
        t = self.tuner
        same, key, c, lc, launch, warm = hit
        if warm == ():  # (no memo to take: the launcher takes fewer arguments, or keeps none)
            launch(*t.strip(args) if t.strips else args)
            return
        remember = getattr(launch, "remember", None)
        if remember is None:
            if t.hit is hit:  # (not forgotten meanwhile: the grid function may have changed a choice)
                t.hit = (same, key, c, lc, launch, ())
            launch(*args)
            return
        got = remember(args)
        if got is None:  # (a lazy op in flight, or arguments the quick path does not take)
            launch(*args)
            return
        memo, arena, again = got
        if t.hit is hit:
            t.hit = (same, key, c, lc, launch, (memo, launch, arena, again))
        arena.dirty = True
        again()

    def full(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The launch with its key computed (tuning on a new key); remembers it as the tuner's hit."""
        t = self.tuner
        if kwargs or len(args) != t.n_launch:
            args = t._bind(args, kwargs)
        key = t.key_of(args)
        c = t.best.get(key)
        grid = self.grid
        if c is None:
            c = t.choose(key, grid, args)
        changes = t.changes
        if self.fn is not None:  # the grid function runs on every launch: its result may change
            lc = self.fn(c)
            if not isinstance(lc, LaunchConfig):
                t.not_a_launch_config(lc)
        else:
            lc = t.config_for(grid, c)
        launch = t.held(key, c, lc, args)
        same = same_objects(args)
        if t.changes != changes:  # (the grid function changed a choice)
            same = None
        if t.hit is not None:
            t.hit2 = t.hit
        # (the launcher of a launch Constant takes fewer arguments: its memo would not see them)
        t.hit = None if same is None else (same, key, c, lc, launch, () if t.strips else None)
        if t.strips:
            args = t.strip(args)
        launch(*args)

    def op(self, *args: Any, **kwargs: Any) -> Any:
        """A lazy launch of the chosen configuration (tuning, if the key is new, happens now)."""
        t = self.tuner
        args = t._bind(args, kwargs)
        key = t.key_of(args)
        c = t.best.get(key) or t.choose(key, self.grid, args)
        return t.launcher(key, c, self.grid, args).op(*t.strip(args))


def _holder(a: Any) -> Callable[[], Any] | None:
    """A weak reference to a Buffer, a holder of an immutable scalar, or None (an argument whose
    key may change while it stays the same object)."""
    if type(a) is Buffer:
        return _ref(a)
    if type(a) in _SCALARS or isinstance(a, np.generic):
        return repeat(a).__next__  # (a call of C code returning `a`: no Python frame, as a weakref's)
    return None


def same_objects(args: tuple[Any, ...]) -> Callable[[tuple[Any, ...]], bool] | None:
    """`same(args2)`: whether `args2` are the very objects of `args` (each a Buffer still alive or
    the same scalar object); None when an argument of `args` is neither.  Written out for up to
    four arguments: an unrolled check costs a third of a loop."""
    held = [_holder(a) for a in args]
    if any(h is None for h in held):
        return None
    keys: tuple[Callable[[], Any], ...] = tuple(held)  # type: ignore[arg-type]
    n = len(keys)
    if n == 1:
        (k0,) = keys
        return lambda a: len(a) == 1 and k0() is a[0]
    if n == 2:
        k0, k1 = keys
        return lambda a: len(a) == 2 and k0() is a[0] and k1() is a[1]
    if n == 3:
        k0, k1, k2 = keys
        return lambda a: len(a) == 3 and k0() is a[0] and k1() is a[1] and k2() is a[2]
    if n == 4:
        k0, k1, k2, k3 = keys
        return lambda a: len(a) == 4 and k0() is a[0] and k1() is a[1] and k2() is a[2] and k3() is a[3]

    def same(a: tuple[Any, ...]) -> bool:
        if len(a) != n:
            return False
        for k, x in zip(keys, a):
            if k() is not x:
                return False
        return True

    return same


class Choices(dict[tuple[Any, ...], "Config"]):
    """The chosen configuration per key (`Tuner.best`).  Every change calls `changed` (the tuner
    forgets the launches it remembers, each holding a choice): a re-tuning, a choice loaded or set
    by hand is launched from the next launch on, without the fast path reading this dict."""

    __slots__ = ("changed",)

    def __init__(self, changed: Callable[[], None]):
        super().__init__()
        self.changed = changed

    def __setitem__(self, key: tuple[Any, ...], value: Config) -> None:
        self.changed()
        super().__setitem__(key, value)

    def __delitem__(self, key: tuple[Any, ...]) -> None:
        self.changed()
        super().__delitem__(key)

    def __ior__(self, other: Any) -> Choices:  # type: ignore[override,misc]
        self.changed()
        super().update(other)
        return self

    def clear(self) -> None:
        self.changed()
        super().clear()

    def pop(self, key: tuple[Any, ...], *default: Any) -> Any:
        self.changed()
        return super().pop(key, *default)

    def popitem(self) -> tuple[tuple[Any, ...], Config]:
        self.changed()
        return super().popitem()

    def setdefault(self, key: tuple[Any, ...], default: Config | None = None) -> Config:
        self.changed()
        return super().setdefault(key, default)  # type: ignore[arg-type]

    def update(self, *others: Any, **kw: Any) -> None:
        self.changed()
        super().update(*others, **kw)

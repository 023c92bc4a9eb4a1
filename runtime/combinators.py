"""Combinators of lazy ops: `gather`, `and_then`, `map`, `value`, `zip`/`unzip`, `shared` (`select`:
runtime/selection.py).

    up = dev.copy_op(buf, host)                                   # an op (runtime/ops.py)
    op = up.and_then(lambda b: affine[cfg].call_op(b, 2.0, 1.0))  # the next op, from the result
    op = op.map(lambda out: float(out.to_host().sum()))           # a host function of the result
    both = az.zip(op1, op2)                                       # branches; the result is a tuple
    first, second = both.unzip()                                  # one op per element, run once
    s = op.shared()                                               # one execution ...
    az.gather(s.and_then(f), s.and_then(g))                       # ... many consumers, each after it

**When `fn` of `and_then` runs.**  When the previous op completes in stream order: while
the submission is queued, as soon as the previous op's result is known without the device
(device Buffers, `None`, an `az.value`), so a chain of `and_then` queues its kernels back to
back on one stream with no host round trip; and, when the result is a host value (a
`to_host_op` array, a `map` result), after the host observed completion, from a helper
thread (runtime/deferred.py).  The op `fn` returns goes on the stream the previous op ended
on.  `map` always runs after completion, in a helper thread.  A step after completion sees
no fault of the kernels before it: a `KernelFault` stops the chain and surfaces at the
op's completion.

**Ownership across time.**  What `fn` builds joins the submission's in-flight registry
(runtime/inflight.py: `extend`): it is ordered after other in-flight work that shares its
memory, and guarded from host writes until the op completes.  Inside a gather or zip
branch, an op `fn` builds that writes memory another branch uses (or uses memory another
branch writes) is refused with an `AliasingError` naming the branch and where the gather
was built, before it is queued; it surfaces at the op's completion.  A `shared` op used by
several branches counts once: every branch runs after it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from anodize.language.errors import AliasingError, ArgumentError, LaunchError
from anodize.runtime import streams as S
from anodize.runtime.and_then import AndThen, _host_value
from anodize.runtime.buffer import Buffer
from anodize.runtime.deferred import FutureMarker, defer
from anodize.runtime.device import Device, device as _device
from anodize.runtime.inflight import Use
from anodize.runtime.ops import _UNSET, BUILD, Leaf, Op, Seq, _common_device

if TYPE_CHECKING:
    from anodize.runtime.device import Device
    from anodize.runtime.submission import _Ctx

__all__ = ["Gather", "AndThen", "Map", "Value", "Zip", "Shared", "gather", "value", "zip_ops", "unzip", "Branch", "tagged_uses", "check_branches"]


_OURS: dict[Any, bool] = {}  # code object -> whether it is anodize's own


def user_frame(f: Any) -> Any:
    """The first frame from `f` outwards that is not anodize's own: where user code called."""
    ours = _OURS
    while f.f_back is not None:
        hit = ours.get(f.f_code)
        if hit is None:
            hit = ours[f.f_code] = f.f_globals.get("__name__", "").startswith("anodize.")
        if not hit:
            break
        f = f.f_back
    return f


class Site:
    """Where user code built a combinator (the first frame outside anodize), as `file:line`
    when printed; formatted only for a message."""

    __slots__ = ("code", "line")

    def __init__(self) -> None:
        f = user_frame(sys._getframe(2))
        self.code = f.f_code
        self.line = f.f_lineno

    def __str__(self) -> str:
        return f"{self.code.co_filename}:{self.line}"


def build_site() -> Site:
    """The user's `file:line` that called the combinator calling this."""
    return Site()


# ---- independence of branches ------------------------------------------------------------------


def tagged_uses(op: Op, tag: int = 0) -> list[tuple[int, Use]]:
    """`op`'s uses, each tagged with the outermost `shared` op it belongs to (0: none)."""
    if isinstance(op, Shared) and not tag:
        tag = id(op)
    if isinstance(op, Leaf):
        return [(tag, u) for u in op._uses]
    return [t for p in op._parts() for t in tagged_uses(p, tag)]


def leading(op: Op) -> set[int]:
    """The `shared` ops that everything else in `op` runs after (its first step, recursively)."""
    if isinstance(op, Shared):
        return {id(op)} | leading(op.inner)
    if isinstance(op, (Seq, AndThen, Map, _Pick)):
        return leading(op._parts()[0])
    return set()


def _conflict(mine: list[tuple[int, Use]], theirs: list[tuple[int, Use]], my_lead: set[int], their_lead: set[int]) -> tuple[Use, Use] | None:
    for ta, a in mine:
        for tb, b in theirs:
            if ta and (ta == tb or ta in their_lead):
                continue  # one shared execution, which the other use comes after (or is part of)
            if tb and tb in my_lead:
                continue
            if (a.writes or b.writes) and a.space == b.space and a.lo < b.hi and b.lo < a.hi and a.hi > a.lo:
                return a, b
    return None


def _aliasing(what: str, site: object, i: int, j: int, a: Use, b: Use, built: bool) -> AliasingError:
    w, r, wi, ri = (a, b, i, j) if a.writes else (b, a, j, i)
    late = " (an op `and_then` built)" if built else ""
    return AliasingError(
        f"{what} built at {site}: branch {wi}{late if wi == i else ''} writes {w.label}, and branch {ri}"
        f"{late if ri == i else ''} {'writes' if r.writes else 'reads'} the same memory ({r.label}); "
        "branches may run at the same time",
        help="order them with `first.then(second)` (or `and_then`), give each branch its own buffers, "
        "or make the common step `shared()`",
    )


def check_branches(ops: tuple[Op, ...], what: str, site: object) -> None:
    """Branches may run at the same time: none may write memory another one uses."""
    groups = [tagged_uses(o) for o in ops]
    leads = [leading(o) for o in ops]
    for i in range(len(ops)):
        for j in range(i + 1, len(ops)):
            hit = _conflict(groups[i], groups[j], leads[i], leads[j])
            if hit is not None:
                raise _aliasing(what, site, i, j, hit[0], hit[1], built=False)


class Branch:
    """The gather branch being queued: the uses of every branch (an `and_then` adds what it
    builds to its own), for the check of ops built while queueing."""

    def __init__(self, parent: Branch | None, groups: list[list[tuple[int, Use]]], leads: list[set[int]], index: int, site: object):
        self.parent = parent
        self.groups = groups
        self.leads = leads
        self.index = index
        self.site = site

    def admit_op(self, op: Op, tag: int) -> None:
        """`op`, built while queueing inside this branch (and inside the `shared` op `tag`),
        may not conflict with another branch; its uses join this branch's."""
        self.admit(tagged_uses(op, tag))

    def admit(self, new: list[tuple[int, Use]]) -> None:
        b: Branch | None = self
        while b is not None:
            for j, g in enumerate(b.groups):
                if j != b.index:
                    hit = _conflict(new, g, b.leads[b.index], b.leads[j])
                    if hit is not None:
                        raise _aliasing("the gather", b.site, b.index, j, hit[0], hit[1], built=True)
            b.groups[b.index].extend(new)
            b = b.parent


def host_step(op: Op) -> Op | None:
    """The first `map` in `op` (a step a captured graph cannot hold), or None."""
    if isinstance(op, Map):
        return op
    return next((h for p in op._parts() if (h := host_step(p)) is not None), None)


# ---- gather ------------------------------------------------------------------------------------


class Gather(Op):
    """`az.gather(a, b, ...)`: independent branches, which may run at the same time."""

    children: tuple[Op, ...]

    def __init__(self, *ops: Op):
        dev = _common_device(ops, "`az.gather`")
        super().__init__(dev)
        self._site = build_site()
        check_branches(ops, self._what, self._site)
        for o in ops:
            o._claim(self)
        self.children = tuple(ops)

    _what = "`az.gather`"

    def describe(self) -> str:
        return f"gather of {len(self.children)} ops"

    def leaves(self) -> Iterator[Leaf]:
        for c in self.children:
            yield from c.leaves()

    def _emit(self, ctx: _Ctx, lane: S.Lane) -> tuple[S.Lane, list[S.Marker]]:
        ctx.enter(lane)
        fork = lane.record() if len(self.children) > 1 else None
        out: list[S.Marker] = []
        outer = ctx.scope
        groups = [tagged_uses(c) for c in self.children]  # an `and_then` branch adds what it builds
        leads = [leading(c) for c in self.children]
        for k, c in enumerate(self.children):
            ctx.scope = Branch(outer, groups, leads, k, self._site)
            if k == 0:
                end, pend = c._emit(ctx, lane)
                out.extend(pend)
                if end is not lane:  # it moved to another device
                    out.append(end.record())
                continue
            other = ctx.branch_lane(c.device, lane)
            ctx.enter(other)
            assert fork is not None
            other.wait(fork)
            end, pend = c._emit(ctx, other)
            out.extend(pend)
            if end is not lane:
                out.append(end.record())
        ctx.scope = outer
        return lane, out

    def _collect(self) -> Any:
        self._result = tuple(c._collect() for c in self.children)
        return self._result

    def _early(self) -> Any:
        vals = tuple(c._early() for c in self.children)
        return _UNSET if any(v is _UNSET for v in vals) else vals

    def _parts(self) -> tuple[Op, ...]:
        return self.children

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        return Gather(*(c._rebind(mapping) for c in self.children))


def gather(*ops: Op) -> Op:
    """Independent branches: `az.gather(op1, op2, ...)`; the result is a tuple of theirs."""
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = tuple(ops[0])
    return Gather(*ops)



# ---- map -------------------------------------------------------------------------------------------


class Map(Op):
    """`op.map(fn)`: `fn(result)` on the host once `op` completed; its value is the result."""

    def __init__(self, op: Op, fn: Callable[[Any], Any]):
        if not callable(fn):
            raise ArgumentError(f"`map` takes a function of the result, got {fn!r}")
        super().__init__(op.device)
        op._claim(self)
        self.inner = op
        self.fn = fn
        self.site = build_site()
        self._value: Any = _UNSET

    def describe(self) -> str:
        return f"`map` of {self.inner.describe()}"

    def leaves(self) -> Iterator[Leaf]:
        return self.inner.leaves()

    def _parts(self) -> tuple[Op, ...]:
        return (self.inner,)

    def _early(self) -> Any:
        return self._value

    def _collect(self) -> Any:
        if self._value is _UNSET:
            raise LaunchError(f"{self.describe()} did not run its function")
        self._result = self._value
        return self._value

    def _emit(self, ctx: _Ctx, lane: S.Lane) -> tuple[S.Lane, list[Any]]:
        lane, pend = self.inner._emit(ctx, lane)
        if ctx.capturing:
            ctx.no_future([FutureMarker()])
        fut = FutureMarker()
        ctx.enter(lane)

        def run(real: list[Any]) -> None:
            if not ctx.stopped:
                self._value = self.fn(_host_value(ctx, self.inner))
                with ctx.lock:
                    ctx.after_user_code()
            fut.resolve([])

        defer([*pend, lane.record()], run, host_sync=True, on_error=ctx.failing(fut, lane))
        return lane, [fut]

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        return Map(self.inner._rebind(mapping), self.fn)


# ---- value ---------------------------------------------------------------------------------------


class Value(Op):
    """`az.value(x)`: an op whose result is `x`; it queues nothing."""

    def __init__(self, x: Any, device: Device):
        super().__init__(device)
        self.x = x

    def describe(self) -> str:
        return f"value op ({type(self.x).__qualname__})"

    def leaves(self) -> Iterator[Leaf]:
        return iter(())

    def _emit(self, ctx: _Ctx, lane: S.Lane) -> tuple[S.Lane, list[Any]]:
        return lane, []

    def _early(self) -> Any:
        return self.x

    def _collect(self) -> Any:
        self._result = self.x
        return self.x

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        return Value(mapping.get(id(self.x), self.x), self.device)


def value(x: Any, device: Any = None) -> Op:
    """`az.value(x)`: an op whose result is `x` (on `x`'s device for a Buffer, else `device`
    or the default device); start a chain with it, or return it from an `and_then`."""
    if device is None:
        dev = x.device if isinstance(x, Buffer) else _device()
    else:
        dev = device if isinstance(device, Device) else _device(device)
    return Value(x, dev)


# ---- zip / unzip ---------------------------------------------------------------------------------


class Zip(Gather):
    """`az.zip(a, b, ...)`: branches that may run at the same time; the result is a tuple."""

    _what = "`az.zip`"

    def describe(self) -> str:
        return f"zip of {len(self.children)} ops"


def zip_ops(*ops: Op) -> Op:
    """`az.zip(op1, op2, ...)`: independent branches, the result a tuple; `.unzip()` splits it."""
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = tuple(ops[0])
    return Zip(*ops)


class _Pick(Op):
    """Element `index` of a shared op's tuple result (`unzip`)."""

    def __init__(self, src: Shared, index: int):
        super().__init__(src.device)
        src._claim(self)
        self.src = src
        self.index = index

    def describe(self) -> str:
        return f"element {self.index} of {self.src.inner.describe()}"

    def leaves(self) -> Iterator[Leaf]:
        return self.src.leaves()

    def _parts(self) -> tuple[Op, ...]:
        return (self.src,)

    def _emit(self, ctx: _Ctx, lane: S.Lane) -> tuple[S.Lane, list[Any]]:
        return self.src._emit(ctx, lane)

    def _early(self) -> Any:
        v = self.src._early()
        return _UNSET if v is _UNSET else v[self.index]

    def _collect(self) -> Any:
        self._result = self.src._collect()[self.index]
        return self._result


def _arity(op: Op) -> int | None:
    if isinstance(op, Gather):
        return len(op.children)
    if isinstance(op, Value) and isinstance(op.x, tuple):
        return len(op.x)
    outs = getattr(op, "outputs", None)
    if isinstance(outs, tuple):
        return len(outs)
    parts = op._parts()
    if isinstance(op, (Shared, Seq)):
        return _arity(parts[-1])
    return None


def unzip(op: Op, n: int | None) -> tuple[Op, ...]:
    arity = _arity(op)
    if n is None:
        n = arity
    if n is None:
        raise ArgumentError(
            f"`unzip` cannot tell how many elements the result of {op.describe()} has",
            help="pass it: `op.unzip(2)`",
        )
    if arity is not None and arity != n:
        raise ArgumentError(f"`unzip({n})` of {op.describe()}, whose result has {arity} elements")
    src = op if isinstance(op, Shared) else Shared(op)
    return tuple(_Pick(src, k) for k in range(n))


# ---- shared --------------------------------------------------------------------------------------


class Shared(Op):
    """`op.shared()`: one execution of `op`, which any number of composites may use; each
    use waits for it (its first use queues it).  Its result is `op`'s."""

    def __init__(self, op: Op):
        super().__init__(op.device)
        op._claim(self)
        self.inner = op
        self._end: FutureMarker | None = None
        self._mutex = threading.Lock()

    def describe(self) -> str:
        return f"shared {self.inner.describe()}"

    def leaves(self) -> Iterator[Leaf]:
        return self.inner.leaves()

    def _parts(self) -> tuple[Op, ...]:
        return (self.inner,)

    def _claim(self, owner: object) -> None:
        pass  # any number of consumers

    def _claim_for_run(self) -> None:
        if self._handle is not None:
            super()._claim_for_run()

    def _emit(self, ctx: _Ctx, lane: S.Lane) -> tuple[S.Lane, list[Any]]:
        with self._mutex:
            end, first = self._end, self._end is None
            if first:
                end = self._end = FutureMarker()
        assert end is not None
        if not first:
            return lane, [end]  # after the one execution
        outer = ctx.tag
        ctx.tag = outer or id(self)  # what `and_then` builds inside belongs to this one execution
        try:
            out, pend = self.inner._emit(ctx, lane)
            ctx.enter(out)
            end.resolve([*pend, out.record()])
        except BaseException:
            end.resolve([])
            raise
        finally:
            ctx.tag = outer
        return out, pend

    def _early(self) -> Any:
        return self.inner._early()

    def _collect(self) -> Any:
        self._result = self.inner._collect()
        return self._result

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        return Shared(self.inner._rebind(mapping))


zip = zip_ops  # noqa: A001 - `az.zip(*ops)`, the name LANGUAGE.md gives it (after every use of the builtin)


BUILD.and_then, BUILD.map, BUILD.shared, BUILD.unzip = AndThen, Map, Shared, unzip  # `Op`'s methods build these
BUILD.ready = True

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
from anodize.runtime import inflight, streams as S
from anodize.runtime.buffer import Buffer
from anodize.runtime.deferred import FutureMarker, defer, unresolved
from anodize.runtime.device import Device, device as _device
from anodize.runtime.inflight import Use
from anodize.runtime.ops import _UNSET, BUILD, KernelOp, Leaf, Op, Seq, _common_device
from anodize.runtime.submission import _kernels_of, _take_fault, release_holds

if TYPE_CHECKING:
    from anodize.runtime.device import Device
    from anodize.runtime.submission import _Ctx

__all__ = ["Gather", "AndThen", "Map", "Value", "Zip", "Shared", "gather", "value", "zip_ops", "unzip", "Branch", "tagged_uses", "check_branches"]


_OURS: dict[Any, bool] = {}  # code object -> whether it is anodize's own


class Site:
    """Where user code built a combinator (the first frame outside anodize), as `file:line`
    when printed; formatted only for a message."""

    __slots__ = ("code", "line")

    def __init__(self) -> None:
        f = sys._getframe(2)
        ours = _OURS
        while f.f_back is not None:
            hit = ours.get(f.f_code)
            if hit is None:
                hit = ours[f.f_code] = f.f_globals.get("__name__", "").startswith("anodize.")
            if not hit:
                break
            f = f.f_back
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


def _admit(ctx: _Ctx, scope: tuple[Branch | None, int], op: Op) -> list[Any]:
    """An op built while queueing joins the submission: checked against the branches it may
    run beside (`scope`: the branch, and the `shared` op it is built inside), registered in
    flight; the markers of other work it must wait for."""
    if scope[0] is not None:
        scope[0].admit(tagged_uses(op, scope[1]))
    handle = ctx.handle
    known = handle.kernel_ids
    seen = handle.registered
    if type(op) is KernelOp:  # the common step: one launch, its uses as (key, writes) specs
        if op._held is not None:
            release_holds(op)
        lk = op.loaded
        if lk is not None and id(lk) not in known:
            known.add(id(lk))
            handle.kernels.append(lk)
        if ctx.capturing:
            return []
        for key, w, _, _ in op.spec:
            r = seen.get(key)  # registered, and whether written
            if r is None or (w and not r):
                break
        else:
            return []  # no memory the submission did not register already: nothing new to order after
        uses = op._uses
    else:
        if not isinstance(op, Leaf) or getattr(op, "_held", None) is not None:
            release_holds(op)
        for leaf in (op,) if isinstance(op, Leaf) else op.leaves():
            lk = leaf.loaded
            if lk is not None and id(lk) not in known:
                known.add(id(lk))
                handle.kernels.append(lk)
        if ctx.capturing:
            return []
        uses = op._uses if isinstance(op, Leaf) else op.uses()
        for u in uses:
            w = seen.get(u[:3])
            if w is None or (u.writes and not w):
                break
        else:
            return []
    for u in uses:
        seen[u[:3]] = seen.get(u[:3], False) or u.writes
    return [e.marker for e in inflight.extend(handle, uses)]


def _host_value(ctx: _Ctx, op: Op) -> Any:
    """`op`'s result after the host waited for it: staging copies done, no kernel fault."""
    ctx.handle.flush_ready()
    fault = _take_fault(_kernels_of(op))
    if fault is not None:
        raise fault
    return op._collect()


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



# ---- and_then ------------------------------------------------------------------------------------


class _Steps:
    """The one record of an `and_then` chain: its first op, each step's function and the
    user's `file:line` that added it (code object and bytecode offset, the line worked out
    only for a message), and the ops the functions built, in order (a step is its index)."""

    __slots__ = ("first", "fns", "codes", "offsets", "built")

    def __init__(self, first: Op):
        self.first = first
        self.fns: list[Callable[[Any], Op]] = []
        self.codes: list[Any] = []
        self.offsets: list[int] = []
        self.built: list[Op] = []

    def site(self, k: int) -> str:
        code, at = self.codes[k], self.offsets[k]
        line = next((ln for lo, hi, ln in code.co_lines() if lo <= at < hi and ln is not None), code.co_firstlineno)
        return f"{code.co_filename}:{line}"


class AndThen(Op):
    """`op.and_then(fn)`: `fn(result)` gives the next op; see the module docstring.

    `a.and_then(f).and_then(g)` is one flat chain (no recursion): each `and_then` appends
    to the `_Steps` record of the chain it extends (which it claims, so that op never runs
    on its own) and is a small view of its first `n` steps."""

    __slots__ = ("steps", "n")

    def __init__(self, first: Op, fn: Callable[[Any], Op]):
        if not callable(fn):
            raise ArgumentError(
                f"`and_then` takes a function of the previous result that returns an op, got {fn!r}",
                help="write `op.and_then(lambda r: kernel[cfg].op(...))`; `op.then(other)` sequences a built op",
            )
        self.device = first.device  # (`Op.__init__`, inlined: one per step of a chain)
        self._owner = self._handle = None
        self._result = _UNSET
        first._claim(self)
        if type(first) is AndThen and not first.steps.built:
            steps = first.steps
        else:
            steps = _Steps(first)
        steps.fns.append(fn)
        f = sys._getframe(2)  # the user's frame (past `Op.and_then`): the first outside anodize (`Site`)
        ours = _OURS
        while f.f_back is not None:
            hit = ours.get(f.f_code)
            if hit is None:
                hit = ours[f.f_code] = f.f_globals.get("__name__", "").startswith("anodize.")
            if not hit:
                break
            f = f.f_back
        steps.codes.append(f.f_code)
        steps.offsets.append(f.f_lasti)  # (`f_lineno` costs a search of the line table)
        self.steps = steps
        self.n = len(steps.fns)

    @property
    def first(self) -> Op:
        """The op the chain starts with."""
        return self.steps.first

    @property
    def built(self) -> list[Op]:
        """The ops the steps' functions built so far, in order."""
        return self.steps.built

    def describe(self) -> str:
        return f"`and_then` chain of {self.n} steps"

    def leaves(self) -> Iterator[Leaf]:
        steps = self.steps
        yield from steps.first.leaves()
        for b in steps.built:
            yield from b.leaves()

    def _parts(self) -> tuple[Op, ...]:
        return (self.steps.first, *self.steps.built)

    def _last(self) -> Op | None:
        built = self.steps.built
        if len(built) == self.n:
            return built[-1]
        return None

    def _early(self) -> Any:
        last = self._last()
        return _UNSET if last is None else last._early()

    def _collect(self) -> Any:
        last = self._last()
        if last is None:
            raise LaunchError(f"{self.describe()} did not build all its steps")
        self._result = last._collect()
        return self._result

    def _emit(self, ctx: _Ctx, lane: S.Lane) -> tuple[S.Lane, list[Any]]:
        scope = (ctx.scope, ctx.tag)
        first = self.steps.first
        lane, pend = first._emit(ctx, lane)
        return self._go(ctx, scope, lane, pend, first, False)

    def _go(self, ctx: _Ctx, scope: tuple[Branch | None, int], lane: S.Lane, pend: list[Any], cur: Op, synced: bool) -> tuple[S.Lane, list[Any]]:
        steps = self.steps
        fns, built, n = steps.fns, steps.built, self.n
        while len(built) < n and not ctx.stopped:
            k = len(built)
            if synced:
                val = _host_value(ctx, cur)
                synced = False
            else:
                val = cur._early()
            need_host = val is _UNSET
            if need_host or (pend and unresolved(pend)):
                if ctx.capturing:
                    ctx.no_future([FutureMarker()])
                fut = FutureMarker()
                ctx.enter(lane)
                wait = [*pend, lane.record()] if need_host else pend

                def resume(real: list[Any], lane: S.Lane = lane, cur: Op = cur, host: bool = need_host) -> None:
                    with ctx.lock:
                        ctx.in_thread()
                        end, p = self._go(ctx, scope, lane, [] if host else real, cur, host)
                        fut.resolve(ctx.tail(lane, end, p))

                defer(wait, resume, host_sync=need_host, on_error=ctx.failing(fut, lane))
                return lane, [fut]
            try:
                nxt = fns[k](val)
                ctx.after_user_code()
                if not isinstance(nxt, Op):
                    raise ArgumentError(
                        f"the function given to `and_then` at {steps.site(k)} returned {type(nxt).__qualname__}, not an op",
                        help="return an op (`kernel[cfg].op(...)`, `az.value(x)`); `op.map(fn)` computes a host value",
                    )
                if nxt.device is not self.device:
                    _common_device((self, nxt), "`and_then`")
                nxt._claim(self)
                built.append(nxt)
                more = _admit(ctx, scope, nxt)
                if more:
                    pend = [*pend, *more]
            except BaseException as e:  # noqa: BLE001 - raised at the op's completion
                ctx.fail(e)
                break
            if pend:
                lane, pend = self._queue(ctx, scope, lane, pend, nxt)
            elif isinstance(nxt, Leaf):  # one launch or copy: on `lane`, no branch to enter
                lane, pend = nxt._emit(ctx, lane)
            else:
                lane, pend = self._queue(ctx, scope, lane, pend, nxt)
            cur = nxt
        return lane, pend

    @staticmethod
    def _queue(ctx: _Ctx, scope: tuple[Branch | None, int], lane: S.Lane, pend: list[Any], nxt: Op) -> tuple[S.Lane, list[Any]]:
        """Queue the op a step built after `pend`, inside the branch the chain is part of (a
        deferred step runs after the gather that queued it moved on)."""
        saved = ctx.scope, ctx.tag
        ctx.scope, ctx.tag = scope
        try:
            if pend:
                return ctx.chain(lane, pend, [nxt])
            return nxt._emit(ctx, lane)  # nothing to wait for: what `chain` does for one step
        finally:
            ctx.scope, ctx.tag = saved

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        """A fresh chain of the same steps from the rebound first op (a graph's replay on the
        CPU backend): one record and one view, the steps' functions and sites copied."""
        steps = self.steps
        first = steps.first._rebind(mapping)
        n = self.n
        op = AndThen.__new__(AndThen)
        op.device = first.device
        op._owner = op._handle = None
        op._result = _UNSET
        first._claim(op)
        fresh = _Steps(first)
        fresh.fns, fresh.codes, fresh.offsets = steps.fns[:n], steps.codes[:n], steps.offsets[:n]
        op.steps, op.n = fresh, n
        return op


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

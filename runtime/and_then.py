"""`op.and_then(fn)`: a chain of steps, each op built by a function of the previous result
(the other combinators: runtime/combinators.py, whose docstring says when `fn` runs and which
ownership rules a built op keeps).

**One record per chain.**  `a.and_then(f).and_then(g)...` is one `_Steps` record (the first
op, the functions, the ops they built: a step is an index; a message names a step by its
function's own `file:line`, so building a step records no call site),
and each `and_then` a small slotted view of its first `n` steps; the ops a step builds are
one slotted `KernelOp` each (runtime/ops.py), whose launch was validated once for its
arguments (the op memo, runtime/op_memo.py).  Queueing a step checks a built kernel op
against what the submission registered through its use specs, and registers it in flight
(runtime/inflight.py `extend`) only when it uses memory not registered yet.  No object is
made per step beyond the view, the op and its argument tuple (tests/asyncops/
test_async_host_cost.py bounds it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from anodize.language.errors import ArgumentError, LaunchError
from anodize.runtime import inflight, streams as S
from anodize.runtime.deferred import FutureMarker, defer, unresolved
from anodize.runtime.ops import _UNSET, SUBMIT, KernelOp, Leaf, Op, _common_device, fast_lane, launch_pack
from anodize.runtime.submission import _kernels_of, _take_fault, release_holds

if TYPE_CHECKING:
    from anodize.runtime.combinators import Branch
    from anodize.runtime.submission import _Ctx

__all__ = ["AndThen"]


def _admit(ctx: _Ctx, scope: tuple[Branch | None, int], op: Op) -> list[Any]:
    """An op built while queueing joins the submission: checked against the branches it may
    run beside (`scope`: the branch, and the `shared` op it is built inside), registered in
    flight; the markers of other work it must wait for."""
    if scope[0] is not None:
        scope[0].admit_op(op, scope[1])
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
        spec = op.spec
        for key, w, _, _ in spec:
            r = seen.get(key)  # registered, and whether written
            if r is None or (w and not r):
                break
        else:
            handle.admitted[id(spec)] = spec
            return []  # no memory the submission did not register already: nothing new to order after
        handle.admitted[id(spec)] = spec  # (registered below)
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
            known_w = seen.get(u[:3])
            if known_w is None or (u.writes and not known_w):
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


class _Steps:
    """The one record of an `and_then` chain: its first op, each step's function, how many
    steps built their op (`count`; a step is its index), the last op built, and the ops built
    that queueing went through `_admit` for (in order).  A kernel op queued straight onto its
    lane (`AndThen._go`'s quick step: its kernel and memory are the submission's already) is
    let go once launched: a chain of 1,000 such steps keeps no op per step alive."""

    __slots__ = ("first", "fns", "built", "count", "last")

    def __init__(self, first: Op):
        self.first = first
        self.fns: list[Callable[[Any], Op]] = []
        self.built: list[Op] = []
        self.count = 0
        self.last: Op | None = None

    def site(self, k: int) -> str:
        """Step `k`'s function, by name and the `file:line` that defines it (worked out only
        for a message: the chain keeps no call site per step)."""
        fn = self.fns[k]
        inner = getattr(fn, "func", fn)  # (a functools.partial)
        code = getattr(getattr(inner, "__func__", inner), "__code__", None)  # (a bound method, a function)
        if code is None:
            return f"{fn!r}"
        return f"`{code.co_name}` ({code.co_filename}:{code.co_firstlineno})"


_new = object.__new__


class AndThen(Op):
    """`op.and_then(fn)`: `fn(result)` gives the next op; see the module docstring.

    `a.and_then(f).and_then(g)` is one flat chain (no recursion): each `and_then` appends
    to the `_Steps` record of the chain it extends (which it claims, so that op never runs
    on its own) and is a small view of its first `n` steps."""

    __slots__ = ("steps", "n")

    steps: _Steps
    n: int

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
        if type(first) is AndThen and not first.steps.count:
            steps = first.steps
        else:
            steps = _Steps(first)
        steps.fns.append(fn)
        self.steps = steps
        self.n = len(steps.fns)

    def and_then(self, fn: Callable[[Any], Op]) -> Op:
        """The chain with one more step (see `Op.and_then`): appended to this chain's record
        (this view is claimed), a new view of one more step."""
        steps = self.steps
        if self._owner is not None or self._handle is not None or steps.count or not callable(fn):
            return AndThen(self, fn)  # (its checks raise the errors)
        self._owner = True  # (`_claim`, whose checks just passed)
        op = _new(AndThen)
        op.device = self.device
        op._owner = op._handle = None
        op._result = _UNSET
        steps.fns.append(fn)
        op.steps = steps
        op.n = len(steps.fns)
        return op

    @property
    def first(self) -> Op:
        """The op the chain starts with."""
        return self.steps.first

    @property
    def built(self) -> list[Op]:
        """The ops the steps' functions built so far that the chain keeps, in order (a kernel
        op launched straight onto its lane is not kept: see `_Steps`)."""
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
        steps = self.steps
        if steps.count == self.n:
            return steps.last
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
        handle = ctx.handle
        # A `quick` step: a kernel op of use specs already admitted (the op memo shares one spec
        # tuple between ops of the same arguments), onto `fast`, the lane the last kernel op
        # went onto (entered already) on its device.  It needs no admission (`_admit` would find
        # its memory registered and its kernel known) and is queued directly (`Leaf._emit`
        # without its moves and first-use waits: `lane.submit` / `lane.launch`, inlined).
        # Outside a gather branch only (a branch checks each op against the others), and not
        # while capturing.
        plain = scope[0] is None and not ctx.capturing
        admitted = handle.admitted
        fast: S.Lane | None = None
        fast_dev: Any = None
        launch: Any = None
        held: Any = None  # an op the straight run below built but did not launch: queued next
        packs: dict[int, Any] = {}  # id(flat) -> `launch_pack` on `fast`
        k = steps.count
        while k < n and not ctx.stopped:
            if synced:
                val = _host_value(ctx, cur)
                synced = False
            else:
                val = cur.outputs if type(cur) is KernelOp else cur._early()
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
                if held is None:
                    nxt = fns[k](val)
                    if ctx._stamps and ctx.after_user_code():
                        fast = None  # user code allocated on a device's stream: lanes wait for it again
                else:  # (built after a quick step: `cur` is a kernel op, `pend` empty, `val` unused)
                    nxt, held = held, None
                quick = (
                    type(nxt) is KernelOp  # (whose `_claim` is `Op._claim`)
                    and lane is fast
                    and nxt._owner is None
                    and nxt._handle is None
                    and nxt._held is None
                    and nxt.device is fast_dev
                    and id(nxt.spec) in admitted
                    and not pend
                )
                if quick:  # every check below holds: claimed, admitted, queued straight onto `lane`
                    nxt._owner = True
                    k += 1
                    steps.count, steps.last = k, nxt  # (not kept in `built`: see `_Steps`)
                else:
                    kernel = type(nxt) is KernelOp
                    if not kernel and not isinstance(nxt, Op):
                        raise ArgumentError(
                            f"the function {steps.site(k)} given to `and_then` returned {type(nxt).__qualname__}, not an op",
                            help="return an op (`kernel[cfg].op(...)`, `az.value(x)`); `op.map(fn)` computes a host value",
                        )
                    if nxt.device is not self.device:
                        _common_device((self, nxt), "`and_then`")
                    if nxt._owner is None and nxt._handle is None and (kernel or type(nxt)._claim is Op._claim):
                        nxt._owner = True  # (`_claim`, whose checks just passed)
                    else:
                        nxt._claim(self)
                    built.append(nxt)
                    k += 1
                    steps.count, steps.last = k, nxt
                    more = _admit(ctx, scope, nxt)
                    if more:
                        pend = [*pend, *more]
            except BaseException as e:  # noqa: BLE001 - raised at the op's completion
                ctx.fail(e)
                break
            if quick:
                pk = packs.get(id(nxt.flat))  # type: ignore[attr-defined]
                while True:  # this op, then each next step's while it is quick too (a straight run)
                    if launch is SUBMIT:  # a CPU worker: queued on its FIFO, as `Leaf._emit` does
                        lane.submit(handle, nxt._execute_cpu)  # type: ignore[attr-defined]
                    else:  # the launch, its arguments bound once per flat list (`launch_pack`)
                        if pk is None:
                            pk = launch_pack(nxt.plan, nxt.flat, lane, launch)  # type: ignore[attr-defined]
                            if pk is None:
                                break  # a grid-synchronising kernel: `Leaf._emit` below
                            packs[id(nxt.flat)] = pk  # type: ignore[attr-defined]
                        if launch is not None:  # a GPU stream: `KernelOp._enqueue_gpu`
                            pk[2].dirty = True
                            pk[0](*pk[1])
                        elif handle.error is None:  # the CPU lane of the calling thread: run it here, as `run_item`
                            pk[2].dirty = True
                            try:
                                pk[0](*pk[1])
                            except BaseException as e:  # noqa: BLE001 - reported at completion
                                handle.error = e
                    cur = nxt
                    if k >= n or ctx.stopped:
                        break
                    try:
                        nxt = fns[k](nxt.outputs)  # type: ignore[attr-defined]
                    except BaseException as e:  # noqa: BLE001 - raised at the op's completion
                        ctx.fail(e)
                        return lane, pend
                    if ctx._stamps and ctx.after_user_code():
                        fast = None
                        held = nxt  # (the checks above, again, in the loop: not quick now)
                        break
                    if type(nxt) is not KernelOp or nxt._owner is not None or nxt._handle is not None or nxt._held is not None:
                        held = nxt  # checked and queued by the loop's general path
                        break
                    # A flat list with a pack went straight onto `fast` already: its op's device
                    # is `fast_dev` and its specs are admitted (a flat list has one plan and one
                    # spec tuple: the op memo shares all three, runtime/op_memo.py).
                    pk = packs.get(id(nxt.flat))
                    if pk is None and (nxt.device is not fast_dev or id(nxt.spec) not in admitted):
                        held = nxt  # checked and queued by the loop's general path
                        break
                    nxt._owner = True
                    k += 1
                    steps.count, steps.last = k, nxt
                if held is not None or cur is nxt:
                    continue
            if pend:
                lane, pend = self._queue(ctx, scope, lane, pend, nxt)
            elif isinstance(nxt, Leaf):  # one launch or copy: on `lane`, no branch to enter
                lane, pend = nxt._emit(ctx, lane)
            else:
                lane, pend = self._queue(ctx, scope, lane, pend, nxt)
            if plain and type(nxt) is KernelOp and not pend and lane is not fast:
                fast, launch = fast_lane(lane)
                fast_dev = lane.device
                packs = {}
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
        CPU backend): one record and one view, the steps' functions copied."""
        steps = self.steps
        first = steps.first._rebind(mapping)
        n = self.n
        op = AndThen.__new__(AndThen)
        op.device = first.device
        op._owner = op._handle = None
        op._result = _UNSET
        first._claim(op)
        fresh = _Steps(first)
        fresh.fns = steps.fns[:n]
        op.steps, op.n = fresh, n
        return op

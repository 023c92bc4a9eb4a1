"""Lazy operations: device work that is recorded now and run later.

    op = vecadd[cfg].op(a, b, c)            # validated now (like a launch), runs nothing
    op = op.then(c.to_host_op())            # sequence
    both = az.gather(op1, op2)              # independent branches
    both.run()                              # blocking, on the device's stream
    result = await both                     # asyncio: never blocks the event loop
    handle = both.submit(pool)              # on an az.StreamPool; handle.wait() / await handle

An operation is a tree: leaves (`KernelOp`, `CopyOp`, `ToHostOp`) and composites
(`Seq` from `then`; `Gather` from `az.gather` and the other combinators: runtime/combinators.py).  Each op runs once; composing an
op hands it to the composite.  Submission registers every array the op uses with
`runtime.inflight` until the host observes completion (host writes into that
memory are refused meanwhile), and the op holds the arrays alive.  A
`KernelFault` of the op's kernels surfaces when its completion is observed
(`run`, `wait`, `await`).

Scheduling (`_emit`): a leaf goes on the current lane; `then` stays on its lane;
the branches of a gather fork from the current lane with an event and go to other
lanes of the pool, and the gather's successors wait for every branch.  An op may span
devices (issue: several GPUs): a leaf of another device than the current lane's moves
the work to a lane of its own device, which first waits (an event) for the lane it
came from; a gather branch of another device forks straight to a lane of that device.  On a GPU a
submission first waits for the device's own stream (allocations, zero fills and
plain launches queued there) and for in-flight submissions that write memory
it uses (or use memory it writes).  The device's stream does not wait for
submissions: await them before a plain launch touches their buffers.  Submission and
completion (`_start`, `_Ctx`, `Handle`) are in runtime/submission.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from anodize.language.errors import ArgumentError, LaunchError
from anodize.runtime import inflight, lazy, streams as S
from anodize.runtime.args import describe_value
from anodize.runtime.buffer import Buffer
from anodize.runtime.grid_counter import with_grid_counter
from anodize.runtime.inflight import Use, UseSpec
from anodize.runtime.policies import Policy, policy_of
from anodize.runtime.submission import Handle, _Ctx, _lane_for, _start

if TYPE_CHECKING:
    from anodize.runtime.compile import LoadedKernel
    from anodize.runtime.device import Device
    from anodize.runtime.launch import Launcher

__all__ = ["Op", "KernelOp", "Seq", "Handle", "Builders", "BUILD"]  # the copy leaves: runtime/copy_ops.py; gather: runtime/combinators.py

_UNSET: Any = object()


class Builders:
    """What `Op`'s combinator methods build: ops of runtime/combinators.py, which subclass `Op`
    (so it imports this module, and this module imports it nowhere).  That module fills these
    slots when it loads; the first combinator of a program that has not loaded it yet loads it
    (runtime/lazy.py `combinators`)."""

    ready = False
    and_then: Callable[[Op, Callable[[Any], Op]], Op]
    map: Callable[[Op, Callable[[Any], Any]], Op]
    shared: Callable[[Op], Op]
    unzip: Callable[[Op, int | None], tuple[Op, ...]]


BUILD = Builders()


def _build() -> Builders:
    if not BUILD.ready:
        lazy.combinators()
    return BUILD


class Op:
    """A lazy unit of device work.  See the module docstring."""

    # slots: a chain of 1,000 `and_then` steps makes a kernel op and a step per element; a
    # subclass that declares no slots of its own has a `__dict__` as usual
    __slots__ = ("device", "_owner", "_handle", "_result", "__weakref__")

    device: Device

    def __init__(self, device: Device):
        self.device = device
        self._owner: object | None = None  # True once a composite (or graph) took this op
        self._handle: Handle | None = None
        self._result: Any = _UNSET

    # -- composition ----------------------------------------------------------------------
    def then(self, other: Op) -> Op:
        """`self`, then `other` (in stream order); the result is `other`'s."""
        return Seq(self, other)

    def and_then(self, fn: Callable[[Any], Op]) -> Op:
        """`fn(result)` returns the next op, built when `self` completes (in stream order: at
        once for a device result, after the host saw a host result) and queued on the stream
        `self` ended on.  See runtime/combinators.py."""
        return (BUILD if BUILD.ready else _build()).and_then(self, fn)

    def map(self, fn: Callable[[Any], Any]) -> Op:
        """An op whose result is `fn(result)`, run on the host after `self` completed (in a
        helper thread: an awaiting event loop is never blocked)."""
        return _build().map(self, fn)

    def shared(self) -> Op:
        """This op, runnable once and usable by many consumers (each ordered after it)."""
        return _build().shared(self)

    def unzip(self, n: int | None = None) -> tuple[Op, ...]:
        """One op per element of this op's tuple result (a zip, gather or `call_op` with
        several outputs gives its arity; else pass `n`); the op itself runs once."""
        return _build().unzip(self, n)

    # -- running --------------------------------------------------------------------------
    def run(self, stream: Any = None) -> Any:
        """Run and wait; return the result.  `stream`: None (the device's stream), a cuda.core
        Stream, or an `az.StreamPool`."""
        if isinstance(stream, S.StreamPool):
            return self.submit(stream).wait()
        if stream is None:
            return _start(self, S.device_lanes(self.device)).wait()
        return _start(self, S.SingleLane(self.device, _lane_for(self.device, stream))).wait()

    def submit(self, pool: Any = None) -> Handle:
        """Start on `pool` and return a handle at once.  `pool`: a scheduling policy
        (`az.RoundRobin(n)`, `az.SingleStream()`, `az.DependencyChains(n)`: runtime/policies.py),
        an `az.StreamPool`, a list of pools (one per device), or None (the device's policy,
        `az.set_policy`, else its default pool).

        An op that spans devices takes one pool per device (a list), or one pool for its
        first device; its other devices then use their own policy or default pool."""
        if isinstance(pool, Policy):
            return _start(self, pool.lanes(self.device), pool.lanes)
        given = list(pool) if isinstance(pool, (list, tuple)) else [] if pool is None else [pool]
        by_dev: dict[int, S.StreamPool] = {}
        devs = self.devices() or [self.device]
        for p in given:
            if not isinstance(p, S.StreamPool):
                raise ArgumentError(
                    f"`submit` takes a scheduling policy or an az.StreamPool (or a list of them), got {type(p).__qualname__}"
                )
            if not any(p.device is d for d in devs):
                raise ArgumentError(
                    f"{self.describe()} runs on {', '.join(d.describe() for d in devs)}, "
                    f"but the pool is on {p.device.describe()}"
                )
            by_dev[id(p.device)] = p
        first = by_dev.get(id(self.device)) or policy_of(self.device)

        def pool_of(dev: Device) -> Any:
            return by_dev.get(id(dev)) or policy_of(dev)

        return _start(self, first, pool_of)

    def wait(self) -> Any:
        """Wait for a submitted op (submitting it to the default pool first if needed); return its result."""
        return (self._handle or self.submit()).wait()

    def __await__(self) -> Generator[Any, None, Any]:
        handle = self._handle or self.submit()
        return handle.__await__()

    @property
    def result(self) -> Any:
        """The op's value once complete (`ToHostOp`: the array; `gather`: a tuple; `then`: the last one's)."""
        if self._result is _UNSET:
            if self._handle is not None and self._handle.error is not None:
                raise LaunchError(
                    f"{self.describe()} failed, so it has no result: {self._handle.error}"
                ) from self._handle.error
            raise LaunchError(
                f"{self.describe()} has not completed, so it has no result yet",
                help="run it with `op.run()`, `await op`, or `op.submit(pool).wait()`",
            )
        return self._result

    @property
    def started(self) -> bool:
        """Whether the op has been submitted for running (it has a handle)."""
        return self._handle is not None

    def done(self) -> bool:
        """True once the op was started and the device finished it."""
        return self._handle is not None and self._handle.done()

    def __repr__(self) -> str:
        state = "pending" if self._handle is None else ("done" if self._handle.done() else "in flight")
        return f"<anodize {self.describe()} ({state})>"

    # -- the tree -------------------------------------------------------------------------
    def describe(self) -> str:
        """What the op does, in one line."""
        raise NotImplementedError

    def leaves(self) -> Iterator[Leaf]:
        """The op's leaves (single launches and copies), in order."""
        raise NotImplementedError

    def uses(self) -> tuple[Use, ...]:
        """The buffers the op reads and writes, over all its leaves."""
        return tuple(u for leaf in self.leaves() for u in leaf._uses)

    def devices(self) -> list[Device]:
        """The devices this op's work runs on, first use first (its `device` is the first)."""
        seen: dict[int, Device] = {}
        for leaf in self.leaves():
            seen.setdefault(id(leaf.device), leaf.device)
        return list(seen.values())

    def _emit(self, ctx: _Ctx, lane: S.Lane) -> tuple[S.Lane, list[S.Marker]]:
        """Queue this op's work starting on `lane`; return the lane it ends on (always `lane`)
        and markers on other lanes that its successors must wait for."""
        raise NotImplementedError

    def _collect(self) -> Any:
        """After completion: compute and store the result."""
        raise NotImplementedError

    def _early(self) -> Any:
        """Once queued: the result when it is known without waiting for the device (device
        Buffers, `None`, an `az.value`), which later work may use in stream order; `_UNSET`
        when only the completed work gives it (a host array)."""
        return _UNSET

    def _parts(self) -> tuple[Op, ...]:
        """The ops this op is made of (built ones included)."""
        return ()

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        """A fresh, validated copy of this op with arrays replaced (`mapping`: id(old) -> new)."""
        raise NotImplementedError

    def _claim(self, owner: object) -> None:
        if self._handle is not None:
            raise LaunchError(
                f"{self.describe()} was already started, so it cannot be composed or captured",
                help="build a new op (ops run once); `az.capture(op)` makes a replayable graph",
            )
        if self._owner is not None:
            raise LaunchError(
                f"{self.describe()} is already part of another op (or a captured graph)",
                help="an op runs once and belongs to one composite; build it again to use it twice",
            )
        # a flag, not `owner`: the owner holds this op, so a reference back would make every
        # composite a cycle that only the garbage collector frees
        self._owner = True

    def _claim_for_run(self) -> None:
        if self._handle is not None:
            raise LaunchError(
                f"{self.describe()} was already started",
                help="wait for it with `op.wait()` / `await op`; build a new op to run the work again",
            )
        if self._owner is not None:
            raise LaunchError(
                f"{self.describe()} is part of another op (or a captured graph), so it runs with that one",
                help="run the composite op instead",
            )


class Leaf(Op):
    """A single piece of work: one kernel launch or one copy."""

    __slots__ = ()

    _uses: tuple[Use, ...] = ()
    loaded: LoadedKernel | None = None

    def leaves(self) -> Iterator[Leaf]:
        yield self

    def _emit(self, ctx: _Ctx, lane: S.Lane) -> tuple[S.Lane, list[S.Marker]]:
        if lane.device is not None and lane.device is not self.device:
            lane = ctx.move(lane, self.device)  # another device: continue on one of its lanes
        ctx.enter(lane)
        if lane.is_gpu:
            self._enqueue_gpu(ctx, lane)  # type: ignore[arg-type]
        else:
            lane.submit(ctx.handle, self._execute_cpu)
        return lane, []

    def _enqueue_gpu(self, ctx: _Ctx, lane: S.GpuLane) -> None:
        raise NotImplementedError

    def _execute_cpu(self) -> None:
        raise NotImplementedError

    def _collect(self) -> Any:
        self._result = None
        return None

    def _early(self) -> Any:
        return None


# ---- kernels -----------------------------------------------------------------------------------


class KernelOp(Leaf):
    """`kernel[config].op(*args)`: a validated launch, recorded.

    One slotted record per launch: its arrays' uses are kept as `spec` (one `UseSpec` per
    tracked array: its (space, lo, hi) key, whether written, its label and the argument it is),
    shared with the launcher's op memo (runtime/op_memo.py) for the same arguments, and the
    `Use` tuples are made only when something reads `_uses` (a gather's check, a submission's
    registration)."""

    __slots__ = ("launcher", "plan", "args", "flat", "loaded", "outputs", "_held", "spec", "_u")

    def __init__(self, launcher: Launcher, plan: Any, args: tuple[Any, ...], flat: list[Any], spec: tuple[UseSpec, ...] | None = None):
        Op.__init__(self, plan.device)
        self.launcher = launcher
        self.plan = plan
        self.args = args
        self.flat = flat
        self.loaded = launcher._loaded[id(plan.device)]
        self.outputs: Any = None  # `k[cfg].call_op(...)`: the Buffers it allocated (its result)
        self._held: Any = None  # `call_op`: the guard of its arrays until it is submitted
        self._u: tuple[Use, ...] | None = None
        if spec is not None:  # (the op memo: the same arrays as a recent op, runtime/op_memo.py)
            self.spec = spec
            return
        name = plan.name
        uses: list[Use] = []
        specs: list[UseSpec] = []
        for k, (p, a) in enumerate(zip(plan.params, args, strict=True)):
            if not p.is_slice:
                continue
            label = f"`{p.name}` of kernel `{name}`"
            if isinstance(a, Buffer):
                u = inflight.use_of_buffer(a, p.is_output, label)
            elif isinstance(a, np.ndarray):
                u = inflight.use_of_host(a, p.is_output, label)
            else:
                continue  # foreign CUDA arrays (CuPy, PyTorch) are held alive, but not tracked
            uses.append(u)
            specs.append(((u.space, u.lo, u.hi), u.writes, label, k))
        self._u = tuple(uses)
        self.spec = tuple(specs)

    @property
    def _uses(self) -> tuple[Use, ...]:  # type: ignore[override]
        """The arrays the launch uses (made from `spec` on first use)."""
        u = self._u
        if u is None:
            args = self.args
            new = tuple.__new__  # `Use(...)` without its Python-level `__new__`
            u = self._u = tuple([new(Use, (*key, w, label, args[k])) for key, w, label, k in self.spec])
        return u

    def describe(self) -> str:
        return f"kernel op `{self.plan.name}`"

    def _early(self) -> Any:
        return self.outputs

    def _collect(self) -> Any:
        self._result = self.outputs
        return self.outputs

    def _enqueue_gpu(self, ctx: _Ctx, lane: S.GpuLane) -> None:
        plan = self.plan
        plan.arena.dirty = True  # a later dev.check() reads the fault records too
        args = [*self.flat, *plan.hidden]
        if plan.grid_counter:  # `az.grid.sync()`: this launch's own counter, on the lane's stream
            with_grid_counter(lane.cu, lambda counter: lane.launch(plan.cu_config, plan.handle, [*args, counter]))
        else:
            lane.launch(plan.cu_config, plan.handle, args)

    def _execute_cpu(self) -> None:
        plan = self.plan
        cfg = plan.config
        plan.arena.dirty = True
        plan.entry(cfg.grid, cfg.block, self.flat, plan.fault, plan.rank, cfg.shared_mem)

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        op: KernelOp = self.launcher.op(*[mapping.get(id(a), a) for a in self.args])
        if self.outputs is not None:
            op.outputs = _rebound(self.outputs, mapping)
        return op


def _rebound(x: Any, mapping: dict[int, Any]) -> Any:
    return tuple(mapping.get(id(b), b) for b in x) if isinstance(x, tuple) else mapping.get(id(x), x)


# ---- copies ------------------------------------------------------------------------------------


def _describe_array(x: object) -> str:
    return describe_value(x)


# ---- composites --------------------------------------------------------------------------------


def _common_device(ops: tuple[Op, ...], what: str) -> Device:
    if not ops:
        raise ArgumentError(f"{what} needs at least one op")
    for o in ops:
        if not isinstance(o, Op):
            raise ArgumentError(
                f"{what} takes anodize ops, got {_describe_array(o)}",
                help="make one with `kernel[cfg].op(...)`, `dev.copy_op(dst, src)` or `buf.to_host_op()`",
            )
    dev = ops[0].device
    for o in ops[1:]:  # ops may span devices of one kind (GPUs, or CPU stand-in devices)
        if o.device.kind != dev.kind:
            raise ArgumentError(
                f"{what}: {ops[0].describe()} runs on {dev.describe()}, {o.describe()} on {o.device.describe()}; "
                "an op spans devices of one kind",
                help="run the CPU part and the GPU part as separate ops, with a host copy between them",
            )
    return dev


SUBMIT: Any = object()  # `fast_lane`: a CPU worker lane, which queues on its FIFO


def fast_lane(lane: S.Lane) -> tuple[S.Lane | None, Any]:
    """(`lane`, how it launches) when a kernel op may go straight onto it (a `then` or
    `and_then` chain's next kernel op): the calling thread's CPU lane (None: run the kernel
    here), a CPU worker (`SUBMIT`: its queue) or a CUDA stream (cuda.core's `launch`);
    (None, None) for another lane."""
    kind = type(lane)
    if kind is S.InlineLane:
        return lane, None
    if kind is S.WorkerLane:
        return lane, SUBMIT
    if kind is S.GpuLane:
        return lane, lazy.cuda_core().launch
    return None, None


def launch_pack(plan: Any, flat: list[Any], lane: S.Lane, launch: Any) -> tuple[Any, tuple[Any, ...], Any, list[Any]] | None:
    """`(call, args, arena, flat)`: a kernel op of `plan` and `flat` queued straight onto `lane`
    (`fast_lane`'s `launch`: None, the calling thread's CPU lane; else cuda.core's `launch`) is
    `arena.dirty = True; call(*args)`, with everything but the arguments bound once.  A chain
    keeps one per flat argument list in a dict by `id(flat)` for the lane it runs on: the op
    memo shares one list between the ops of the same arguments (runtime/op_memo.py), and the
    entry holds that list, so its id is not reused while the entry lives.  None for a
    grid-synchronising kernel (its own counter per launch: `Leaf._emit`)."""
    if launch is None:
        cfg = plan.config
        return plan.entry, (cfg.grid, cfg.block, flat, plan.fault, plan.rank, cfg.shared_mem), plan.arena, flat
    if plan.grid_counter:
        return None
    return launch, (lane.stream, plan.cu_config, plan.handle, *flat, *plan.hidden), plan.arena, flat  # type: ignore[attr-defined]


_new = object.__new__


class Seq(Op):
    """`a.then(b)`: `b` starts after `a` finishes."""

    __slots__ = ("_kids",)

    _kids: list[Op]

    def __init__(self, *ops: Op):
        dev = _common_device(ops, "`then`")
        self.device = dev  # (`Op.__init__`, inlined: one per `then` of a chain)
        self._owner = self._handle = None
        self._result = _UNSET
        flat: list[Op] | None = None
        for o in ops:
            o._claim(self)
            if isinstance(o, Seq):  # a.then(b).then(c): one flat sequence
                if flat is None:
                    flat = o._kids  # taken over: the claimed sequence never runs or grows again
                else:
                    flat.extend(o._kids)
            elif flat is None:
                flat = [o]
            else:
                flat.append(o)
        assert flat is not None
        self._kids = flat

    def then(self, other: Op) -> Op:
        """`self`, then `other` (see `Op.then`): a kernel op on this sequence's device is
        appended to its list in place (`Seq(self, other)` takes that list over too), the
        claims as `_claim` makes them; anything else takes `Seq(self, other)`."""
        if (
            type(other) is KernelOp
            and other.device is self.device
            and self._owner is None
            and self._handle is None
            and other._owner is None
            and other._handle is None
        ):
            self._owner = other._owner = True
            op = _new(Seq)
            op.device = self.device
            op._owner = op._handle = None
            op._result = _UNSET
            kids = self._kids
            kids.append(other)
            op._kids = kids
            return op
        return Seq(self, other)

    @property
    def children(self) -> tuple[Op, ...]:
        """The ops in order (a nested sequence flattened)."""
        return tuple(self._kids)

    def describe(self) -> str:
        return f"sequence of {len(self._kids)} ops"

    def leaves(self) -> Iterator[Leaf]:
        for c in self._kids:
            if type(c) is KernelOp:
                yield c
            else:
                yield from c.leaves()

    def _emit(self, ctx: _Ctx, lane: S.Lane) -> tuple[S.Lane, list[S.Marker]]:
        kids = self._kids
        if ctx.capturing:
            return ctx.chain(lane, [], kids)
        # A kernel op right after a kernel op that went onto `lane` (entered already, on the
        # op's device, nothing to wait for) is queued straight onto it: what `Leaf._emit`
        # does there (`enter` finds the lane entered, no move), without its frames.  The
        # submission registered every kid's memory when it started (`_start`'s survey).
        handle = ctx.handle
        n = len(kids)
        k = 0
        while k < n and not ctx.stopped:
            op = kids[k]
            lane, pend = op._emit(ctx, lane)
            k += 1
            if pend:
                return ctx.chain(lane, pend, kids, k)
            if type(op) is not KernelOp:
                continue
            fast, launch = fast_lane(lane)
            if fast is None:
                continue
            dev = lane.device
            packs: dict[int, Any] = {}  # id(flat) -> `launch_pack`, for this lane
            while k < n and not ctx.stopped:
                op = kids[k]
                if type(op) is not KernelOp or op.device is not dev:
                    break
                if launch is SUBMIT:  # a CPU worker's FIFO
                    lane.submit(handle, op._execute_cpu)
                else:
                    pk = packs.get(id(op.flat))
                    if pk is None:
                        pk = launch_pack(op.plan, op.flat, lane, launch)
                        if pk is None:
                            break  # a grid-synchronising kernel
                        packs[id(op.flat)] = pk
                    if launch is not None:  # a CUDA stream: `KernelOp._enqueue_gpu`
                        pk[2].dirty = True
                        pk[0](*pk[1])
                    elif handle.error is None:  # the calling thread's CPU lane: `Handle.run_item`, inlined
                        pk[2].dirty = True
                        try:
                            pk[0](*pk[1])
                        except BaseException as e:  # noqa: BLE001 - reported at completion
                            handle.error = e
                k += 1
        return lane, []

    def _early(self) -> Any:
        return self._kids[-1]._early()

    def _parts(self) -> tuple[Op, ...]:
        return tuple(self._kids)

    def _collect(self) -> Any:
        r = None
        for c in self._kids:
            r = c._collect()
        self._result = r
        return r

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        return Seq(*(c._rebind(mapping) for c in self._kids))


# ---- a test hook: hold a CPU lane until released ----------------------------------------------


class HoldOp(Leaf):
    """CPU backend only: a step that waits until `gate` is set (tests use it to keep ops in flight)."""

    def __init__(self, dev: Device, gate: threading.Event, timeout: float = 30.0):
        if dev.kind != "cpu":
            raise ArgumentError("HoldOp is a CPU-backend test hook")
        super().__init__(dev)
        self.gate = gate
        self.timeout = timeout

    def describe(self) -> str:
        return "hold op"

    def _execute_cpu(self) -> None:
        if not self.gate.wait(self.timeout):
            raise TimeoutError("HoldOp: the gate was never opened")

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        return HoldOp(self.device, self.gate, self.timeout)

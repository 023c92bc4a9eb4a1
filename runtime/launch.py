"""Validated launches: `kernel[config](*args)` and `kernel.unsafe_launch(config, *args)`.

`prepare(kernel, config, safe)` checks what depends only on the kernel and the
config (the contract exists, its rank, its block, every dimension beyond its
domain is 1: runtime/launch_checks.py) once and caches a `Launcher` on the
kernel.  The first call on a device compiles and loads the kernel and
checks the device's limits.  Each argument-type signature then gets a `_Plan`:
the adapters chosen for those types, precomputed alias pairs and `requires`
slots.  A repeated launch runs only the plan: pointers, sizes, dtypes, device,
aliasing and `requires`, then the launch itself.

The repeated launch is the hot path, so a `Launcher` call tries, in order (see
`Launcher`): the memo of the last two launches (the same live Buffer objects and
scalar objects: nothing that was checked can have changed, relaunch the packed
arguments), the plan's quick path (every check, specialised to the plan's types,
building the packed arguments in one pass; `requires` compiled to closures by
runtime/requires_fast.py), then the full path, which alone raises errors.  The
launch itself is one call with the stream, cuda.core config and kernel bound
(`CudaDevice.launch_call`).  bench/launch_microbench.py measures all three.  The quick
path and the memo are in runtime/launch_fast.py.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from anodize.codegen.artifact import launch_grid
from anodize.language.contract import (
    Contract,
    Env,
    RequiresOverflow,
    eval_expr,
    first_violation,
    launch_requires,
)
from anodize.language.errors import (
    USER_ERRORS,
    AliasingError,
    ArgumentError,
    ContractViolation,
    LaunchError,
)
from anodize.runtime import args as A, device as devmod, inflight as _inflight, lazy, streams as _streams
from anodize.runtime.buffer import Buffer
from anodize.runtime.compile import LoadedKernel, compile_for_device
from anodize.runtime.grid_counter import counted_call
from anodize.runtime.config import LaunchConfig
from anodize.runtime.device import mark_used
from anodize.runtime.launch_checks import (
    UNIVERSAL,
    argument_count_error,
    bind_keywords,
    check_compiled,
    check_contract,
    check_device,
    check_limits,
)
from anodize.runtime.launch_fast import (
    _BUF,
    _NUMPY,
    _OTHER,
    _SCALAR,
    _foreign_call,
    _launch_call,
    _quick_path,
)
from anodize.runtime.op_memo import OpMemo
from anodize.runtime.ops import KernelOp
from anodize.runtime.outputs import call, call_op

if TYPE_CHECKING:
    from anodize.codegen.artifact import ParamSpec
    from anodize.runtime.device import Device
    from anodize.runtime.kernel_store import RuntimeKernel as Kernel

__all__ = ["prepare", "Launcher"]

def prepare(kernel: Kernel, config: LaunchConfig, safe: bool) -> Launcher:
    """The cached launcher for `kernel` under `config`; checks the contract once for a safe launch."""
    if not isinstance(config, LaunchConfig):  # (before the lookup: a list config is unhashable)
        raise LaunchError(
            f"kernel `{kernel.__name__}` must be launched with an az.LaunchConfig, got {config!r}",
            help="use `kernel[az.LaunchConfig.for_num_elems(n)](...)` or `az.LaunchConfig(grid, block)`",
        )
    launchers = kernel.store.launchers
    key = (config, safe)
    hit = launchers.get(key)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    check_limits(kernel.__name__, UNIVERSAL, "any CUDA device", config)
    contract: Contract | None = None
    if safe:
        if kernel.contract_spec is None:
            name = kernel.__name__
            raise LaunchError(
                f"kernel `{name}` has no launch contract, so `{name}[config](...)` cannot check the launch",
                help=f"add `@az.launch_contract(domain=..., block=...)` to `{name}`, or launch it with "
                f"`{name}.unsafe_launch(config, ...)` (its index witnesses then fail closed)",
            )
    # A kernel compiled with a contract has no device-side rank check (its witnesses trust
    # the contract), so even `unsafe_launch` must honour the contract's rank, block and
    # unused dimensions.  Checked here, once per config: never on the launch path.
    contract = kernel.contract
    if contract is not None:
        check_contract(kernel.__name__, contract, config)
    launcher = Launcher(kernel, config, safe, contract)
    if len(launchers) >= _LAUNCHERS_MAX:  # a loop over ever new sizes: forget, never grow without bound
        launchers.clear()
    launchers[key] = launcher
    return launcher


_LAUNCHERS_MAX = 256  # launchers (with their plans) remembered per kernel, by config


class Launcher:
    """A kernel bound to a launch config; call it with the kernel's arguments.

    A call takes the first of three paths that applies:

    1. the memo: the very arguments of the last launch, or of the one before (the same `Buffer`
       objects, alive, and the same scalar objects).  Buffers never change pointer, shape, dtype or device, so
       every check made for them still holds: relaunch the packed arguments as they are.
    2. the quick path of the last plan: every check, specialised to the plan's argument types
       (anodize Buffers and scalars), in one pass that builds the packed launch arguments.
       It only accepts; anything it does not accept goes to
    3. the full path: plan lookup by argument types, planning (compile, load, device checks),
       and validation that raises the located `ArgumentError` / `AliasingError` /
       `ContractViolation`.
    Paths 1 and 2 run only while no lazy op is in flight (`runtime.inflight`).
    """

    __slots__ = ("kernel", "config", "safe", "contract", "_plans", "_plans_by_device", "_loaded", "_hot", "_memo", "_memo2", "_misses", "_op_memo")

    def __init__(self, kernel: Kernel, config: LaunchConfig, safe: bool, contract: Contract | None):
        self.kernel = kernel
        self.config = config
        self.safe = safe
        self.contract = contract
        self._plans: dict[tuple[type, ...], _Plan] = {}
        self._plans_by_device: dict[tuple[int, tuple[type, ...]], _Plan] = {}
        self._loaded: dict[int, LoadedKernel] = {}
        self._hot: _Plan | None = None  # the plan of the last launch
        # `fire(args) -> bool`: relaunches the last launch's packed arguments when `args` are its
        # very objects (a weakref per Buffer, identity per scalar); None when there is no memo
        self._memo: Callable[[tuple[Any, ...]], bool] | None = None
        self._memo2: Callable[[tuple[Any, ...]], bool] | None = None
        self._misses = 0  # quick-path launches since a memo last hit
        self._op_memo: Any = None  # runtime/op_memo.py: the last two `op(...)`s, made on first use

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs:  # `k[cfg](a=x, c=z)`: bound by name, then the positional path validates
            args = self._bind(args, kwargs)
        memo = self._memo
        if memo is not None and not _inflight._ACTIVE:
            if memo(args):
                self._misses = 0
                return
            memo = self._memo2  # the launch before: ping-pong buffers hit here
            if memo is not None and memo(args):
                self._misses = 0
                return
        plan = self._hot
        if plan is not None and plan.quick is not None and not _inflight._ACTIVE:
            packed = plan.quick(args)
            if packed is not None:
                plan.arena.dirty = True
                plan.call(*packed)
                # Memoise, unless the memos keep missing (new buffers every launch): then only
                # every 16th launch, so that a loop that settles on fixed buffers is caught again.
                misses = self._misses = self._misses + 1
                if misses < 4 or not misses & 15:
                    self._memo2 = self._memo
                    self._memo = plan.memo(args, packed)
                return
        try:
            self._full(args)
        except USER_ERRORS as e:  # the public entry point: no anodize-internal frames below it
            __tracebackhide__ = True  # pytest and IPython hide this frame too
            raise e.with_traceback(None)

    def remember(self, args: tuple[Any, ...]) -> tuple[Callable[[tuple[Any, ...]], bool], Any, Callable[[], None]] | None:
        """`(memo, arena, again)` for a caller that matches `args` by identity itself
        (runtime/tune_launch.py): the memo of a launch of `args` is made by the quick path's
        checks and installed as this launcher's last (nothing is launched).  While `memo` is
        this launcher's `_memo` or `_memo2` and no lazy op is in flight, a launch of those very
        objects is `arena.dirty = True; again()`, what the memo itself would do.  None where
        the quick path does not take `args` or keeps no memo for them."""
        plan = self._hot
        if plan is None or plan.quick is None or _inflight._ACTIVE:
            return None
        packed = plan.quick(args)
        if packed is None:
            return None
        memo = plan.memo(args, packed)
        if memo is None:
            return None
        self._memo2, self._memo = self._memo, memo
        return memo, plan.arena, partial(plan.call, *packed)

    def _full(self, args: tuple[Any, ...]) -> None:
        types = tuple(map(type, args))
        plan = self._plans.get(types)
        if plan is None or not plan.run(args):
            plan = self._plan_for(types, args)
            self._plans[types] = plan
            if not plan.run(args):  # pragma: no cover - the plan was made for this device
                raise LaunchError("internal error: a launch plan rejected its own device")
        self._hot = plan
        self._memo = self._memo2 = None

    # (lazy ops, runtime/ops.py) validate exactly as a launch does, but
    # record the flat ABI arguments in a KernelOp instead of launching.
    def op(self, *args: Any, **kwargs: Any) -> Any:
        """A lazy launch: validated now, run later (`.run()`, `await`, `.submit(pool)`)."""
        if kwargs:
            args = self._bind(args, kwargs)
        else:
            memo = self._op_memo
            if memo is not None:  # (`_op`'s memo hit, inlined: a chain builds one op per step)
                hit = memo.op(self, args)
                if hit is not None:
                    return hit
        return self._op(args, True)

    def _op(self, args: tuple[Any, ...], remember: bool) -> Any:
        """`op(*args)` of positional arguments; `remember`: keep it in the op memo (False for
        `call_op`, whose freshly allocated outputs no later op can match)."""
        memo = self._op_memo
        if memo is not None:
            hit = memo.op(self, args)
            if hit is not None:  # the very arguments of a recent op: every check holds
                return hit
        else:
            memo = self._op_memo = OpMemo()
        types = tuple(map(type, args))
        record: list[Any] = []
        try:
            plan = self._plans.get(types)
            if plan is None or not plan.run(args, record):
                plan = self._plan_for(types, args)
                self._plans[types] = plan
                if not plan.run(args, record):  # pragma: no cover - the plan was made for this device
                    raise LaunchError("internal error: a launch plan rejected its own device")
            if plan.foreign:  # a lazy op launches its recorded anodize-ABI arguments (runtime/ops.py)
                raise LaunchError(
                    f"foreign kernel `{self.kernel.__name__}` launches now only: `.op(...)` is not available for it",
                    help="launch it with `k[config](...)`, ordered on the device's stream with the ops around it",
                )
        except USER_ERRORS as e:  # the public entry point: no anodize-internal frames below it
            __tracebackhide__ = True  # pytest and IPython hide this frame too
            raise e.with_traceback(None)
        op = KernelOp(self, plan, args, record[0])
        if remember:
            memo.put(args, op)
        return op

    # launchers that allocate the outputs the contract declares (runtime/outputs.py)
    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Launch with the inputs; the contract's `outputs=` allocates the outputs, returned
        (a tuple when several)."""
        try:
            return call(self, args, kwargs)
        except USER_ERRORS as e:
            __tracebackhide__ = True
            raise e.with_traceback(None)

    def call_op(self, *args: Any, **kwargs: Any) -> Any:
        """The lazy `call`: an op whose result is the allocated outputs; its arrays are guarded
        from now until it completes."""
        try:
            return call_op(self, args, kwargs)
        except USER_ERRORS as e:
            __tracebackhide__ = True
            raise e.with_traceback(None)

    @property
    def last_plan(self) -> _Plan | None:
        """The plan of this launcher's last launch (None before the first): its argument types'
        checks and its bound launch (`call`, the fault `arena`, `is_cpu`), what a wrapper that
        launches the same plan itself reads (anodize/torch.py's quick pass over CPU tensors)."""
        return self._hot

    def quick_packed(self, args: tuple[Any, ...]) -> tuple[_Plan, list[Any]] | None:
        """The last launch's plan and the packed arguments its quick path builds for `args` (every
        check run), or None where it has none or does not accept them: what a launch object
        wrapping this one memoises (anodize/bundle.py, runtime/bundle_memo.py)."""
        plan = self._hot
        if plan is None or plan.quick is None:
            return None
        packed = plan.quick(args)
        return None if packed is None else (plan, packed)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        return bind_keywords(self.kernel.__name__, tuple(self.kernel.signature.parameters), args, kwargs)

    def __repr__(self) -> str:
        kind = "launch" if self.safe else "unsafe launch"
        return f"<anodize {kind} of {self.kernel.__name__} with {self.config}>"

    # -- planning -------------------------------------------------------------------------
    def _plan_for(self, types: tuple[type, ...], args: tuple[Any, ...]) -> _Plan:
        dev = devmod.args_device(args)
        key = (id(dev), types)
        plan = self._plans_by_device.get(key)
        if plan is not None:
            return plan
        loaded = self._loaded.get(id(dev))
        if loaded is None:
            check_device(self.kernel.__name__, dev, self.config, self.contract)
            loaded = compile_for_device(self.kernel, dev)
            check_compiled(self.kernel.__name__, loaded, self.config)
            self._loaded[id(dev)] = loaded
        plan = _Plan(self, loaded, args)
        self._plans_by_device[key] = plan
        return plan


class _Plan:
    """Everything about a launch that depends only on the argument types and the device."""

    __slots__ = (
        "name", "device", "nargs", "steps", "alias_pairs", "params", "requires", "env", "req_slots",
        "flat_len", "entry", "handle", "cu_config", "fault", "rank", "rank_arg", "config", "arena", "is_cpu",
        "call", "prefix", "suffix", "quick", "memo", "hidden", "foreign", "grid_counter",
    )

    def __init__(self, launcher: Launcher, loaded: LoadedKernel, args: tuple[Any, ...]):
        kernel = launcher.kernel
        name = self.name = kernel.__name__
        compiled = loaded.compiled
        dev = self.device = loaded.device
        params = self.params = compiled.params
        if len(args) != len(params):
            raise argument_count_error(name, tuple(p.name for p in params), len(args))
        self.nargs = len(params)
        steps: list[tuple[int, Any, Any, int]] = []
        for p, a in zip(params, args, strict=True):
            if not p.is_slice:
                steps.append((_SCALAR, p, A.scalar_converter(name, p, a), 0))
                continue
            steps.append(_slice_step(name, p, a, dev))
        self.steps = tuple(steps)
        slices = [i for i, p in enumerate(params) if p.is_slice]
        # Every output against every other slice, each unordered pair once.
        self.alias_pairs = tuple(
            (o, j)
            for o in slices
            if params[o].is_output
            for j in slices
            if j != o and (j > o or not params[j].is_output)
        )
        # `requires`: which parameter fills which slot of the evaluator's environment.
        # `requires` holds for unsafe launches of contracted kernels too: codegen removed
        # bounds checks on its strength, so skipping it could read out of bounds unreported.
        contract = launcher.contract
        cfg0 = launcher.config
        threads = cfg0.block[0] * cfg0.block[1] * cfg0.block[2]
        # `shared_mem >= <bytes>` joins `requires` for this config: checked on the same paths
        req = launch_requires(contract, cfg0.shared_mem, threads) if contract is not None else None
        self.requires = req
        self.env = Env({}, {}, {})
        slots: list[tuple[int, str, int]] = []  # (param index, name in `requires`, 0 len/shape | 1 scalar)
        if req is not None:
            index = {p.name: i for i, p in enumerate(params)}
            for pos, rname in enumerate(req.params):
                i = index.get(rname, pos if pos < len(params) else -1)
                if i < 0 or rname not in req.names():
                    continue
                slots.append((i, rname, 0 if params[i].is_slice else 1))
        self.req_slots = tuple(slots)
        self.config = cfg = launcher.config
        self.rank = cfg.rank
        self.rank_arg = np.int32(cfg.rank)
        self.fault = loaded.fault_address
        self.arena = dev.faults
        self.is_cpu = dev.kind in ("cpu", "debug")  # the debug device: the same call, interpreted
        self.entry = compiled.cpu_entry
        self.handle = loaded.handle
        # A coarsened kernel (codegen/llvm/coarsen.py) runs ceil(grid_x / 4) blocks along x, each thread
        # taking 4 of the user's indices, and learns the user's extent from one more hidden argument.
        foreign = self.foreign = compiled.abi == "foreign"  # a foreign kernel (anodize/foreign.py): bare pointers, nothing hidden
        self.hidden: tuple[Any, ...] = () if foreign else (self.fault, self.rank_arg)
        if compiled.coarsen > 1:
            self.hidden += (np.int64(cfg.grid[0] * cfg.block[0]),)
        self.cu_config = (
            None if self.is_cpu else dev.launch_config(launch_grid(compiled, cfg.grid), cfg.block,  # type: ignore[attr-defined]
                                                       max(cfg.shared_mem, compiled.dynamic_shared_bytes),
                                                       *((True, loaded.handle) if contract is not None and contract.cooperative else ()))
        )
        # The launch itself: `call(*prefix, *flat, *suffix)`, one call with everything bound.
        self.call, self.prefix, self.suffix = _launch_call(self)
        if foreign:
            self.call = _foreign_call(self.call, len(self.prefix), params)
        # `az.grid.sync()` on a GPU: each launch its own zeroed counter, on the device's stream
        self.grid_counter = compiled.grid_counter and not self.is_cpu
        if self.grid_counter:
            self.call = counted_call(self.call, dev._cu_stream)  # type: ignore[attr-defined]
        self.quick, self.memo = _quick_path(self, args)

        mark_used(dev)

    def run(self, args: tuple[Any, ...], record: list[Any] | None = None) -> bool:
        """Validate and launch; False when the arguments live on another device (re-plan).

        With `record` (`Launcher.op`): validate, append the flat arguments, launch nothing."""
        dev = self.device
        n = self.nargs
        if len(args) != n:
            return False
        flat: list[Any] = []
        lo = [0] * n
        hi = [0] * n
        shapes: list[Any] = [None] * n
        values: list[Any] = [None] * n
        i = 0
        for (mode, p, how, rank), a in zip(self.steps, args):
            if mode == _SCALAR:
                v = how(a)
                values[i] = v
                flat.append(v)
                i += 1
                continue
            if mode == _BUF:
                if a._device is not dev:
                    if not _first_array(self.steps, i):
                        return False  # the anchor moved to another device: plan again
                    raise _device_error(self.name, p, a, dev)
                shape = a._shape
                if (a._dtype is not how and a._dtype != how) or len(shape) != rank:
                    A._expect(self.name, p, a._dtype, shape, a._scalar.name)
                ptr = a._ptr
                nbytes = a._nbytes
            else:
                ptr, shape, nbytes = how(a)
            # ABI: ptr, then i64 len (or rows, cols; or layers, rows, cols); a Python int travels as a 64-bit value
            flat.append(ptr)
            flat.append(shape[0])
            if rank >= 2:
                flat.extend(shape[1:])
            shapes[i] = shape
            if nbytes:
                lo[i] = ptr
                hi[i] = ptr + nbytes
            i += 1
        for o, j in self.alias_pairs:
            if lo[o] < hi[j] and lo[j] < hi[o]:
                raise _alias_error(self.name, self.params, o, j, args)
        if self.requires is not None:
            self._check_requires(shapes, values)
        if record is not None:  # a lazy op records instead of launching
            record.append(flat)
            return True
        if _inflight._ACTIVE:  # ownership across time: wait for in-flight work on shared memory
            self._order_after_inflight(args, lo, hi)
        self.arena.dirty = True
        self.call(*self.prefix, *flat, *self.suffix)
        return True

    def _order_after_inflight(self, args: tuple[Any, ...], lo: list[int], hi: list[int]) -> None:
        dev_space = id(self.device)
        uses = tuple(
            _inflight.Use(
                0 if isinstance(a, np.ndarray) else dev_space,
                lo[k],
                hi[k],
                self.params[k].is_output,
                f"`{self.params[k].name}` of kernel `{self.name}`",
                a,
            )
            for k, a in enumerate(args)
            if hi[k] > lo[k]
        )
        _streams.order_launch(self.device, uses)

    def _check_requires(self, shapes: list[Any], values: list[Any]) -> None:
        env = self.env
        lengths, shp, scalars = env.lengths, env.shapes, env.scalars
        for i, rname, kind in self.req_slots:
            if kind == 0:
                s = shapes[i]
                lengths[rname] = s[0]  # type: ignore[index]
                shp[rname] = s  # type: ignore[index]
            else:
                scalars[rname] = int(values[i])  # type: ignore[index]
        req = self.requires
        assert req is not None
        try:
            bad = first_violation(req, env)
        except (RequiresOverflow, ZeroDivisionError) as e:
            raise _requires_error(self.name, req, env, e) from None
        if bad is not None:
            rel, left, right = bad
            raise ContractViolation(
                f"`{rel.source}` violated: left side {left}, right side {right}",
                help=f"kernel `{self.name}`'s launch contract requires `{req.source}`",
            )


def _first_array(steps: tuple[tuple[int, Any, Any, int], ...], i: int) -> bool:
    """True when an earlier argument is an array (so a device mismatch at `i` is the caller's error)."""
    return any(s[0] != _SCALAR for s in steps[:i])


def _slice_step(name: str, p: ParamSpec, a: object, dev: Device) -> tuple[int, Any, Any, int]:
    if isinstance(a, Buffer):
        if not a.is_contiguous:  # a StridedView: its own type, so it always plans (and fails) here
            raise A.non_contiguous_view(name, p, a)
        return (_BUF, p, p.scalar.dtype, p.rank)
    if isinstance(a, np.ndarray):
        if dev.kind not in ("cpu", "debug"):
            raise A.arg_error(
                name, p, f"is a NumPy array in host memory, but the launch runs on {dev.describe()}",
                help="copy it to the device first: `dev.to_device(x)`",
            )
        return (_NUMPY, p, A.numpy_adapter(name, p), p.rank)
    if dev.kind == "cuda" and hasattr(a, "__cuda_array_interface__"):
        return (_OTHER, p, A.cai_adapter(name, p, dev), p.rank)
    if dev.kind == "cuda" and hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
        return (_OTHER, p, A.dlpack_adapter(name, p, dev), p.rank)
    if dev.kind == "cpu" and hasattr(a, "__dlpack__"):
        raise A.arg_error(
            name, p, f"expects {A.describe_param(p)} on the CPU backend, got {A.describe_value(a)}",
            help="on the CPU backend pass an anodize Buffer or a NumPy array (`np.from_dlpack(x)`)",
        )
    raise A.arg_error(
        name, p, f"expects {A.describe_param(p)}, got {A.describe_value(a)}",
        help="pass an anodize Buffer (`dev.to_device(x)`), or a CUDA array (CuPy, PyTorch) on a GPU",
    )


def _device_error(name: str, p: ParamSpec, a: Buffer, dev: Device) -> ArgumentError:
    return A.arg_error(
        name, p, f"lives on {a.device.describe()}, but the launch runs on {dev.describe()} "
        "(the device of the first array argument)",
        help=f"put every array argument on one device: `{p.name}.copy_to(dev)` copies a Buffer to `dev`",
    )


def _alias_error(name: str, params: tuple[ParamSpec, ...], o: int, j: int, args: tuple[Any, ...]) -> AliasingError:
    out, other = params[o], params[j]
    same = args[o] is args[j]
    what = "is the same buffer as" if same else "overlaps the memory of"
    role = "another output" if other.is_output else "an input"
    return AliasingError(
        f"kernel `{name}`: output `{out.name}` ({A.describe_param(out)}) {what} `{other.name}` "
        f"({A.describe_param(other)}, {role})",
        help=A.alias_help(out, other),
    )


def _requires_error(name: str, req: Any, env: Env, e: Exception) -> ContractViolation:
    culprit = req.source
    for rel in req.relations:
        try:
            eval_expr(rel.left, env)
            eval_expr(rel.right, env)
        except (RequiresOverflow, ZeroDivisionError):
            culprit = rel.source
            break
    what = "overflows 64-bit integers" if isinstance(e, RequiresOverflow) else "divides by zero"
    return ContractViolation(
        f"`{culprit}` cannot be checked: it {what} for these arguments",
        help=f"kernel `{name}`'s launch contract requires `{req.source}`; pass smaller sizes or scalars",
    )

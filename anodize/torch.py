"""`az.torch`: anodize kernels as PyTorch custom ops (`torch.library`), so `torch.compile` traces
a model that calls them without a graph break, and autograd runs a backward you give.

    import anodize as az

    vecadd_op = az.torch.custom_op(
        vecadd, name="mylib::vecadd",
        outputs=lambda a, b: {"c": (a.shape, az.f32)},          # what the op allocates and returns
        config=lambda a, b: az.LaunchConfig.for_num_elems(a.numel(), block=256),
    )
    c = vecadd_op(a, b)                                          # a, b: torch tensors

The op is an `OpOverloadPacket` like `torch.ops.ns.op`, whose eager call on plain tensors skips
PyTorch's dispatcher when nothing needs it (no autograd, mode, subclass, transform, tracing or
profiler; `_eager_class`).  The op's inputs are the kernel's parameters that `outputs` does not name, in order (tensors,
or Python numbers for scalar parameters); it returns the outputs in parameter order (one
tensor, or a tuple).  Its fake implementation (what `torch.compile` and meta tensors run)
allocates the outputs from the same `outputs` function, so shapes may be symbolic.  The
launch is the kernel's ordinary checked launch: CUDA tensors pass zero-copy (their
`__cuda_array_interface__`) ordered after the work PyTorch queued on its current stream,
and the outputs are ordered before what PyTorch queues next; CPU tensors pass zero-copy to
the CPU backend (NumPy views on a config's first call, then their data pointers).  Faults surface at the next synchronisation anodize
sees (`dev.check()`, a `to_host`), on the CPU backend too (the op's
launch records them in the device's fault arena, as a plain launch does).

`backward(ctx, *grads)` (optional) gives autograd: `ctx.inputs` and `ctx.outputs` hold the
forward's inputs and outputs; return one gradient per input (None for a scalar or an input
without one).  It usually calls other anodize ops.

PyTorch is an optional dependency: `pip install torch` (this module imports it on first use).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anodize.language.diagnostics import CheckError
from anodize.language.errors import ArgumentError, LaunchError
from anodize.language.front import kernel_of
from anodize.language.vocab import SCALARS
from anodize.runtime import inflight as _inflight, lazy
from anodize.runtime.device import cuda_device
from anodize.runtime.launch_fast import host_tensors_quick

__all__ = ["custom_op"]

_TORCH_SCALAR = {"f": "float", "i": "int", "u": "int", "b": "bool"}
_LIBS: dict[str, Any] = {}  # namespace -> torch.library.Library (kept alive: dropping it unregisters)
_IMPLS: dict[str, Any] = {}  # "ns::op" -> its `_Impls` (bench/ship_bench.py `custom-op --trace` times their parts)


def _torch() -> Any:
    try:
        torch = lazy.torch()
    except ImportError:
        raise LaunchError("az.torch needs PyTorch", help="`pip install torch`") from None
    return torch


def _torch_dtype(torch: Any, scalar: Any) -> Any:
    info = SCALARS[scalar if isinstance(scalar, str) else scalar.__name__]
    return getattr(torch, "bool" if info.name == "bool_" else info.numpy_name)


def custom_op(
    kernel: Any,
    name: str,
    outputs: Callable[..., dict[str, tuple[Any, Any]]],
    config: Callable[..., Any],
    backward: Callable[..., Any] | None = None,
) -> Any:
    """Register `kernel`'s launch as the `torch.library` custom op `name` ("ns::op"); returns
    the op: an `OpOverloadPacket` like `torch.ops.ns.op`, whose eager calls on plain tensors skip
    the dispatcher (see the module's docstring)."""
    torch = _torch()

    ns, sep, opname = name.partition("::")
    if not sep or not ns.isidentifier() or not opname.isidentifier():
        raise ArgumentError(f"custom op name `{name}` must be `namespace::op`", help='e.g. `name="mylib::vecadd"`')
    params = _kernel_params(kernel)
    probe = outputs.__code__.co_varnames[: outputs.__code__.co_argcount]
    inputs = [p for p in params if p.name in probe or not p.is_output]
    out_names = [p.name for p in params if p not in inputs]
    if not out_names:
        raise ArgumentError(f"kernel `{kernel.__name__}` has no output parameter left for the op to return",
                            help="`outputs` names the outputs the op allocates: `outputs=lambda a: {\"c\": (a.shape, az.f32)}`")
    schema_in = ", ".join(f"{'Tensor' if p.is_slice else _TORCH_SCALAR[p.scalar.kind]} {p.name}" for p in inputs)
    schema_out = "Tensor" if len(out_names) == 1 else "(" + ", ".join("Tensor" for _ in out_names) + ")"
    lib = _LIBS.get(ns)
    if lib is None:
        lib = _LIBS[ns] = torch.library.Library(ns, "FRAGMENT")
    lib.define(f"{opname}({schema_in}) -> {schema_out}")
    impls = _IMPLS[name] = _Impls(torch, kernel, name, params, inputs, out_names, outputs, config)
    lib.impl(opname, impls.cpu, "CPU")
    lib.impl(opname, impls.cuda, "CUDA")
    torch.library.register_fake(name, impls.fake, lib=lib)
    if backward is not None:
        _register_backward(torch, name, backward, len(inputs))
    packet = getattr(getattr(torch.ops, ns), opname)
    try:
        eager = _eager_class(torch)
    except AttributeError:  # a PyTorch without one of the state queries the eager call reads
        return packet
    own = type(eager.__name__, (eager,), {"__call__": eager._own_call(len(inputs), impls.eager_cuda), "__module__": eager.__module__})
    return own(packet, impls, inputs)


_EAGER: list[Any] = []  # the class below, made once PyTorch is loaded


def _eager_class(torch: Any) -> Any:
    """`EagerOp`: the op's `OpOverloadPacket` (what `torch.ops.ns.op` is, and what opcheck,
    `torch.compile` and `.default` see), whose eager call on plain tensors skips PyTorch's
    dispatcher (a Python-implemented op: about 2.5 us of CPU around an op that does nothing) and
    calls the implementation the dispatcher would pick.  Anything that needs the dispatcher takes
    it: keyword arguments, a tensor subclass (fake, functional, a parameter), a torch function or
    dispatch mode, autograd (grad enabled and an input that requires grad), a functorch transform,
    JIT tracing, the profiler, mixed or other devices, a scalar not of its schema's Python type.
    A call on CUDA tensors first tries `_Impls.eager_cuda`, whose quick pass checks per tensor
    what the loop below would (exactly `torch.Tensor`, on this GPU, no `requires_grad`) and more;
    only what it refuses pays for the loop."""
    if _EAGER:
        return _EAGER[0]
    C, Tensor, grad_enabled = torch._C, torch.Tensor, torch.is_grad_enabled
    modes, dispatch_modes, tracing = C._is_torch_function_mode_enabled, C._len_torch_dispatch_stack, C._get_tracing_state
    transforms, profiling = C._functorch.peek_interpreter_stack, C._autograd._profiler_enabled

    class EagerOp(torch._ops.OpOverloadPacket):  # type: ignore[misc]
        def __init__(self, packet: Any, impls: _Impls, inputs: list[Any]) -> None:
            self._az_packet = packet
            super().__init__(packet._qualified_op_name, packet.__name__, packet._op, packet._overload_names)
            # per input: None for a tensor, else the Python type its schema converts to
            self._az_kinds = tuple(None if p.is_slice else _PY_SCALAR[p.scalar.kind] for p in inputs)
            self._az_cpu, self._az_cuda, self._az_quick = impls.cpu, impls.cuda, impls.eager_cuda

        def __getattr__(self, key: str) -> Any:  # `.default` and the rest: torch.ops.ns.op's own objects
            if key.startswith("_az_"):
                raise AttributeError(key)
            return getattr(self._az_packet, key)

        def __call__(self, /, *args: Any, **kwargs: Any) -> Any:  # (each op's own class has a quicker one: `_own_call`)
            if kwargs or len(args) != len(self._az_kinds) or modes() or dispatch_modes() or tracing() is not None \
                    or transforms() is not None or profiling():
                return self._op(*args, **kwargs)
            got = self._az_quick(args)  # CUDA tensors the launcher's quick pass takes: launched
            return got if got is not None else self._az_route(args)

        def _az_route(self, args: tuple[Any, ...]) -> Any:
            """The implementation for `args` when they are plain tensors on one device (no
            autograd to record) and scalars of their schema's types, else the dispatcher."""
            grad = grad_enabled()
            where = 0  # 1: every tensor on a CUDA GPU, 2: every tensor on the CPU
            for want, a in zip(self._az_kinds, args):
                if want is None:
                    if type(a) is not Tensor or (grad and a.requires_grad):
                        return self._op(*args)
                    here = 1 if a.is_cuda else 2 if a.is_cpu else 3
                    if here != where:
                        if where or here == 3:
                            return self._op(*args)
                        where = here
                elif type(a) is not want:
                    return self._op(*args)
            if where == 1:
                return self._az_cuda(*args)
            if where == 2:
                return self._az_cpu(*args)
            return self._op(*args)

        @classmethod
        def _own_call(cls, n: int, quick: Callable[[tuple[Any, ...]], Any]) -> Callable[..., Any]:
            """`__call__` for one op's own subclass: `EagerOp.__call__` with the op's input count
            and `eager_cuda` in the closure (one call and two attribute reads less a call)."""

            def __call__(self: Any, /, *args: Any, **kwargs: Any) -> Any:
                if kwargs or len(args) != n or modes() or dispatch_modes() or tracing() is not None \
                        or transforms() is not None or profiling():
                    return self._op(*args, **kwargs)
                got = quick(args)
                return got if got is not None else self._az_route(args)

            return __call__

    _EAGER.append(EagerOp)
    return EagerOp


_PY_SCALAR = {"f": float, "i": int, "u": int, "b": bool}


class _Impls:
    """The op's implementations, with everything that does not depend on the call's values
    worked out at registration: where the outputs go among the kernel's arguments, their
    torch dtypes, the result's shape.  A call runs the user's `outputs` and `config`, one
    `new_empty` of the anchor input per output and the launch.  An eager call on CUDA tensors
    first tries `eager_cuda` (made by `_eager_cuda`).  On the CPU backend the launch, after its first
    (full, planning) pass over NumPy views, is the plan's quick pass over the tensors
    themselves (runtime/quick_tensors.py `host_tensor_quick`), kept per launcher."""

    def __init__(self, torch: Any, kernel: Any, name: str, params: tuple[Any, ...], inputs: list[Any],
                 out_names: list[str], outputs: Callable[..., Any], config: Callable[..., Any]) -> None:
        self.torch, self.kernel, self.name = torch, kernel, name
        self.outputs, self.config = outputs, config
        self.out_names = tuple(out_names)
        # positions of the outputs among the kernel's parameters, ascending: `full.insert` in turn
        self.out_at = tuple(i for i, p in enumerate(params) if p.name in out_names)
        self.slices = tuple(i for i, p in enumerate(params) if p.is_slice)  # (in the full argument list)
        self.anchor = next((i for i, p in enumerate(inputs) if p.is_slice), -1)  # the input giving the device
        self.single = len(out_names) == 1
        self.dtypes: dict[Any, Any] = {}  # the `outputs` dtype (az.f32 or "f32") -> torch dtype
        self.quick: dict[Any, tuple[Any, Any]] = {}  # launcher -> (quick pass over CPU tensors, its plan)
        self.raw: Any = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # the current stream's handle, by index
        # every output after every input (the usual kernel): the full argument list is args + outputs
        self.trailing = self.out_at == tuple(range(len(params) - len(out_names), len(params)))
        # the scalar inputs and the Python type their schema converts to (the eager quick call
        # takes exactly that type; anything else goes through the dispatcher, which converts)
        self.scalar_at = tuple((i, _PY_SCALAR[p.scalar.kind]) for i, p in enumerate(inputs) if not p.is_slice)
        self.tensor = torch.Tensor
        self.sizes = (torch.Size, tuple)
        self.eager_cuda = self._eager_cuda()

    def allocate(self, args: tuple[Any, ...], spread: bool = False) -> list[Any]:
        """The outputs, in parameter order, from the user's `outputs`, on the anchor input's
        device.  `spread` (the real implementations, whose inputs are real tensors): each output
        is the anchor's `new_empty` (its device, and its dtype unless the output's differs: no
        device or dtype keyword for PyTorch to parse: 1.1 us of CPU against 1.6 for `torch.empty`
        with both), a non-empty shape tuple given as separate sizes, which PyTorch parses in
        about half the time of a `torch.Size`."""
        like = args[self.anchor] if self.anchor >= 0 else None
        if spread and like is not None:
            return self._new_empty(self.outputs(*args), like)
        spec = self.outputs(*args)
        dev = like.device if like is not None else None
        return [self.torch.empty(shape, dtype=tdt, device=dev) for shape, tdt in self._shapes(spec)]

    def _new_empty(self, spec: Any, like: Any) -> list[Any]:
        if self.single and type(spec) is dict:  # the usual op: one output, shaped and typed like its anchor
            got = spec.get(self.out_names[0])
            if type(got) is tuple and len(got) == 2:
                shape, dt = got
                if shape and type(shape) in self.sizes and self.dtypes.get(dt) is like.dtype:
                    return [like.new_empty(*shape)]
        made = []
        for shape, tdt in self._shapes(spec):
            sizes = shape if isinstance(shape, tuple) and shape else (shape,)
            made.append(like.new_empty(*sizes) if tdt is like.dtype else like.new_empty(*sizes, dtype=tdt))
        return made

    def _shapes(self, spec: Any) -> list[tuple[Any, Any]]:
        """(shape, torch dtype) of each output, in parameter order, from `outputs`' dict."""
        got = []
        for n in self.out_names:
            try:
                shape, dt = spec[n]
            except KeyError:
                missing = [m for m in self.out_names if m not in spec]
                raise ArgumentError(f"custom op `{self.name}`: `outputs` gives no shape and dtype for {', '.join(missing)}") from None
            tdt = self.dtypes.get(dt)
            if tdt is None:
                tdt = self.dtypes[dt] = _torch_dtype(self.torch, dt)
            got.append((shape, tdt))
        return got

    def result(self, outs: list[Any]) -> Any:
        return outs[0] if self.single else tuple(outs)

    def fake(self, *args: Any) -> Any:
        return self.result(self.allocate(args))

    def _full(self, args: tuple[Any, ...], outs: list[Any]) -> list[Any]:
        if self.trailing:
            return [*args, *outs]
        full = list(args)
        for at, o in zip(self.out_at, outs):
            full.insert(at, o)
        return full

    def cpu(self, *args: Any) -> Any:
        outs = self.allocate(args, True)
        full = self._full(args, outs)
        launcher = self.kernel[self.config(*args)]
        hit = self.quick.get(launcher)
        if hit is not None and hit[0] is not None and not _inflight._ACTIVE:
            packed = hit[0](full)
            if packed is not None:
                plan = hit[1]
                plan.arena.dirty = True
                plan.call(*packed)  # a fault is recorded in the device's arena, as by the full path
                return self.result(outs)
        launcher(*[_as_array(self.torch, a) for a in full])  # plans; raises the located errors
        if hit is None:
            self._remember(launcher, full)
        return self.result(outs)

    def _remember(self, launcher: Any, full: list[Any]) -> None:
        plan = getattr(launcher, "last_plan", None)  # the plan the full path just ran (a `Launcher`'s)
        quick = None
        if plan is not None and plan.is_cpu:
            quick = host_tensors_quick(plan, tuple(full))
        if len(self.quick) >= 64:  # configs that change every call: forget, never grow
            self.quick.clear()
        self.quick[launcher] = (quick, plan)

    def cuda(self, *args: Any) -> Any:
        outs = self.allocate(args, True)
        full = self._full(args, outs)
        launcher = self.kernel[self.config(*args)]
        if self.raw is not None and not _inflight._ACTIVE and _launch_quick(launcher, full, self.raw):
            return self.result(outs)
        _launch(self.torch, launcher, full, self.slices, self.raw)
        return self.result(outs)

    def _eager_cuda(self) -> Callable[[tuple[Any, ...]], Any]:
        """`eager_cuda(args)`: the op's eager call on CUDA tensors without the dispatcher
        (`EagerOp`): the result when the launcher's quick pass took the call and launched it,
        else None (nothing launched; the caller goes on as before this call).  Only for an
        anchor input of exactly `torch.Tensor` on a GPU and scalars of their schema's type; the
        quick pass refuses a tensor that is a subclass, on the CPU or another GPU, not
        contiguous, of another dtype or `requires_grad` (autograd's business), so what it takes
        needs no dispatcher.  Made once per op: every call's reads are the closure's locals."""
        at, raw, tensor, scalar_at = self.anchor, self.raw, self.tensor, self.scalar_at
        outputs, config, kernel, dtypes, sizes = self.outputs, self.config, self.kernel, self.dtypes, self.sizes
        one = self.out_names[0] if self.single and self.trailing else None  # the one output, last
        inflight, launch_quick = _inflight, _launch_quick

        def nothing(args: tuple[Any, ...]) -> Any:
            return None

        def eager(args: tuple[Any, ...]) -> Any:
            if inflight._ACTIVE:
                return None
            like = args[at]
            if type(like) is not tensor or not like.is_cuda:
                return None
            if scalar_at:
                for i, want in scalar_at:
                    if type(args[i]) is not want:
                        return None
            spec = outputs(*args)
            if one is not None:  # the usual op: one output, after the inputs
                try:
                    shape, dt = spec[one]
                    tdt = dtypes[dt]
                except Exception:  # noqa: BLE001 - the regular path (the `_Impls.cuda` below) reports it
                    return None
                if type(shape) not in sizes or not shape:
                    return None
                out = like.new_empty(*shape) if tdt is like.dtype else like.new_empty(*shape, dtype=tdt)
                full: Any = (*args, out)
            else:
                outs = self._new_empty(spec, like)
                full = self._full(args, outs)
            if not launch_quick(kernel[config(*args)], full, raw):
                return None
            return out if one is not None else self.result(outs)

        return nothing if at < 0 or raw is None else eager


def _launch_quick(launcher: Any, full: Any, raw: Any) -> bool:
    """Launch through the plan of `launcher`'s last launch (runtime/launch.py `Launcher.last_plan`)
    on PyTorch's current stream (`raw(index)`: its handle); False, launching nothing, when there is
    none or its quick pass refuses `full`: it checks what `_launch` converts (contiguity,
    requires_grad) and every launch check."""
    plan = getattr(launcher, "last_plan", None)  # (a generic kernel's launch object has none)
    if plan is None or plan.quick is None:
        return False
    packed = plan.quick(full)
    if packed is None:
        return False
    dev = plan.device
    stream = raw(dev.index)
    if stream:  # not the legacy default stream: ordered after and before it
        dev.wait_for_stream(stream)
    plan.arena.dirty = True
    plan.call(*packed)
    if stream:
        dev.make_stream_wait(stream)
    return True


def _kernel_params(kernel: Any) -> tuple[Any, ...]:
    """The kernel's parameters (name, role, type) without compiling it: a built or foreign
    kernel has them; a source kernel's are read by the front end."""
    params = getattr(kernel, "params", None)
    if params is not None:
        return tuple(params)
    if kernel.generic is not None:
        raise ArgumentError(f"kernel `{kernel.__name__}` is generic: register one specialisation of it",
                            help=f"`az.torch.custom_op({kernel.__name__}.specialize(T=\"f32\"), ...)`")
    front, fdef = kernel_of(kernel.fn)
    typed = front.typed(fdef, kernel.spec or ())
    if typed.ir is None:
        raise CheckError(list(typed.diagnostics), {front.path: front.source})
    return tuple(typed.ir.params)


def _launch(torch: Any, launch: Any, args: list[Any], slices: tuple[int, ...], raw: Any) -> None:
    """`launch(*args)` on CUDA tensors, ordered on PyTorch's current stream (`raw(index)`: its
    handle without a Stream object, None where this PyTorch lacks the call)."""
    cuda = None
    for i in slices:
        a = args[i]
        if a.requires_grad:  # (the CUDA array interface refuses such a tensor)
            a = args[i] = a.detach()
        if not a.is_contiguous():
            a = args[i] = a.contiguous()
        if cuda is None and a.is_cuda:
            cuda = a
    if cuda is None:  # no CUDA tensor after all: the launch's full path says what is wrong
        launch(*[_as_array(torch, a) for a in args])
        return
    index = cuda.get_device()
    stream = raw(index) if raw is not None else torch.cuda.current_stream(cuda.device).cuda_stream
    if stream:  # not the legacy default stream (anodize's blocking stream is ordered with that one)
        dev = cuda_device(index)
        dev.wait_for_stream(stream)  # type: ignore[attr-defined]
        launch(*args)
        dev.make_stream_wait(stream)
    else:
        launch(*args)


def _as_array(torch: Any, a: Any) -> Any:
    if not isinstance(a, torch.Tensor):
        return a
    if a.requires_grad:
        a = a.detach()
    if not a.is_contiguous():
        a = a.contiguous()
    return a if a.is_cuda else a.numpy()


def _register_backward(torch: Any, name: str, backward: Callable[..., Any], n_inputs: int) -> None:
    class _Ctx:
        inputs: tuple[Any, ...] = ()
        outputs: tuple[Any, ...] = ()

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.az_inputs = inputs
        ctx.az_outputs = output if isinstance(output, tuple) else (output,)

    def bwd(ctx: Any, *grads: Any) -> Any:
        view = _Ctx()
        view.inputs, view.outputs = ctx.az_inputs, ctx.az_outputs
        got = backward(view, *grads)
        got = got if isinstance(got, tuple) else (got,)
        if len(got) != n_inputs:
            raise ArgumentError(f"the backward of `{name}` returned {len(got)} gradients for {n_inputs} inputs")
        return got

    torch.library.register_autograd(name, bwd, setup_context=setup_context)

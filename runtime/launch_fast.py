"""The repeated launch's fast paths (runtime/launch.py): the bound launch call of a plan
(`_launch_call`), its quick path (every check specialised to the plan's types, the packed
arguments built in one pass; `_quick_path`, `_quick_1d_buffers`) and the memo of the last
launches (`_memo_maker`, `_memo_for`: the same live objects relaunch the packed arguments)."""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any
from weakref import ref as _ref

from anodize.runtime.buffer import Buffer
from anodize.runtime.quick_tensors import host_tensor_quick, tensor_quick
from anodize.runtime.requires_fast import compile_requires

if TYPE_CHECKING:
    from anodize.runtime.launch import _Plan

# how a plan passes each argument (the first field of its steps)
_BUF, _NUMPY, _OTHER, _SCALAR = 0, 1, 2, 3


def _launch_call(plan: _Plan) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
    """(call, prefix, suffix): the launch is `call(*prefix, *flat, *suffix)`."""
    dev = plan.device
    if plan.is_cpu:
        entry = plan.entry
        cfg = plan.config
        grid, block, shared, fault, rank = cfg.grid, cfg.block, cfg.shared_mem, plan.fault, plan.rank

        def run_on_cpu(*flat: Any) -> None:
            entry(grid, block, flat, fault, rank, shared)  # type: ignore[misc]

        return run_on_cpu, (), ()
    suffix = plan.hidden
    bound = getattr(dev, "launch_call", None)
    if bound is not None:  # CudaDevice: cuda.core's `launch` with stream, config and kernel bound
        call, prefix = bound(plan.handle, plan.cu_config)
        return call, tuple(prefix), suffix
    launch, handle, cu_config = dev.launch, plan.handle, plan.cu_config  # type: ignore[attr-defined]

    def run_on_device(*flat: Any) -> None:
        launch(handle, cu_config, flat)

    return run_on_device, (), suffix


def host_tensors_quick(plan: _Plan, sample: tuple[Any, ...]) -> Any:
    """`quick(args) -> packed | None` taking PyTorch CPU tensors where the CPU-backend `plan`
    took their NumPy views (runtime/quick_tensors.py `host_tensor_quick`), or None where
    `sample` is not such a launch."""
    return host_tensor_quick(plan, sample, (_BUF, _SCALAR, _NUMPY))


def _foreign_call(call: Any, nprefix: int, params: tuple[Any, ...]) -> Any:
    """`call` for a foreign kernel (anodize/foreign.py): the packed arguments keep each slice's
    extents (the checks read them there), the kernel takes only its pointer."""
    keep = list(range(nprefix))
    at = nprefix
    for p in params:
        keep.append(at)
        at += 1 + p.rank
    if len(keep) == 1:
        only = keep[0]
        return lambda *packed: call(packed[only])
    pick = itemgetter(*keep)

    def launch_foreign(*packed: Any) -> None:
        call(*pick(packed))

    return launch_foreign


def _quick_path(plan: _Plan, sample: tuple[Any, ...]) -> tuple[Any, Any]:
    """(quick, memo) for a plan whose arrays are all anodize Buffers, else (None, None).

    `quick(args)` runs every check of `_Plan.run` for this plan's argument types (kind,
    dtype, rank, device, scalar range, aliasing, `requires`) and returns the packed
    launch arguments, or None for anything it does not accept (a wrong type, a failed
    check, another device): the full path then raises the error or plans again.
    `memo(args, packed)` makes the Launcher's memo of an accepted launch."""
    if any(mode not in (_BUF, _SCALAR) for mode, _, _, _ in plan.steps):
        return tensor_quick(plan, sample, (_BUF, _SCALAR, _OTHER))
    dev = plan.device
    off = len(plan.prefix)
    # one entry per parameter: (is_buffer, expected type or dtype, rank, converter)
    specs: list[tuple[bool, Any, int, Any]] = []
    slices: dict[str, tuple[int, int]] = {}
    scalars: dict[str, int] = {}
    where: list[int] = []  # packed index of each parameter's first value
    at = off
    for (mode, p, how, rank), a in zip(plan.steps, sample):
        where.append(at)
        if mode == _BUF:
            specs.append((True, how, rank, None))
            at += 1 + rank
        else:
            specs.append((False, type(a), 0, how))
            at += 1
    spec = tuple(specs)
    # `requires` names its parameters by name (or by position), as `_check_requires` maps them
    check = None
    if plan.requires is not None:
        for i, rname, kind in plan.req_slots:
            if kind == 0:
                slices[rname] = (where[i] + 1, plan.params[i].rank)
            else:
                scalars[rname] = where[i]
        check = compile_requires(plan.requires, slices, scalars)
        if check is None:  # a leaf the fast compiler does not take: full path every launch
            return None, None
    pairs = plan.alias_pairs
    prefix, suffix = plan.prefix, plan.suffix
    nargs = plan.nargs
    buffer_type = Buffer

    if all(is_buf and rank == 1 for is_buf, _, rank, _ in spec):
        return _quick_1d_buffers(plan, tuple(want for _, want, _, _ in spec), check), _memo_maker(plan, spec)

    def quick(args: tuple[Any, ...]) -> list[Any] | None:
        if len(args) != nargs:
            return None
        flat = list(prefix)
        for (is_buf, want, rank, conv), a in zip(spec, args):
            if is_buf:
                if type(a) is not buffer_type or a._device is not dev or a._dtype is not want:
                    return None
                shape = a._shape
                if len(shape) != rank:
                    return None
                flat.append(a._ptr)
                flat.append(shape[0])
                if rank >= 2:
                    flat.extend(shape[1:])
            else:
                if type(a) is not want:
                    return None
                flat.append(conv(a))  # raises the range error the full path raises
        for o, j in pairs:
            x = args[o]
            y = args[j]
            if x._nbytes and y._nbytes and x._ptr < y._ptr + y._nbytes and y._ptr < x._ptr + x._nbytes:
                return None
        if check is not None and not check(flat):
            return None
        flat += suffix
        return flat  # never mutated after this: the memo may keep it

    return quick, _memo_maker(plan, spec)


def _quick_1d_buffers(plan: _Plan, dtypes: tuple[Any, ...], check: Any) -> Any:
    """`quick` for the commonest plan: every parameter a 1-D slice passed as a Buffer."""
    dev = plan.device
    pairs = plan.alias_pairs
    prefix, suffix = plan.prefix, plan.suffix
    nargs = plan.nargs
    buffer_type = Buffer

    eq = check.pairs if check is not None else ()  # `len(a) == len(c)`: inlined below
    rest = None if check is None or check.only_pairs else check

    def quick(args: tuple[Any, ...]) -> list[Any] | None:
        if len(args) != nargs:
            return None
        flat = [*prefix]
        for want, a in zip(dtypes, args):
            if type(a) is not buffer_type or a._device is not dev or a._dtype is not want or len(a._shape) != 1:
                return None
            flat.append(a._ptr)
            flat.append(a._shape[0])
        for o, j in pairs:
            x = args[o]
            y = args[j]
            if x._nbytes and y._nbytes and x._ptr < y._ptr + y._nbytes and y._ptr < x._ptr + x._nbytes:
                return None
        for i, j in eq:
            if flat[i] != flat[j]:
                return None
        if rest is not None and not rest(flat):
            return None
        flat += suffix
        return flat  # never mutated after this: the memo may keep it

    return quick


def _memo_maker(plan: _Plan, spec: tuple[tuple[bool, Any, int, Any], ...]) -> Any:
    call = plan.call
    arena = plan.arena
    kinds = tuple(is_buf for is_buf, _, _, _ in spec)

    if all(kinds):

        def memo(args: tuple[Any, ...], packed: list[Any]) -> Any:
            return _memo_for(tuple(map(_ref, args)), call, packed, arena)

    else:

        def memo(args: tuple[Any, ...], packed: list[Any]) -> Any:
            return _memo_for(tuple([_ref(a) if b else _const(a) for b, a in zip(kinds, args)]), call, packed, arena)

    return memo


def _memo_for(keys: tuple[Any, ...], call: Any, packed: list[Any], arena: Any) -> Any:
    """`fire(args)`: when `args` are the very objects the keys remember (a Buffer alive, a
    scalar by identity), mark the fault arena and relaunch `packed`; else return False.

    Written out for up to four arguments: an unrolled check costs a third of a loop."""
    n = len(keys)
    if n == 0:

        def fire(args: tuple[Any, ...]) -> bool:
            if args:
                return False
            arena.dirty = True
            call(*packed)
            return True

    elif n == 1:
        (k0,) = keys

        def fire(args: tuple[Any, ...]) -> bool:
            if len(args) != 1 or k0() is not args[0]:
                return False
            arena.dirty = True
            call(*packed)
            return True

    elif n == 2:
        k0, k1 = keys

        def fire(args: tuple[Any, ...]) -> bool:
            if len(args) != 2 or k0() is not args[0] or k1() is not args[1]:
                return False
            arena.dirty = True
            call(*packed)
            return True

    elif n == 3:
        k0, k1, k2 = keys

        def fire(args: tuple[Any, ...]) -> bool:
            if len(args) != 3 or k0() is not args[0] or k1() is not args[1] or k2() is not args[2]:
                return False
            arena.dirty = True
            call(*packed)
            return True

    elif n == 4:
        k0, k1, k2, k3 = keys

        def fire(args: tuple[Any, ...]) -> bool:
            if (
                len(args) != 4
                or k0() is not args[0]
                or k1() is not args[1]
                or k2() is not args[2]
                or k3() is not args[3]
            ):
                return False
            arena.dirty = True
            call(*packed)
            return True

    else:

        def fire(args: tuple[Any, ...]) -> bool:
            if len(args) != n:
                return False
            for key, a in zip(keys, args):
                if key() is not a:
                    return False
            arena.dirty = True
            call(*packed)
            return True

    return fire


def _const(v: Any) -> Any:
    return lambda: v

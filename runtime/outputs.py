"""Launchers that allocate their outputs: `k[cfg].call(a, b)` and `k[cfg].call_op(a, b)`.

    @az.launch_contract(domain=1, block=256, outputs=lambda a, b: {"c": ((len(a),), az.f32)})
    @az.kernel
    def vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None: ...

    c = vecadd[cfg].call(a, b)            # allocates c on the launch's device, launches, returns it
    op = vecadd[cfg].call_op(a, b)        # the lazy form: `op.run()` / `await op` gives c

The contract's `outputs=` (read by the front end: anodize/language/contract_schema.py) names
each output parameter with its shape (the `requires` grammar over the inputs) and element
type.  `call` takes the other parameters, in order (or by keyword), allocates each output with
`dev.empty` (on a GPU an allocation queued on the device's stream, the stream the launch uses),
and launches; the result is the output, or a tuple of them in the order `outputs=` lists
them.  `call_op` hands its arrays to the op: from the moment it is built until it completes,
host reads and writes of them are refused and conflicting work is refused
(runtime/inflight.py: `Held`), as for submitted work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from anodize.language.contract import Env, RequiresOverflow, eval_expr
from anodize.language.errors import ArgumentError, LaunchError
from anodize.runtime import inflight
from anodize.runtime.buffer import Buffer
from anodize.runtime.device import args_device
from anodize.runtime.launch_checks import bind_keywords

if TYPE_CHECKING:
    from anodize.runtime.launch import Launcher

__all__ = ["call", "call_op", "allocate"]


def allocate(launcher: Launcher, args: tuple[Any, ...], kwargs: dict[str, Any], what: str) -> tuple[tuple[Any, ...], Any]:
    """The full argument tuple of the launch (outputs allocated) and the result to hand back."""
    kernel = launcher.kernel
    name = kernel.__name__
    contract = launcher.contract if launcher.contract is not None else kernel.contract
    decl = contract.outputs if contract is not None else None
    if decl is None:
        raise LaunchError(
            f"`{name}[cfg].{what}` allocates the outputs the contract declares, but `{name}`'s contract has no `outputs=`",
            help=f'add `outputs=lambda a, b: {{"c": ((len(a),), f32)}}` to its `@az.launch_contract`, or launch '
            f"`{name}[cfg](...)` with every argument",
        )
    names, inputs, produced = _plan(kernel, decl)
    if len(args) + len(kwargs) != len(inputs) or set(kwargs) & set(produced):
        raise ArgumentError(
            f"`{name}[cfg].{what}` takes the inputs {', '.join(f'`{n}`' for n in inputs)} "
            f"({len(inputs)}), got {len(args) + len(kwargs)} arguments",
            help=f"the outputs {', '.join(f'`{n}`' for n in produced)} are allocated and returned",
        )
    bound = dict(zip(inputs, args if not kwargs else bind_keywords(name, inputs, args, kwargs), strict=True))
    dev = args_device(tuple(bound.values()))
    shapes = _shapes(decl, bound, name, what)
    made = {d.name: dev.empty(shape if len(shape) > 1 else shape[0], d.dtype) for d, shape in zip(decl.decls, shapes)}
    full = tuple(made[n] if n in made else bound[n] for n in names)
    outs = tuple(made[d.name] for d in decl.decls)
    return full, (outs[0] if len(outs) == 1 else outs)


_PLANS: dict[tuple[int, int], tuple[Any, Any, tuple[str, ...], tuple[str, ...], frozenset[str]]] = {}
_SHAPES: dict[tuple[int, tuple[Any, ...]], tuple[Any, tuple[tuple[int, ...], ...]]] = {}
SHAPE_MEMO_ENTRIES = 256  # output shapes kept per process (cleared when full)


def _plan(kernel: Any, decl: Any) -> tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]:
    """The kernel's parameter names, its inputs (the parameters `outputs=` does not produce) and
    the produced names: per kernel and declaration, so computed once (the entry holds both, so
    an id is never reused while its entry stands)."""
    hit = _PLANS.get((id(kernel), id(decl)))
    if hit is not None and hit[0] is kernel and hit[1] is decl:
        return hit[2], hit[3], hit[4]
    names = tuple(kernel.signature.parameters)
    produced = frozenset(decl.names())
    inputs = tuple(n for n in names if n not in produced)
    _PLANS[(id(kernel), id(decl))] = (kernel, decl, names, inputs, produced)
    return names, inputs, produced


def _shapes(decl: Any, bound: dict[str, Any], name: str, what: str) -> tuple[tuple[int, ...], ...]:
    """Each output's shape: the declaration's expressions over what they read of the inputs
    (an array's shape, an integer's value).  Memoised on exactly that (a chunk loop asks for the
    same shapes every chunk); a shape that cannot be computed raises and is not memoised."""
    key: list[Any] = []
    env = Env({}, {}, {})
    for p in decl.params:
        v = bound[p]
        if isinstance(v, (Buffer, np.ndarray)) or hasattr(v, "shape"):
            shape = tuple(int(s) for s in v.shape)
            env.lengths[p] = shape[0] if shape else 0  # type: ignore[index]
            env.shapes[p] = shape  # type: ignore[index]
            key.append(shape)
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            env.scalars[p] = int(v)  # type: ignore[index]
            key.append(int(v))
        else:
            key.append(None)
    memo_key = (id(decl), tuple(key))
    hit = _SHAPES.get(memo_key)
    if hit is not None and hit[0] is decl:
        return hit[1]
    shapes = []
    for d in decl.decls:
        try:
            shape = tuple(eval_expr(e, env) for e in d.shape)
        except (KeyError, TypeError):
            raise ArgumentError(
                f"`{name}[cfg].{what}`: the shape of output `{d.name}` ({decl.source}) needs an array "
                "or an integer where it was given something else"
            ) from None
        except (RequiresOverflow, ZeroDivisionError) as e:
            raise ArgumentError(f"`{name}[cfg].{what}`: the shape of output `{d.name}` cannot be computed: {e}") from None
        if any(n < 0 for n in shape):
            raise ArgumentError(f"`{name}[cfg].{what}`: output `{d.name}` would have the negative shape {shape}")
        shapes.append(shape)
    if len(_SHAPES) >= SHAPE_MEMO_ENTRIES:
        _SHAPES.clear()
    _SHAPES[memo_key] = (decl, tuple(shapes))
    return tuple(shapes)


def call(launcher: Launcher, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    full, result = allocate(launcher, args, kwargs, "call")
    launcher(*full)
    return result


def call_op(launcher: Launcher, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    full, result = allocate(launcher, args, kwargs, "call_op")
    op = launcher._op(full, False)
    op.outputs = result
    op._held = inflight.hold(op, op._uses)
    return op

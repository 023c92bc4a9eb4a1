"""Generic kernels at launch: pick the specialisation from the arguments.

A kernel whose parameters name a constrained `TypeVar` (`Slice[T]`, `x: T`) or an
`az.Constant[...]` is launched through `GenericLaunch`: it reads each type variable's scalar
from the arguments' dtypes and each Constant's value from its argument, then launches the
specialised kernel (one `Kernel` per specialisation, cached on the generic one, so each
compiles once, in memory and in the disk cache, and keeps every fast path of a plain kernel).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from anodize.language.errors import USER_ERRORS, ArgumentError
from anodize.language.records import dataclass
from anodize.language.sources import constant_key
from anodize.language.vocab import SCALARS
from anodize.runtime import dlpack

if TYPE_CHECKING:
    from anodize.runtime.config import LaunchConfig
    from anodize.runtime.kernel_store import RuntimeKernel as Kernel

__all__ = ["GenericSignature", "generic_signature", "specialise", "bind_arguments", "GenericLaunch"]

_BY_DTYPE: dict[str, str] = {info.numpy_name: name for name, info in SCALARS.items()}
_DTYPE = operator.attrgetter("dtype")


def _picker(idx: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """`args -> tuple(args[i] for i in idx)`, exactly and at C speed (an itemgetter of one
    slice for a single index, so the result is always a tuple)."""
    if len(idx) == 1:
        return operator.itemgetter(slice(idx[0], idx[0] + 1))
    if not idx:
        return operator.itemgetter(slice(0, 0))
    return operator.itemgetter(*idx)


@dataclass(frozen=True)
class GenericSignature:
    params: tuple[str, ...]  # every parameter, in order
    typevar_of: dict[str, str]  # parameter -> the type variable its annotation names
    is_slice: dict[str, bool]
    constraints: dict[str, tuple[str, ...]]  # type variable -> scalars
    constants: dict[str, str]  # Constant parameter -> its scalar ("i64", "f64", "bool_")


def _front() -> tuple[ModuleType, ModuleType]:
    """The front end (language/front.py) and the reading of parameter annotations through its
    symbol table (language/param_annotations.py), loaded by the first generic signature read
    from source: a built package (anodize/built.py) launches without either."""
    from anodize.language import front, param_annotations

    return front, param_annotations


def generic_signature(kernel: Kernel) -> GenericSignature | None:
    """The kernel's generic parameters, read from its source; None for a plain kernel."""
    front_end, annotations = _front()
    front, fdef = front_end.kernel_of(kernel.fn)
    syms = front.symbols
    tvs = annotations.typevars_of(syms, fdef)
    consts = annotations.constant_params(syms, fdef)
    if not tvs and not consts:
        return None
    typevar_of: dict[str, str] = {}
    is_slice: dict[str, bool] = {}
    for p in fdef.args.args:
        ann = p.annotation
        is_slice[p.arg] = isinstance(ann, ast.Subscript) and p.arg not in consts
        for n in ast.walk(ann) if ann is not None else ():
            if isinstance(n, (ast.Name, ast.Attribute)):
                s = syms.resolve(n)
                if s.kind == "typevar":
                    typevar_of[p.arg] = s.name
    return GenericSignature(tuple(p.arg for p in fdef.args.args), typevar_of, is_slice, tvs, consts)


def _dtype_name(value: Any) -> str | None:
    dt = getattr(value, "dtype", None)
    if dt is None:
        return _dlpack_dtype_name(value)
    name = str(getattr(dt, "name", None) or dt)
    # PyTorch spells its dtypes `torch.float16`, `torch.bfloat16`, ...: NumPy's names behind a prefix
    return _BY_DTYPE.get(name[6:] if name.startswith("torch.") else name)


def _dlpack_dtype_name(value: Any) -> str | None:
    """The scalar of an object seen through `__dlpack__` alone (no `dtype`): its capsule's element
    type, read without consuming it (the capsule's destructor frees it)."""
    if not hasattr(value, "__dlpack__"):
        return None
    try:
        t = dlpack.read_capsule(value.__dlpack__())
    except Exception:  # not a tensor DLPack can describe: the caller says what it got
        return None
    return t.scalar


def specialise(kernel: Kernel, sig: GenericSignature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Kernel, tuple[Any, ...]]:
    """The specialised kernel for these arguments, and the arguments it takes (Constants removed)."""
    name = kernel.__name__
    bound = bind_arguments(name, sig.params, args, kwargs)
    chosen: dict[str, tuple[str, str]] = {}  # type variable -> (scalar, the parameter that decided it)
    pending: list[tuple[str, str, Any]] = []  # Python scalars for a type variable: decided by others
    for p, tv in sig.typevar_of.items():
        v = bound[p]
        scalar = _dtype_name(v)
        if scalar is None:
            if sig.is_slice[p]:
                raise ArgumentError(f"kernel `{name}`: `{p}` has no dtype to specialise `{tv}` from, got {type(v).__name__}")
            pending.append((p, tv, v))
            continue
        allowed = sig.constraints[tv]
        if scalar not in allowed:
            raise ArgumentError(
                f"kernel `{name}`: `{p}` has dtype {SCALARS[scalar].numpy_name}, but `{tv}` may only be "
                f"{', '.join(allowed)} ({', '.join(SCALARS[a].numpy_name for a in allowed)})",
                help=f"convert it with `.astype(...)` to one of {', '.join(SCALARS[a].numpy_name for a in allowed)}",
            )
        prev = chosen.get(tv)
        if prev is not None and prev[0] != scalar:
            raise ArgumentError(
                f"kernel `{name}`: `{prev[1]}` makes `{tv}` {prev[0]} but `{p}` makes it {scalar}",
                help=f"every argument typed `{tv}` must have one dtype",
            )
        chosen[tv] = (scalar, p)
    for p, tv, v in pending:  # a Python number takes the type its type variable already has
        if tv not in chosen:
            guess = "f64" if isinstance(v, float) else "i64" if isinstance(v, int) and not isinstance(v, bool) else None
            if guess is None or guess not in sig.constraints[tv]:
                raise ArgumentError(
                    f"kernel `{name}`: cannot tell `{tv}` from `{p}` = {v!r}",
                    help=f"pass a NumPy scalar of one of {', '.join(sig.constraints[tv])}, or an array typed `{tv}`",
                )
            chosen[tv] = (guess, p)
    spec: list[tuple[str, Any]] = [(tv, s) for tv, (s, _) in chosen.items()]
    for p, scalar in sig.constants.items():
        spec.append((p, _constant_value(name, p, scalar, bound[p])))
    if len(chosen) < len(sig.constraints):
        kernel.specialize(**dict(spec))  # raises: names the type variable no parameter decided
    # validated above, as check_bindings would: take the cached specialisation without validating again
    return kernel._specialization(tuple(sorted(spec))), tuple(bound[p] for p in sig.params if p not in sig.constants)


def bind_arguments(name: str, params: tuple[str, ...] | list[str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A launch's arguments by parameter name (positional, then keyword), each parameter once."""
    if len(args) > len(params):
        raise ArgumentError(f"kernel `{name}` takes {len(params)} arguments, got {len(args)}")
    bound = dict(zip(params, args, strict=False))
    for k, v in kwargs.items():
        if k not in params:
            raise ArgumentError(f"kernel `{name}` has no parameter `{k}` (parameters: {', '.join(params)})")
        if k in bound:
            raise ArgumentError(f"kernel `{name}` got parameter `{k}` twice")
        bound[k] = v
    missing = [p for p in params if p not in bound]
    if missing:
        raise ArgumentError(f"kernel `{name}` is missing argument(s) {', '.join(f'`{m}`' for m in missing)}")
    return bound


def check_bindings(kernel: Kernel, sig: GenericSignature | None, bindings: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """`k.specialize(T="f32", n=64)`'s bindings, validated: every type variable and Constant of
    the kernel named once, each type variable to a member of its constraint."""
    name = kernel.__name__
    if sig is None:
        raise ArgumentError(f"kernel `{name}` is not generic: it has no type variable or `az.Constant` to specialise")
    wanted = {**{t: "type variable" for t in sig.constraints}, **{c: "Constant" for c in sig.constants}}
    for k in bindings:
        if k not in wanted:
            raise ArgumentError(
                f"kernel `{name}` has no type variable or Constant parameter `{k}`",
                help=f"it has: {', '.join(f'`{w}` ({kind})' for w, kind in wanted.items())}",
            )
    missing = [w for w in wanted if w not in bindings]
    if missing:
        raise ArgumentError(f"kernel `{name}`: give {', '.join(f'`{m}`' for m in missing)} to specialise it")
    out: list[tuple[str, Any]] = []
    for t, allowed in sig.constraints.items():
        v = bindings[t]
        v = getattr(v, "__name__", v) if isinstance(v, type) else v
        if v not in allowed:
            raise ArgumentError(f"kernel `{name}`: `{t}` may only be {', '.join(allowed)}, got {v!r}")
        out.append((t, v))
    for c, scalar in sig.constants.items():
        out.append((c, _constant_value(name, c, scalar, bindings[c])))
    return tuple(sorted(out))


def _constant_value(kernel: str, param: str, scalar: str, v: Any) -> Any:
    """An `az.Constant` parameter's value, checked against its declared kind."""
    ok = (
        (scalar == "i64" and isinstance(v, int) and not isinstance(v, bool))
        or (scalar == "f64" and isinstance(v, (int, float)) and not isinstance(v, bool))
        or (scalar == "bool_" and isinstance(v, bool))
    )
    if not ok:
        kind = {"i64": "int", "f64": "float", "bool_": "bool"}[scalar]
        raise ArgumentError(
            f"kernel `{kernel}`: `{param}` is an `az.Constant[{kind}]`, got {v!r}",
            help="a Constant is a compile-time value: pass a Python literal of its type (each value compiles once)",
        )
    if scalar == "i64" and not -(2**63) <= v < 2**63:
        digits = f"{len(str(abs(v)))} digits" if abs(v) >= 10**24 else str(v)
        raise ArgumentError(f"kernel `{kernel}`: `{param}` is an `az.Constant[int]`, got {digits}: it does not fit in i64",
                            help="a Constant[int] is an i64 in the kernel: pass a value from -2**63 to 2**63 - 1")
    if scalar == "f64":
        try:
            return float(v)
        except OverflowError:
            raise ArgumentError(f"kernel `{kernel}`: `{param}` is an `az.Constant[float]`, got an int beyond every float's range "
                                f"({len(str(abs(v)))} digits)", help="pass a float literal within f64's range") from None
    return v


def _key_function(sig: GenericSignature) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """`args -> key`: what the specialisation depends on, one flat tuple (each part at fixed
    positions): the dtypes of the type-variable slices, the types of the scalars and Constants (a
    NumPy scalar's type names its dtype; `True == 1` and `1 == 1.0` with one hash, so the type
    keys beside the value) and the Constants' values, a float's by its bits (`-0.0 == 0.0`).
    Raises AttributeError (no dtype) or, on lookup, TypeError (unhashable) where the slow path
    has something to say."""
    params = sig.params
    slices = _picker([i for i, p in enumerate(params) if p in sig.typevar_of and sig.is_slice[p]])
    scalar_idx = [i for i, p in enumerate(params) if p in sig.typevar_of and not sig.is_slice[p]]
    const_idx = [i for i, p in enumerate(params) if p in sig.constants]
    scalars, consts = _picker(scalar_idx + const_idx), _picker(const_idx)
    if any(sig.constants[p] == "f64" for p in sig.constants):  # a float by its bits (a NaN too: one key)
        return lambda args: (*map(_DTYPE, slices(args)), *map(type, scalars(args)), *map(constant_key, consts(args)))
    if not scalar_idx:
        return lambda args: (*map(_DTYPE, slices(args)), *map(type, c := consts(args)), *c)
    return lambda args: (*map(_DTYPE, slices(args)), *map(type, scalars(args)), *consts(args))


class GenericLaunch:
    """What `generic_kernel[config]` returns: specialises on each call's arguments.

    The specialisation is a function of the dtypes of the type-variable arguments (the type,
    for a Python number) and of the Constants' values, so a positional call looks its launcher
    up by those alone (`_fast`); the launcher then validates the arguments as on any launch.
    The key holds each Constant's type beside its value (`True == 1` and `1 == 1.0`, with one
    hash) and a float Constant's bits (`-0.0 == 0.0`).  `kernel[config]` keeps one
    `GenericLaunch` per config (anodize/kernel.py), so a config built inline on every launch
    keeps this memo too.
    """

    __slots__ = ("kernel", "config", "sig", "_n", "_keep", "_fast", "_key")

    _FAST_MAX = 32  # launchers remembered per config (Constants can take many values): as many as the kernel keeps specialisations

    def __init__(self, kernel: Kernel, config: LaunchConfig[Any], sig: GenericSignature):
        self.kernel, self.config, self.sig = kernel, config, sig
        params = sig.params
        self._n = len(params)
        keep = [i for i, p in enumerate(params) if p not in sig.constants]
        self._keep = None if not sig.constants else _picker(keep)
        self._fast: dict[tuple[Any, ...], Any] = {}
        self._key = _key_function(sig)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        try:
            key = launcher = None
            if not kwargs and len(args) == self._n:
                try:
                    key = self._key(args)
                    launcher = self._fast.get(key)
                except (AttributeError, TypeError):  # no dtype, or an unhashable Constant: the slow path says so
                    key = None
                if launcher is not None:
                    keep = self._keep
                    launcher(*args) if keep is None else launcher(*keep(args))
                    return
            k, rest = specialise(self.kernel, self.sig, args, kwargs)
            launcher = k[self.config]
            launcher(*rest)
            if key is not None:
                if len(self._fast) >= self._FAST_MAX:
                    self._fast.clear()
                self._fast[key] = launcher
        except USER_ERRORS as e:  # the public entry point: no anodize-internal frames below it
            __tracebackhide__ = True  # pytest and IPython hide this frame too
            raise e.with_traceback(None)

    def op(self, *args: Any, **kwargs: Any) -> Any:
        try:
            k, rest = specialise(self.kernel, self.sig, args, kwargs)
            return k[self.config].op(*rest)
        except USER_ERRORS as e:  # the public entry point: no anodize-internal frames below it
            __tracebackhide__ = True  # pytest and IPython hide this frame too
            raise e.with_traceback(None)

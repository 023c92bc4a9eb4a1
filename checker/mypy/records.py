"""The mypy plugin's records (`@az.record`, docs/records.md): `az.Array[T, n]` read as the
type `Array[T]` (mypy takes no int as a type argument), and a record's constructor taking a
tuple for an array field (`Particle(vel=(0.0, 1.0), ...)`), as the kernel language does."""

from __future__ import annotations

from mypy.plugin import AnalyzeTypeContext, ClassDefContext, FunctionSigContext
from mypy.types import AnyType, FunctionLike, Instance, CallableType, Type, TypeOfAny, UnboundType, UnionType, get_proper_type

from .fullnames import ARRAY_FULLNAME
from .launches import host_type

# the fullnames of the `@az.record` classes and `az.Bundle` subclasses mypy has seen (their
# constructors' hooks)
RECORD_CLASSES: set[str] = set()
BUNDLE_CLASSES: set[str] = set()


def on_array(ctx: AnalyzeTypeContext) -> Type:
    """`az.Array[T, n]` -> `Array[T]` (n is the compiler's; mypy checks the element type)."""
    t = ctx.type
    if not isinstance(t, UnboundType) or len(t.args) != 2:
        ctx.api.fail("`az.Array` takes a scalar type and a length: `az.Array[i32, 4]`", ctx.context)
        return AnyType(TypeOfAny.from_error)
    elem = ctx.api.analyze_type(t.args[0])
    return ctx.api.named_type(ARRAY_FULLNAME, [elem])


def on_record_class(ctx: ClassDefContext) -> None:
    RECORD_CLASSES.add(ctx.cls.fullname)


def on_bundle_class(ctx: ClassDefContext) -> None:
    BUNDLE_CLASSES.add(ctx.cls.fullname)


def bundle_signature(ctx: FunctionSigContext) -> FunctionLike:
    """A bundle's constructor on the host: each slice field takes what a launch's slice
    parameter takes (a Buffer, a CUDA array, ...), as `k[config](...)` types it."""
    sig = ctx.default_signature
    if not isinstance(sig, CallableType):
        return sig
    return sig.copy_modified(arg_types=[host_type(ctx.api, t) for t in sig.arg_types])


def record_signature(ctx: FunctionSigContext) -> FunctionLike:
    """A record's constructor: an `Array[T]` field also takes a tuple of T, a scalar field a
    Python number (a weak literal in a kernel)."""
    sig = ctx.default_signature
    if not isinstance(sig, CallableType):
        return sig
    args = []
    for a in sig.arg_types:
        p = get_proper_type(a)
        if isinstance(p, Instance) and p.type.fullname == ARRAY_FULLNAME and p.args:
            fallback = ctx.api.named_generic_type("builtins.tuple", [p.args[0]])
            a = UnionType([p, fallback])
        elif isinstance(p, Instance) and p.type.fullname.startswith("anodize.types."):  # a literal, as a store takes
            num = "builtins.float" if p.type.has_base("builtins.float") else "builtins.int"
            a = UnionType([p, ctx.api.named_generic_type(num, [])])
        args.append(a)
    return sig.copy_modified(arg_types=args)


__all__ = ["RECORD_CLASSES", "BUNDLE_CLASSES", "on_array", "on_record_class", "on_bundle_class", "record_signature", "bundle_signature"]

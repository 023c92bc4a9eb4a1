"""Host values the launch checks need to know: a buffer's dtype and shape, a config's rank
and block.

`Buffer` may or may not be generic over its dtype; either way the plugin records
the dtype (and a shape written as literals) that `dev.empty`, `dev.zeros` and
`dev.to_device` visibly give it, and reads it back from a type argument or from
those recorded facts.
"""

from __future__ import annotations

from typing import Any

from mypy.nodes import ArgKind
from mypy.plugin import CheckerPluginInterface, FunctionContext, MethodContext
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    TupleType,
    Type,
    TypeOfAny,
    TypeType,
    get_proper_type,
)

from anodize.language.launch_rules import pad3
from anodize.language.vocab import SCALARS

from . import meta
from .engine_results import report_module
from .fullnames import CONFIG_FULLNAME

SCALAR_CLASSES = {f"anodize.types.{name}": name for name in SCALARS}
_NUMPY_BITS = {"_8Bit": 8, "_16Bit": 16, "_32Bit": 32, "_64Bit": 64}
_NUMPY_GENERIC = {"numpy.floating": "f", "numpy.signedinteger": "i", "numpy.unsignedinteger": "u"}
_NUMPY_PLAIN = {"numpy.float64": "f64", "numpy.float32": "f32", "numpy.bool": "bool_", "numpy.bool_": "bool_"}


# ---- reading types -----------------------------------------------------------------------


def scalar_of_instance(typ: Type) -> str | None:
    """`f32` for `az.f32` or NumPy's `float32` (as an instance type); None otherwise."""
    inst = get_proper_type(typ)
    if not isinstance(inst, Instance):
        return None
    name = inst.type.fullname
    if name in SCALAR_CLASSES:
        return SCALAR_CLASSES[name]
    if name in _NUMPY_PLAIN:
        return _NUMPY_PLAIN[name]
    kind = _NUMPY_GENERIC.get(name)
    if kind and inst.args:
        bits_t = get_proper_type(inst.args[0])
        if isinstance(bits_t, Instance):
            bits = _NUMPY_BITS.get(bits_t.type.name)
            candidate = f"{kind}{bits}"
            if candidate in SCALARS:
                return candidate
    return None


def scalar_of_dtype_arg(typ: Type) -> str | None:
    """The scalar named by a dtype argument: `az.f32`, `np.float32`, `np.dtype[np.float32]`."""
    p = get_proper_type(typ)
    if isinstance(p, CallableType) and p.is_type_obj():
        return scalar_of_instance(p.ret_type)
    if isinstance(p, TypeType):
        return scalar_of_instance(p.item)
    if isinstance(p, Instance) and p.type.fullname == "numpy.dtype" and p.args:
        return scalar_of_instance(p.args[0])
    return None


def scalar_of_ndarray(typ: Type) -> str | None:
    p = get_proper_type(typ)
    if isinstance(p, Instance) and p.type.fullname == "numpy.ndarray" and len(p.args) == 2:
        return scalar_of_dtype_arg(p.args[1])
    return None


def literal_int(typ: Type) -> int | None:
    p = get_proper_type(typ)
    if isinstance(p, LiteralType) and type(p.value) is int:
        return p.value
    if isinstance(p, Instance) and p.last_known_value is not None:
        v = p.last_known_value.value
        return v if type(v) is int else None
    return None


def literal_shape(typ: Type) -> list[int] | None:
    """`100` or `(300, 517)` written as literals; None otherwise."""
    one = literal_int(typ)
    if one is not None:
        return [one]
    p = get_proper_type(typ)
    if isinstance(p, TupleType):
        vals = [literal_int(t) for t in p.items]
        if vals and all(v is not None for v in vals):
            return [v for v in vals if v is not None]
    return None


def is_buffer(typ: Type) -> bool:
    p = get_proper_type(typ)
    return isinstance(p, Instance) and any(
        b.name == "Buffer" and b.fullname.startswith("anodize.") for b in p.type.mro
    )


def buffer_facts(typ: Type) -> tuple[str | None, list[int] | None]:
    """(dtype, shape) of a Buffer type where visible; (None, None) for anything else."""
    if not is_buffer(typ):
        return None, None
    p = get_proper_type(typ)
    assert isinstance(p, Instance)
    facts = meta.read(p, meta.BUFFER) or {}
    dtype = facts.get("dtype")
    if dtype is None and p.args:
        dtype = scalar_of_instance(p.args[0])
    shape = facts.get("shape")
    return dtype, shape if isinstance(shape, list) else None


def config_facts(typ: Type) -> tuple[int | None, tuple[int, int, int] | None]:
    """(rank, block in CUDA order as a 3-tuple) of a LaunchConfig type where visible."""
    p = get_proper_type(typ)
    if not isinstance(p, Instance) or p.type.fullname != CONFIG_FULLNAME:
        return None, None
    rank: int | None = None
    if p.args:
        r = get_proper_type(p.args[0])
        if isinstance(r, LiteralType) and r.value in (1, 2, 3):
            rank = int(r.value)
    facts = meta.read(p, meta.CONFIG) or {}
    block = facts.get("block")
    return rank, pad3(block) if isinstance(block, list) else None



# ---- hooks: where the facts come from ---------------------------------------------------


def _arg(ctx: FunctionContext | MethodContext, name: str, pos: int) -> tuple[Type | None, bool]:
    """The actual type passed for formal `name` (or position `pos`), and whether it was passed."""
    try:
        idx = ctx.callee_arg_names.index(name)
    except ValueError:
        idx = pos
    if idx < len(ctx.arg_types) and ctx.arg_types[idx]:
        kinds = ctx.arg_kinds[idx]
        if kinds and kinds[0] in (ArgKind.ARG_POS, ArgKind.ARG_NAMED):
            return ctx.arg_types[idx][0], True
        return None, True
    return None, False


def _with_dtype(api: CheckerPluginInterface, ret: Type, dtype: str | None, shape: list[int] | None) -> Type:
    p = get_proper_type(ret)
    if not isinstance(p, Instance) or not is_buffer(p) or (dtype is None and shape is None):
        return ret
    if dtype is not None and len(p.type.defn.type_vars) == 1 and not _known(p.args):
        p = p.copy_modified(args=[api.named_generic_type(f"anodize.types.{dtype}", [])])
    return meta.attach(api, p, meta.BUFFER, {"dtype": dtype, "shape": shape})


def _known(args: tuple[Type, ...]) -> bool:
    return bool(args) and scalar_of_instance(args[0]) is not None


def on_empty(ctx: MethodContext) -> Type:
    """`dev.empty(shape, dtype)` / `dev.zeros(shape, dtype)`."""
    report_module(ctx.api)
    shape_t, _ = _arg(ctx, "shape", 0)
    dtype_t, _ = _arg(ctx, "dtype", 1)
    dtype = scalar_of_dtype_arg(dtype_t) if dtype_t is not None else None
    shape = literal_shape(shape_t) if shape_t is not None else None
    return _with_dtype(ctx.api, ctx.default_return_type, dtype, shape)


def on_to_device(ctx: MethodContext) -> Type:
    """`dev.to_device(ndarray)`: the dtype NumPy's stubs give the array."""
    report_module(ctx.api)
    arr_t, _ = _arg(ctx, "host", 0)
    dtype = scalar_of_ndarray(arr_t) if arr_t is not None else None
    return _with_dtype(ctx.api, ctx.default_return_type, dtype, None)


def on_view(ctx: MethodContext) -> Type:
    """`buf[...]` / `buf.view(...)`: a view keeps its base's dtype."""
    dtype, _ = buffer_facts(ctx.type)
    return _with_dtype(ctx.api, ctx.default_return_type, dtype, None)


def _config(api: CheckerPluginInterface, rank: int | None, block: list[int] | None, ret: Type) -> Type:
    p = get_proper_type(ret)
    if not isinstance(p, Instance) or p.type.fullname != CONFIG_FULLNAME:
        return ret
    if rank is not None:
        p = p.copy_modified(args=[LiteralType(rank, api.named_generic_type("builtins.int", []))])
    elif p.args:
        p = p.copy_modified(args=[AnyType(TypeOfAny.special_form)])
    if block is None:
        return p
    return meta.attach(api, p, meta.CONFIG, {"block": block})


def _dims(typ: Type | None) -> int | None:
    """How many dimensions an int-or-tuple argument visibly has."""
    if typ is None:
        return None
    p = get_proper_type(typ)
    if isinstance(p, TupleType):
        return len(p.items)
    if isinstance(p, Instance) and p.type.fullname == "builtins.int":
        return 1
    if isinstance(p, LiteralType) and type(p.value) is int:
        return 1
    return None


def on_config_new(ctx: FunctionContext) -> Type:
    """`LaunchConfig(grid, block)`: the rank is the number of extents of the longer one, as at run
    time (known when both are visible, or when one is a tuple of 3)."""
    report_module(ctx.api)
    grid_t, _ = _arg(ctx, "grid", 0)
    block_t, _ = _arg(ctx, "block", 1)
    dims = [_dims(grid_t), _dims(block_t)]
    known = [d for d in dims if d is not None]
    rank: int | None
    if known and (max(known) == 3 or len(known) == 2):
        rank = max(known)
    elif all(d is not None for d in dims):
        rank = 1
    else:
        rank = None
    block = literal_shape(block_t) if block_t is not None else None
    return _config(ctx.api, rank, block, ctx.default_return_type)


def on_for_num_elems(ctx: MethodContext) -> Type:
    report_module(ctx.api)
    block_t, _ = _arg(ctx, "block", 1)
    # without `block`, the launch takes the contract's block (runtime/config.py DefaultBlockConfig)
    block = literal_shape(block_t) if block_t is not None else None
    return _config(ctx.api, 1, block, ctx.default_return_type)


def on_for_shape(ctx: MethodContext) -> Type:
    """`for_shape(shape, block)`: rank 2 or 3, the number of extents of `shape`."""
    report_module(ctx.api)
    shape_t, _ = _arg(ctx, "shape", 0)
    block_t, _ = _arg(ctx, "block", 1)
    rank = _dims(shape_t) if shape_t is not None else None
    if rank is None and block_t is not None:
        rank = _dims(block_t)
    if rank not in (2, 3):
        rank = None
    block = literal_shape(block_t) if block_t is not None else None  # None: the contract's
    return _config(ctx.api, rank, block, ctx.default_return_type)

"""`kernel[config](*args)`: the launcher's host-side signature and the launch-site rules.

- `Kernel.__getitem__` checks the config against the kernel's contract
  (az-no-contract, az-launch-rank) and hands the kernel's facts to the launcher.
- `Launch.__call__`'s signature maps each kernel-side parameter type to what the
  host passes: a slice takes a `Buffer` or any CUDA/DLPack array, `f32`/`f64` a
  Python float, integer scalars an int, `bool_` a bool.  mypy then checks the
  argument count and scalar types itself.
- After the call is typed: a statically known buffer dtype that differs from the
  slice's (arg-type), one buffer as an output and as another argument (az-alias),
  and a `requires` relation violated by literal sizes (az-requires, a note).
"""

from __future__ import annotations

import ast
from typing import Any

from mypy import errorcodes
from mypy.literals import literal_hash
from mypy.nodes import (
    ARG_POS,
    ARG_STAR,
    ARG_STAR2,
    IntExpr,
    ListExpr,
    TupleExpr,
    AssignmentStmt,
    Block,
    CallExpr,
    ClassDef,
    Context,
    Decorator,
    Expression,
    FuncDef,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    StarExpr,
    Statement,
    TypeInfo,
    Var,
)
from mypy.lookup import lookup_fully_qualified
from mypy.plugin import CheckerPluginInterface, MethodContext, MethodSigContext
from mypy.types import (
    AnyType,
    FunctionLike,
    Instance,
    Parameters,
    Type,
    TypeOfAny,
    TypeVarType,
    UnionType,
    get_proper_type,
)

from anodize.language import messages
from anodize.language.contract import Env, Requires, RequiresOverflow, RequiresSyntaxError, first_violation, parse_requires
from anodize.language.diagnostics import Diagnostic, Span
from anodize.language.launch_rules import alias_pairs, launch_shape_problem, trim
from anodize.language.vocab import SCALARS, SLICE_KINDS
from anodize.checker.ignore_comments import anodize_ignored_codes

from . import meta
from .codes import report
from .engine_results import engine_reported, read_source, report_module
from .hostvalues import buffer_facts, config_facts, literal_int

SLICE_CLASSES = {f"anodize.types.{name}": info for name, info in SLICE_KINDS.items()}
SCALAR_CLASSES = {f"anodize.types.{name}": info for name, info in SCALARS.items()}


def span_of(api: CheckerPluginInterface, ctx: Context) -> Span:
    path = getattr(api, "path", "") or ""
    end_line = ctx.end_line if ctx.end_line is not None else ctx.line
    end_col = ctx.end_column if ctx.end_column is not None else ctx.column + 1
    return Span(path, ctx.line, max(ctx.column, 0), end_line, end_col)


# ---- k[config] ---------------------------------------------------------------------------


def on_getitem(ctx: MethodContext) -> Type:
    kinfo = meta.read(ctx.type, meta.KERNEL)
    if kinfo is None:
        return ctx.default_return_type
    report_module(ctx.api)
    _check_config(ctx, kinfo)
    return meta.attach(ctx.api, ctx.default_return_type, meta.KERNEL, kinfo)


def report_new(api: CheckerPluginInterface, diag: Diagnostic, at: Context) -> None:
    """Report a launch-site diagnostic unless the engine already reports its code on the
    lines of this launch (it resolves many launches itself; one report per problem), or
    a `# anodize: ignore[...]` on its line names its code (`anodize check`'s reading)."""
    last = at.end_line if at.end_line is not None else at.line
    if diag.code in _ignored_on(api, diag.span.line):
        return
    if not engine_reported(api, diag.code, at.line, last):
        report(api, diag)


def _ignored_on(api: CheckerPluginInterface, line: int) -> set[str]:
    """The codes `# anodize: ignore[...]` on `line` of the module being checked names
    (mypy applies `# type: ignore[...]` itself, and reports it unused if we did)."""
    source = read_source(getattr(api, "path", "") or "")
    if source is None or "ignore[" not in source:
        return set()
    lines = source.splitlines()
    return anodize_ignored_codes(lines[line - 1]) if 0 < line <= len(lines) else set()


def _check_config(ctx: MethodContext, kinfo: dict[str, Any]) -> None:
    """az-no-contract, and az-launch-rank for a config of the wrong rank or block."""
    name = str(kinfo.get("name", "kernel"))
    contract = kinfo.get("contract")
    if contract is None:
        report_new(ctx.api, messages.no_contract(span_of(ctx.api, ctx.context), name, None), ctx.context)
        return
    if not (ctx.arg_types and ctx.arg_types[0] and ctx.args and ctx.args[0]):
        return
    site = span_of(ctx.api, ctx.context)  # `k[config]`, where the engine reports it too
    rank, block = config_facts(ctx.arg_types[0][0])
    domain = contract.get("domain")
    want_block = contract.get("block")
    if not isinstance(domain, int):
        return
    want = tuple(want_block) if isinstance(want_block, list) else None
    p = launch_shape_problem(domain, want, rank, block)  # the runtime's decision too
    if p is None:
        return
    if p.kind == "rank":
        diag = messages.launch_rank_mismatch(site, name, rank, domain, None)  # type: ignore[arg-type]
    elif p.kind == "block":
        diag = messages.launch_block_mismatch(site, name, trim(block), want, None)  # type: ignore[arg-type]
    else:
        diag = messages.launch_extra_dim(site, name, p.what, p.axis, p.size, domain, None)
    report_new(ctx.api, diag, ctx.context)


# ---- the launcher's signature ------------------------------------------------------------


def kernel_params(typ: Type) -> Parameters | None:
    p = get_proper_type(typ)
    if not isinstance(p, Instance) or not p.args:
        return None
    params = get_proper_type(p.args[0])
    if not isinstance(params, Parameters) or params.is_ellipsis_args:
        return None
    if any(k != ARG_POS for k in params.arg_kinds):  # the language allows plain parameters only
        return None
    return params


def host_type(api: CheckerPluginInterface, kernel_side: Type) -> Type:
    """What the host passes for a kernel parameter of type `kernel_side`."""
    p = get_proper_type(kernel_side)
    if isinstance(p, Instance) and p.type.fullname in SLICE_CLASSES:
        items: list[Type] = []
        buf = _buffer_type(api, p.args[0] if p.args else None)
        if buf is not None:
            items.append(buf)
        for proto in ("anodize.types.CudaArray", "anodize.types.DLPackArray"):
            inst = _named(api, proto)
            if inst is not None:
                items.append(inst)
        return UnionType.make_union(items) if items else AnyType(TypeOfAny.special_form)
    if isinstance(p, Instance) and p.type.fullname in SCALAR_CLASSES:
        info = SCALAR_CLASSES[p.type.fullname]
        host = "builtins.float" if info.is_float else "builtins.bool" if info.kind == "b" else "builtins.int"
        return api.named_generic_type(host, [])
    return AnyType(TypeOfAny.special_form)


def _named(api: CheckerPluginInterface, fullname: str) -> Instance | None:
    """An instance of the class `fullname` (no type arguments), if mypy has loaded it."""
    modules = getattr(api, "modules", None)
    if not isinstance(modules, dict):
        return None
    sym = lookup_fully_qualified(fullname, modules, raise_on_missing=False)
    if sym is None or not isinstance(sym.node, TypeInfo):
        return None
    return Instance(sym.node, [AnyType(TypeOfAny.special_form)] * len(sym.node.defn.type_vars))


def _buffer_type(api: CheckerPluginInterface, dtype: Type | None) -> Instance | None:
    base = _named(api, "anodize.Buffer")
    if base is None:
        return None
    tvars = base.type.defn.type_vars
    if not tvars:
        return base
    args: list[Type] = [AnyType(TypeOfAny.special_form)] * len(tvars)
    if dtype is not None and len(tvars) == 1:
        args = [dtype]
    return base.copy_modified(args=args)


def launcher_signature(ctx: MethodSigContext) -> FunctionLike:
    """`k[config](...)`: one parameter per kernel parameter (by position or by name), in host-side types."""
    return _host_signature(ctx, keep=0)


def unsafe_launch_signature(ctx: MethodSigContext) -> FunctionLike:
    """`k.unsafe_launch(config, ...)`: the config, then the same host-side parameters."""
    return _host_signature(ctx, keep=1)


def _host_signature(ctx: MethodSigContext, keep: int) -> FunctionLike:
    params = kernel_params(ctx.type)
    sig = ctx.default_signature
    if params is None or len(sig.arg_types) < keep:
        return sig
    kinfo = meta.read(ctx.type, meta.KERNEL) or {}
    n = len(params.arg_types)
    return sig.copy_modified(
        arg_types=list(sig.arg_types[:keep]) + [host_type(ctx.api, t) for t in params.arg_types],
        arg_kinds=[ARG_POS] * (keep + n),
        arg_names=list(sig.arg_names[:keep]) + list(params.arg_names),  # by position or by name, as at runtime
        name=str(kinfo.get("name") or sig.name or "launch"),
    )


# ---- after the call is typed -------------------------------------------------------------


def on_launch(ctx: MethodContext) -> Type:
    return _after_call(ctx, keep=0)


def on_unsafe_launch(ctx: MethodContext) -> Type:
    return _after_call(ctx, keep=1)


def _after_call(ctx: MethodContext, keep: int) -> Type:
    params = kernel_params(ctx.type)
    if params is None:
        return ctx.default_return_type
    kinfo = meta.read(ctx.type, meta.KERNEL) or {}
    name = str(kinfo.get("name") or "launch")
    names = [n or f"arg{i}" for i, n in enumerate(params.arg_names)]
    given: list[tuple[int, Expression, Type]] = []  # (kernel parameter index, expression, type)
    for i in range(len(params.arg_types)):
        f = keep + i
        if f < len(ctx.args) and ctx.args[f] and ctx.arg_types[f]:
            given.append((i, ctx.args[f][0], ctx.arg_types[f][0]))
    report_module(ctx.api)
    _check_dtypes(ctx, name, params, given, keep)
    # `k[cfg](*bufs)`: which buffer goes where is not written at the call (the engine leaves it alone too)
    if not any(kind in (ARG_STAR, ARG_STAR2) for kinds in ctx.arg_kinds for kind in kinds):
        _check_alias(ctx, names, params, given)
    contract = kinfo.get("contract")
    if isinstance(contract, dict) and isinstance(contract.get("requires"), str):
        _check_requires(ctx, name, contract["requires"], [n or "" for n in params.arg_names], given)
    return ctx.default_return_type


def _slice_dtype(kernel_side: Type) -> str | None:
    p = get_proper_type(kernel_side)
    if isinstance(p, Instance) and p.type.fullname in SLICE_CLASSES and p.args:
        arg = get_proper_type(p.args[0])
        if isinstance(arg, Instance) and arg.type.fullname in SCALAR_CLASSES:
            return arg.type.name
    return None


def _check_dtypes(
    ctx: MethodContext, name: str, params: Parameters, given: list[tuple[int, Expression, Type]], keep: int
) -> None:
    bound: dict[str, tuple[str, int]] = {}  # a generic kernel's type variable -> (dtype, argument)
    for i, expr, actual in given:
        want = _slice_dtype(params.arg_types[i])
        have, _ = buffer_facts(actual)
        tv = _slice_typevar(params.arg_types[i])
        if tv is not None and have is not None:
            tv_name, allowed = tv
            if allowed and have not in allowed:
                ctx.api.fail(
                    f'Argument {keep + i + 1} to "{name}" has incompatible type "Buffer[{have}]"; '
                    f'"{tv_name}" may only be {", ".join(allowed)}',
                    expr,
                    code=errorcodes.ARG_TYPE,
                )
            elif tv_name in bound and bound[tv_name][0] != have:
                ctx.api.fail(
                    f'Argument {keep + i + 1} to "{name}" has incompatible type "Buffer[{have}]"; '
                    f'argument {bound[tv_name][1]} makes "{tv_name}" {bound[tv_name][0]}',
                    expr,
                    code=errorcodes.ARG_TYPE,
                )
            bound.setdefault(tv_name, (have, keep + i + 1))
        if want is not None and have is not None and have != want:
            ctx.api.fail(
                f'Argument {keep + i + 1} to "{name}" has incompatible type "Buffer[{have}]"; expected "Buffer[{want}]"',
                expr,
                code=errorcodes.ARG_TYPE,
            )


def _slice_typevar(kernel_side: Type) -> tuple[str, tuple[str, ...]] | None:
    """`Slice[T]` of a generic kernel: (T's name, the scalars its constraint allows)."""
    p = get_proper_type(kernel_side)
    if isinstance(p, Instance) and p.type.fullname in SLICE_CLASSES and p.args:
        arg = get_proper_type(p.args[0])
        if isinstance(arg, TypeVarType):
            allowed = tuple(
                v.type.name for v in map(get_proper_type, arg.values) if isinstance(v, Instance) and v.type.fullname in SCALAR_CLASSES
            )
            return arg.name, allowed
    return None


def _is_output(kernel_side: Type) -> bool:
    p = get_proper_type(kernel_side)
    return isinstance(p, Instance) and p.type.fullname in SLICE_CLASSES and SLICE_CLASSES[p.type.fullname].output


def _check_alias(
    ctx: MethodContext, names: list[str], params: Parameters, given: list[tuple[int, Expression, Type]]
) -> None:
    aliases = LocalAliases.around(ctx.api, ctx.context)
    # mypy finds the keys (local aliases through its own nodes); the decision is the one every
    # front end makes (launch_rules.alias_pairs)
    outputs = [_is_output(params.arg_types[i]) for i, _, _ in given]
    for a, b in alias_pairs(outputs, [aliases.key(expr) for _, expr, _ in given]):
        o, out_expr, _ = given[a]
        j, expr, _ = given[b]
        diag = messages.alias(span_of(ctx.api, out_expr), names[o], span_of(ctx.api, expr), names[j], _text(out_expr))
        report_new(ctx.api, diag, ctx.context)


def _text(expr: Expression) -> str:
    """The argument as written, for a name or an attribute chain; a description otherwise."""
    if isinstance(expr, NameExpr):
        return expr.name
    if isinstance(expr, MemberExpr):
        inner = _text(expr.expr)
        return f"{inner}.{expr.name}" if inner != "this buffer" else inner
    return "this buffer"


class LocalAliases:
    """Names in one scope bound exactly once, to another name (`d = c`): d aliases c."""

    def __init__(self) -> None:
        self.bound: dict[Var, list[Expression]] = {}

    @classmethod
    def around(cls, api: CheckerPluginInterface, at: Context) -> LocalAliases:
        tree: MypyFile | None = getattr(api, "tree", None)
        found = cls()
        if tree is None:
            return found
        scope = _innermost_function(tree.defs, at.line)
        found.collect(scope.body.body if isinstance(scope, FuncDef) else tree.defs)
        return found

    def collect(self, stmts: list[Statement]) -> None:
        """Assignments in these statements and their nested blocks, not in nested scopes."""
        for stmt in stmts:
            if isinstance(stmt, AssignmentStmt):
                for lv in stmt.lvalues:
                    if isinstance(lv, NameExpr) and isinstance(lv.node, Var):
                        self.bound.setdefault(lv.node, []).append(stmt.rvalue)
                continue
            if isinstance(stmt, (FuncDef, Decorator, ClassDef)):
                continue
            for attr in ("body", "else_body", "finally_body", "handlers"):
                child = getattr(stmt, attr, None)
                for block in child if isinstance(child, list) else [child]:
                    if isinstance(block, Block):
                        self.collect(block.body)

    def key(self, expr: Expression) -> object | None:
        seen: set[int] = set()
        while isinstance(expr, NameExpr) and isinstance(expr.node, Var) and id(expr.node) not in seen:
            seen.add(id(expr.node))
            values = self.bound.get(expr.node, [])
            if len(values) == 1 and isinstance(values[0], NameExpr) and isinstance(values[0].node, Var):
                expr = values[0]
                continue
            return ("var", id(expr.node))
        if isinstance(expr, IndexExpr):
            items = self.container(expr.base)
            if items is not None:  # an element of a list or tuple display (`bufs = [a, c]`)
                at = expr.index.value if isinstance(expr.index, IntExpr) else None
                if at is None or not -len(items) <= at < len(items):
                    return None  # not known: left alone, never guessed
                return self.key(items[at])
        base = view_base(expr)
        if base is not None:  # `c[2:]`, `c.view(...)`: the same memory as `c`
            return self.key(base)
        return literal_hash(expr)

    def container(self, expr: Expression) -> list[Expression] | None:
        """The elements of a list or tuple display, written here or bound once to this name."""
        if isinstance(expr, NameExpr) and isinstance(expr.node, Var):
            values = self.bound.get(expr.node, [])
            expr = values[0] if len(values) == 1 else expr
        if isinstance(expr, (ListExpr, TupleExpr)) and not any(isinstance(x, StarExpr) for x in expr.items):
            return list(expr.items)
        return None


def view_base(expr: Expression) -> Expression | None:
    """`c` for a view of it written as `c[...]` or `c.view(...)`."""
    if isinstance(expr, IndexExpr):
        return expr.base
    if isinstance(expr, CallExpr) and isinstance(expr.callee, MemberExpr) and expr.callee.name == "view":
        return expr.callee.expr
    return None


def _innermost_function(stmts: list[Statement], line: int) -> FuncDef | None:
    """The innermost function (or method) whose lines contain `line`; None at module level."""
    for stmt in stmts:
        fn = stmt.func if isinstance(stmt, Decorator) else stmt
        if isinstance(fn, FuncDef) and fn.line <= line <= (fn.end_line or fn.line):
            return _innermost_function(fn.body.body, line) or fn
        if isinstance(stmt, ClassDef) and stmt.line <= line <= (stmt.end_line or stmt.line):
            return _innermost_function(stmt.defs.body, line)
    return None


def _check_requires(
    ctx: MethodContext,
    name: str,
    text: str,
    kernel_names: list[str],
    given: list[tuple[int, Expression, Type]],
) -> None:
    """A `requires` relation that literal sizes visibly violate (az-requires, a note).

    The lambda names the kernel's parameters BY NAME, in any order and any subset
    (`lambda c, a: ...` on `(a, b, c)`), as the runtime maps them (runtime/launch.py);
    a name that is not a parameter falls back to its position, as there too.  `given`
    is indexed by kernel parameter, whether the launch passed it by position or by name."""
    try:
        lam = ast.parse(f"({text})", mode="eval").body
        if not isinstance(lam, ast.Lambda):
            return
        req = parse_requires(lam, f"({text})")
    except (SyntaxError, RequiresSyntaxError):
        return
    lengths: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    scalars: dict[str, int] = {}
    index = {n: i for i, n in enumerate(kernel_names) if n}
    slot = {index.get(r, pos): r for pos, r in enumerate(req.params)}  # kernel parameter -> lambda name
    for i, _, actual in given:
        pname = slot.get(i)
        if pname is None:
            continue
        _, shape = buffer_facts(actual)
        if shape:
            lengths[pname] = shape[0]  # len() of a buffer is its first extent
            shapes[pname] = tuple(shape)
        value = literal_int(actual)
        if value is not None:
            scalars[pname] = value
    env = Env(lengths=lengths, shapes=shapes, scalars=scalars)
    for rel in req.relations:
        one = Requires(req.params, (rel,), req.source)
        try:
            hit = first_violation(one, env)
        except (KeyError, IndexError, RequiresOverflow, ZeroDivisionError):
            continue  # a side is not known statically
        if hit is not None:  # the first relation that visibly fails, as the runtime reports it
            _, left, right = hit
            diag = messages.requires_violated(span_of(ctx.api, ctx.context), name, rel.source, left, right)
            report_new(ctx.api, diag, ctx.context)
            return

"""`@kernel` / `@az.func`: report the module's rule results, and type the kernel precisely.

The kernel keeps its `Kernel[P]` type (P: the kernel-side parameters) and gains the
facts a launch site in any module needs: its name and its launch contract, read
from the decorator list (`@launch_contract` stacks in either order).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

from mypy.nodes import CallExpr, Decorator, Expression, IntExpr, LambdaExpr, RefExpr, TupleExpr, UnaryExpr
from mypy.plugin import CheckerPluginInterface, FunctionContext, MethodSigContext
from mypy.types import FunctionLike, Instance, Type, UnionType, get_proper_type

from anodize.language.contract import RequiresSyntaxError, parse_requires
from anodize.language import contract_schema
from anodize.language.front import front_for_source
from anodize.language.vocab import SCALARS

from . import meta
from .engine_results import filter_doubles, module_result, read_source, report_module
from .fullnames import CONTRACT_FULLNAME, FUNC_FULLNAME, KERNEL_FULLNAME, TILE_CLASS

_SCALARS = {f"anodize.types.{name}": info for name, info in SCALARS.items()}

def on_kernel(ctx: FunctionContext) -> Type:
    result = report_module(ctx.api)
    dec = ctx.context
    if not isinstance(dec, Decorator):  # `kernel(fn)` called by hand: no syntactic facts
        return ctx.default_return_type
    path: str = getattr(ctx.api, "path", "") or ""
    tree = getattr(ctx.api, "tree", None)
    # No line numbers here: the facts are part of the kernel's type, and an edit that only
    # moves the kernel must not re-check every module that launches it.
    contract = contract_of(dec, path, result.requires if result is not None else None)
    info: dict[str, Any] = {
        "name": dec.func.name,
        "module": tree.fullname if tree is not None else "",
        "contract": contract,
    }
    if contract is not None and result is not None and (contract["domain"] is None or contract["block"] is None):
        # a contract that names module constants (`block=BLOCK`): the engine reads their values,
        # which are no part of any type mypy compares, so the module's digest stands for them
        # and a module that launches the kernel is checked again when the module changes
        info["source"] = result.digest[:16]
    return meta.attach(ctx.api, ctx.default_return_type, meta.KERNEL, info)


def on_anodize_call(ctx: FunctionContext) -> Type:
    """`@az.func`, `@launch_contract(...)`, `az.device()`: report the module's engine results."""
    report_module(ctx.api)
    return ctx.default_return_type


def on_other_call(ctx: FunctionContext) -> Type:
    """Any other anodize function: no report, only the filter of mypy's repeats of the engine's
    errors (`engine_results.filter_doubles`) for the module being checked."""
    if module_result(ctx.api) is not None:
        filter_doubles(ctx.api)
    return ctx.default_return_type


def on_elementwise(ctx: FunctionContext) -> Type:
    """`math.exp(t)`, `abs(t)`, `max(t, 0.0)` with a tile `t`: a tile (typeshed says float),
    as the tile model computes it element-wise; without a tile argument, typeshed's type."""
    for types in ctx.arg_types:
        for t in types:
            p = get_proper_type(t)
            if isinstance(p, Instance) and p.type.has_base(TILE_CLASS):
                return t
    return ctx.default_return_type


def decorator_fullname(d: Expression) -> str | None:
    """`@kernel`, `@az.kernel`, `@launch_contract(...)`: the callee's full name."""
    target = d.callee if isinstance(d, CallExpr) else d
    return target.fullname if isinstance(target, RefExpr) and target.fullname else None


def contract_of(dec: Decorator, path: str, known: Mapping[tuple[int, int], str | None] | None = None) -> dict[str, Any] | None:
    """The `@launch_contract(...)` facts written literally; None when there is no contract.
    `known`: the `requires` texts the engine's worker read (`requires_texts`), by position."""
    for d in dec.original_decorators or dec.decorators:
        if isinstance(d, CallExpr) and decorator_fullname(d) == CONTRACT_FULLNAME:
            kw = {name: arg for name, arg in zip(d.arg_names, d.args, strict=True) if name}
            # the fields a launch site checks, by their schema's `mypy` reading (language/contract_schema.py)
            return {f.name: _READINGS[f.mypy](kw.get(f.name), path, known) for f in contract_schema.FIELDS if f.mypy is not None}
    return None


def int_value(e: Expression | None) -> int | None:
    if isinstance(e, IntExpr):
        return e.value
    if isinstance(e, UnaryExpr) and e.op == "-" and isinstance(e.expr, IntExpr):
        return -e.expr.value
    return None


def block_value(e: Expression | None) -> list[int] | None:
    """A literal block (`256`, `(16, 16)`) as a list in CUDA order; None if not literal."""
    if isinstance(e, IntExpr):
        return [e.value]
    if isinstance(e, TupleExpr):
        vals = [int_value(x) for x in e.items]
        if all(v is not None for v in vals):
            return [v for v in vals if v is not None]
    return None


def _requires_value(e: Expression | None, path: str, known: Mapping[tuple[int, int], str | None] | None) -> str | None:
    return requires_text(e, path, known) if isinstance(e, LambdaExpr) else None


_READINGS: dict[str, Callable[[Expression | None, str, Mapping[tuple[int, int], str | None] | None], Any]] = {
    "int": lambda e, path, known: int_value(e),
    "block": lambda e, path, known: block_value(e),
    "requires": _requires_value,
}


def requires_text(lam: LambdaExpr, path: str, known: Mapping[tuple[int, int], str | None] | None = None) -> str | None:
    """The lambda's source text, when it parses under the `requires` grammar.  Read from the
    module's one front (`anodize.language.front`: the tree the engine checked, cached per
    source), so the plugin neither parses the module a second time nor walks all of it.
    With the engine in a worker, the worker read the texts (`known`, by the lambda's line and
    column, which mypy takes from Python's parser as the front does): mypy's process then
    builds no front at all."""
    if known is not None and (lam.line, lam.column) in known:
        return known[(lam.line, lam.column)]
    front = _front(path)
    if front is None:
        return None
    found = None
    for _, fdef in front.functions():  # a decorator's lambda: look at decorators first
        for d in fdef.decorator_list:
            for kw in d.keywords if isinstance(d, ast.Call) else ():
                if _at(kw.value, lam):
                    found = kw.value
    if found is None:
        found = next((n for n in ast.walk(front.tree) if _at(n, lam)), None)
    if found is None:
        return None
    return _checked_text(front, found)


def requires_texts(front: Any) -> dict[tuple[int, int], str | None]:
    """`requires_text` for every lambda passed to a decorator in the module, by (line, column):
    what the engine's worker sends back with the module's diagnostics.  A lambda not found
    here (or whose reading failed) is read again by `requires_text` itself."""
    out: dict[tuple[int, int], str | None] = {}
    for _, fdef in front.functions():
        for d in fdef.decorator_list:
            for kw in d.keywords if isinstance(d, ast.Call) else ():
                lam = kw.value
                if isinstance(lam, ast.Lambda):
                    try:
                        out[(lam.lineno, lam.col_offset)] = _checked_text(front, lam)
                    except Exception:  # left to `requires_text`, as without a worker
                        out.pop((lam.lineno, lam.col_offset), None)
    return out


def _checked_text(front: Any, found: ast.expr) -> str | None:
    try:
        parse_requires(found, front.src)  # type: ignore[arg-type]  # (the front's lines: split once)
    except RequiresSyntaxError:  # the rule engine reports it as az-contract
        return None
    return _segment(front, found)


def _segment(front: Any, node: ast.expr) -> str | None:
    """`ast.get_source_segment(front.source, node)`, without splitting the whole module again
    for a lambda on one ASCII line (byte columns are character columns there)."""
    line, end, col, end_col = node.lineno, node.end_lineno, node.col_offset, node.end_col_offset
    if line == end and end_col is not None:
        text = front.src.line(line)
        if text.isascii():
            return str(text[col:end_col])
    return ast.get_source_segment(front.source, node)


def _at(node: ast.AST, lam: LambdaExpr) -> bool:
    return isinstance(node, ast.Lambda) and node.lineno == lam.line and node.col_offset == lam.column


def _front(path: str) -> Any:
    source = read_source(path)
    if source is None:
        return None
    try:
        return front_for_source(source, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def helper_signature(ctx: MethodSigContext) -> FunctionLike:
    """A call of an `@az.func` helper inside a kernel: literals are weakly typed there, so an
    `i32` parameter takes a Python int and an `f32` one a float (the engine checks the rest)."""
    sig = ctx.default_signature
    return sig.copy_modified(arg_types=[weak_scalar(ctx.api, t) for t in sig.arg_types])


def weak_scalar(api: CheckerPluginInterface, typ: Type) -> Type:
    p = get_proper_type(typ)
    if isinstance(p, Instance) and p.type.fullname in _SCALARS:
        info = _SCALARS[p.type.fullname]
        host = "builtins.float" if info.is_float else "builtins.int"  # bool is an int too
        return UnionType.make_union([typ, api.named_generic_type(host, [])])
    return typ

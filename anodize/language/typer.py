"""Kernel source to the typed kernel model (typed IR): the one typing of a kernel.

`type_kernel(front, fdef)` types a kernel of a parsed module (`front.py`): its signature and
contract here, its body with typer_fn.py's `FnTyper` (the SIMT one, or typer_tiles.py's
`TileFnTyper` for an `@az.tile_kernel`), each helper it calls once per specialisation.  Names
resolve through the module's one symbol table (`symbols.py`): nothing is imported, so
`anodize check` reports every error found here, with the same code and span as compile.

`build_ir(kernel)` types a kernel object's `def` (the front of its module's source).
"""

from __future__ import annotations

import ast
import functools
from typing import Any

from anodize.language import ir, messages
from anodize.language.contract import Contract, Requires, Shape, equal_lengths
from anodize.language.diagnostics import CheckError, Diagnostic
from anodize.language.fn_types import FnTypes
from anodize.language.front import TypedKernel, kernel_contract, kernel_of  # (the front imports this module lazily: it stays light)
from anodize.language.ir import ParamSpec
from anodize.language.grid_sync import grid_sync_placement, uniform_expr
from anodize.language.liveness import spin_read
from anodize.language.param_annotations import constant_params
from anodize.language.record_types import RecordTy
from anodize.language.symbols import RESERVED_PREFIX
from anodize.language.tile_forms import REFERENCE_PATH
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, attention_tiles_in_registers, matmuls_off_tensor_cores, tile_storage_bound
from anodize.language.tile_vocab import OPTION_NUM_STAGES, OPTION_NUM_WARPS
from anodize.language.typer_base import _Fail, _Silent
from anodize.language.typer_fn import FnTyper, compile_helper, signature_names
from anodize.language.typer_state import KernelCtx
from anodize.language.types import VOID, ScalarTy, SliceTy, Ty

__all__ = ["build_ir", "parse_contract", "type_helper", "type_kernel"]


# ---- the kernel ------------------------------------------------------------------------------


def type_kernel(front: Any, fdef: ast.FunctionDef, spec: tuple[tuple[str, Any], ...] = ()) -> Any:
    """The typed model of one kernel of `front` (a `front.TypedKernel`) for one specialisation
    (`spec`: type variable -> scalar name, `az.Constant` parameter -> value; a Constant
    without a value is typed as an unknown value): its IR, or the located diagnostics that
    stopped it.  Call `front.typed(fdef, spec)`, which caches it."""
    contract, cdiags = front.contract(fdef)
    if cdiags:
        return TypedKernel(None, tuple(cdiags))
    views: list[FnTypes] = []
    ctx: list[KernelCtx] = []
    try:
        kir = _type_kernel(front, fdef, contract, dict(spec), views, ctx=ctx)
    except CheckError as e:
        return TypedKernel(None, tuple(e.diagnostics), tuple(views))
    # (two tile shapes of one output that differ by name look alike only when it was noted twice)
    mixed = _tile_shape_probe(front, fdef, contract, spec) if kir.tile_warps and ctx[0].shape_noted_twice else []
    if mixed:
        return TypedKernel(None, tuple(mixed), tuple(views))
    return TypedKernel(kir, (), tuple(views))


# distinct values for the `az.Constant` parameters of a tile kernel checked without values
_PROBE_VALUES = (17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61)


def _tile_shape_probe(front: Any, fdef: ast.FunctionDef, contract: Contract | None, spec: tuple[tuple[str, Any], ...]) -> list[Diagnostic]:
    """One output, one tile shape, for a tile kernel whose shapes name `az.Constant` parameters
    it is checked without: typed once more with a distinct value for each (the first typing
    gives every unknown Constant 1, so `(BM, BN)` and `(CM, CN)` looked alike), the stores and
    loads of one output at two shapes that differ by name are the `tile-shape-mixed` error a
    specialisation with different values would give, at the same place.  As the SIMT twin
    (two per-thread tiles of one output, `az-disjoint-index`), it is refused by name, whatever
    values a launch would bind.  Only that error is taken from the probe (its values may make
    other checks fail that no specialisation would)."""
    unknown = [n for n in constant_params(front.symbols, fdef) if n not in dict(spec)]
    if not unknown or len(unknown) > len(_PROBE_VALUES):
        return []
    mixed: list[Diagnostic] = []
    try:
        _type_kernel(front, fdef, contract, dict(spec), None, probe=(dict(zip(unknown, _PROBE_VALUES, strict=False)), mixed))
    except CheckError as e:
        if mixed and all(d in mixed for d in e.diagnostics):
            return mixed
    return []


def type_helper(front: Any, fdef: ast.FunctionDef) -> FnTypes | None:
    """A helper's body typed on its own, for the parameter and return types it is annotated
    with (a helper no kernel of its module calls); None when an annotation is missing or
    names a type variable (its types are then those of its callers' specialisations)."""
    k = KernelCtx(front, front.path, None, kernel_name=fdef.name)
    a = fdef.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
        return None
    sig = signature_names(k, fdef)
    try:
        ptypes = {p.arg: sig.resolve_type(p.annotation, p.arg) for p in a.args if p.annotation is not None}
        ret = sig.resolve_type(fdef.returns, "the return") if fdef.returns is not None else None
    except (_Fail, CheckError):
        return None
    if len(ptypes) != len(a.args):
        return None
    try:
        compile_helper(k, fdef, ptypes, ret, set())
    except (_Fail, _Silent, CheckError):
        return None
    return next((v for v in k.views if v.fdef is fdef), None)


def build_ir(kernel: Any) -> ir.KernelIR:
    """Type a kernel object's `def` (a `Kernel`, or its Python function) for its
    specialisation (`kernel.spec`): its module's one front (`front.py`).  Raises CheckError
    with located diagnostics."""
    fn = getattr(kernel, "fn", kernel)
    front, fdef = kernel_of(fn)
    typed = front.typed(fdef, tuple(getattr(kernel, "spec", None) or ()))
    if typed.ir is None:
        raise CheckError(list(typed.diagnostics), {front.path: front.source}) from None
    return typed.ir


def parse_contract(kernel: Any) -> Contract | None:
    """A kernel object's contract, as the front end reads it (CheckError when malformed)."""
    return kernel_contract(kernel)


@functools.lru_cache(maxsize=8)
def _mentions_reserved(source: str) -> bool:
    """Once per module text, not once per kernel (a scan of the whole module for each of its
    thousands of kernels was quadratic)."""
    return RESERVED_PREFIX in source


def _reserved_names(front: Any, fdef: ast.FunctionDef) -> list[Diagnostic]:
    """Names in a kernel that collide with the compiler's own symbols."""
    out: list[Diagnostic] = []
    if not _mentions_reserved(front.source):  # (no walk of the kernel when no name could collide)
        return out
    if fdef.name.startswith(RESERVED_PREFIX):
        out.append(messages.reserved_name(front.src.name_span(fdef), fdef.name, RESERVED_PREFIX))
    for n in ast.walk(fdef):
        name = n.arg if isinstance(n, ast.arg) else n.id if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) else None
        if name is not None and name.startswith(RESERVED_PREFIX):
            out.append(messages.reserved_name(front.src.span(n), name, RESERVED_PREFIX))
    return out


def _type_kernel(
    front: Any, fdef: ast.FunctionDef, contract: Contract | None, spec: dict[str, Any], views: list[FnTypes] | None = None,
    probe: tuple[dict[str, int], list[Diagnostic]] | None = None, ctx: list[KernelCtx] | None = None,
) -> ir.KernelIR:
    src = front.src
    k = KernelCtx(front, front.path, contract, spec=spec, kernel_name=fdef.name)
    if ctx is not None:
        ctx.append(k)
    if probe is not None:  # `_tile_shape_probe`
        k.unknown_values, k.shape_mixed = probe
    if views is not None:
        k.views = views
    for name in constant_params(front.symbols, fdef):
        if name in spec:
            k.consts[name] = spec[name]
        else:
            k.unknown_consts.add(name)
    if contract is not None and contract.requires is not None:
        k.equal = equal_lengths(contract.requires)
        k.equal2d = _equal_shapes(contract.requires, 2)
        k.equal3d = _equal_shapes(contract.requires, 3)
    a = fdef.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
        raise CheckError([messages.signature(src.span(fdef), "kernel-takes-plain-positional")])
    reserved = _reserved_names(front, fdef)
    if reserved:
        raise CheckError(reserved)
    names = signature_names(k, fdef, is_kernel=True)
    params: list[ParamSpec] = []
    ptypes: dict[str, Ty] = {}
    for p in a.args:
        try:
            ty = names.resolve_type(p.annotation, f"kernel parameter `{p.arg}`")
            if p.arg in k.consts:  # baked into this specialisation: not an argument of the entry
                continue
            if p.annotation is None:
                raise _Fail(messages.signature(src.span(p), "kernel-parameter-needs-type", arg=p.arg))
            if isinstance(ty, SliceTy):
                params.append(ParamSpec(p.arg, ty.kind, ty.elem.info))
            elif isinstance(ty, ScalarTy):
                params.append(ParamSpec(p.arg, None, ty.info))
            elif isinstance(ty, RecordTy):  # a record by value: one scalar parameter per leaf (typer_records.py)
                params.extend(ParamSpec(f"{p.arg}." + ".".join(path), None, lt.info) for path, lt, _ in ty.leaves())
            else:
                raise _Fail(messages.signature(src.span(p), "kernel-param-type", arg=p.arg, ty=ty))
            ptypes[p.arg] = ty
        except _Fail as f:
            k.diags.append(f.diag)
    if fdef.returns is not None:
        try:
            if names.resolve_type(fdef.returns, "the return") != VOID:
                k.diags.append(messages.signature(src.span(fdef.returns), "kernel-must-return-none"))
        except _Fail as f:
            k.diags.append(f.diag)
    if k.diags:
        raise CheckError(k.diags) from None
    compiler, warps = _tile_hook(front, fdef, ptypes, spec)
    comp = compiler(k, fdef, ptypes, is_kernel=True, ret=VOID)
    try:
        body = comp.body(fdef.body)
    finally:
        comp.release()
    k.views.append(FnTypes(fdef, comp.st.typed, comp.st.vars, tuple(sorted(spec.items())), frozenset(k.unknown_consts)))
    for loop in k.loops:  # liveness: no spin-wait outside `unsafe`
        spins, read = spin_read(loop, frozenset(k.unsafe_shared))
        if spins and loop.span is not None:
            k.diags.append(messages.spin_wait(loop.span, read))
    if k.grid_syncs:  # every thread of the grid reaches each `az.grid.sync()` alike
        k.diags.extend(_grid_sync_placement(front, fdef, comp, ptypes, k.consts))
    if k.diags:
        raise CheckError(k.diags) from None
    domain = contract.domain if contract is not None else (max(k.ranks) if k.ranks else 1)
    kir = ir.KernelIR(
        name=fdef.name,
        params=tuple(params),
        locals=tuple(comp.st.locals.items()),
        body=body,
        contract=contract,
        domain=domain,
        fault_sites=tuple(k.sites),
        path=front.path,
        line=src.span(fdef).line,
        uses_barrier=k.uses_barrier,
        uses_warp=k.uses_warp,
        uses_shared=k.uses_shared,
        waits=any(spin_read(loop, frozenset(k.unsafe_shared))[0] for loop in k.unsafe_loops),
        grid_sync=k.grid_syncs,
        shared=tuple(k.shared.items()),
        tile_warps=warps,
        tile_stages=int(spec.get(OPTION_NUM_STAGES, 0)) if warps else 0,
    )
    bound = tile_storage_bound(kir) if warps and front.path != REFERENCE_PATH else 0
    if bound > STATIC_SHARED_MAX_BYTES and not attention_tiles_in_registers(kir):
        raise CheckError([messages.tile_storage_too_large(src.name_span(fdef), bound, STATIC_SHARED_MAX_BYTES, matmuls_off_tensor_cores(kir))])
    return kir


def _grid_sync_placement(front: Any, fdef: ast.FunctionDef, comp: FnTyper, ptypes: dict[str, Ty], consts: dict[str, Any]) -> list[Diagnostic]:
    """az-barrier-divergence for each `az.grid.sync()` some block may skip (grid_sync.py)."""
    assigned = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}

    def name_uniform(n: ast.Name) -> bool:
        if n.id in assigned:
            return False
        ty = ptypes.get(n.id)
        if isinstance(ty, ScalarTy) or n.id in consts:
            return True
        return ty is None and front.symbols.resolve(n).kind == "constant"

    def uniform(e: ast.expr) -> bool:
        return uniform_expr(e, name_uniform, lambda p: p in ptypes and p not in assigned)

    def is_sync(c: ast.Call) -> bool:
        return isinstance(c.func, (ast.Name, ast.Attribute)) and comp.names.tag(c.func) == ("barrier", "grid")

    def is_range(f: ast.expr) -> bool:
        return isinstance(f, (ast.Name, ast.Attribute)) and comp.names.tag(f) == ("builtin", "range")

    src = front.src
    return [messages.grid_sync_divergence(src.span(call), src.span(why), key)
            for call, why, key in grid_sync_placement(fdef, is_sync, is_range, uniform)]


def _tile_hook(front: Any, fdef: ast.FunctionDef, ptypes: dict[str, Ty], spec: dict[str, Any]) -> tuple[type[FnTyper], int]:
    """The typer of a kernel's body: the tile typer (`typer_tiles.py`) and its
    `num_warps` for an `@az.tile_kernel` (the decorator's, or the specialisation's compile option:
    an autotuning configuration's), else the SIMT one and 0."""
    if front.symbols.tile_decorator(fdef) is None:
        return FnTyper, 0
    from anodize.language.typer_tiles import TileFnTyper, check_tile_params, num_warps  # (loaded on the first tile kernel)

    warps, diags = num_warps(front, fdef)
    warps = int(spec.get(OPTION_NUM_WARPS, warps))
    diags += check_tile_params(front, fdef, ptypes)
    if diags:
        raise CheckError(diags) from None
    return TileFnTyper, warps


def _equal_shapes(req: Requires, rank: int) -> list[set[str]]:
    """Classes of parameters whose shapes `requires` proves equal on every one of `rank` axes."""
    axes: list[list[set[str]]] = [[] for _ in range(rank)]
    for rel in req.relations:
        if (
            rel.op == "=="
            and isinstance(rel.left, Shape)
            and isinstance(rel.right, Shape)
            and rel.left.axis == rel.right.axis
            and rel.left.axis < rank
        ):
            classes = axes[rel.left.axis]
            a, b = rel.left.param, rel.right.param
            hit = [c for c in classes if a in c or b in c]
            merged = {a, b}.union(*hit)
            axes[rel.left.axis] = [c for c in classes if c not in hit] + [merged]
    out: list[set[str]] = [set(c) for c in axes[0]]
    for classes in axes[1:]:
        out = [c & d for c in out for d in classes if len(c & d) > 1]
    return [c for c in out if len(c) > 1]

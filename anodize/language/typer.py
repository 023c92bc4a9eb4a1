"""Kernel source to the typed kernel model (typed IR): the one typing of a kernel.

`type_kernel(front, fdef)` walks a kernel of a parsed module (`front.py`) with one
`visit_<Node>` method per supported construct (Triton's code_generator style).
Anything without a visitor reaches `generic_visit`, which reports a located
`az-unsupported` diagnostic naming the construct.  Names resolve through the
module's one symbol table (`symbols.py`): nothing is imported, so `anodize check`
reports every error found here, with the same code and span as compile.  An
internal error is reported as `az-internal` at the construct being typed.

`build_ir(kernel)` types a kernel object's `def` (the front of its module's source).

Here: the function compiler's plumbing, names and types, and the kernel entry; the
statements are in typer_stmts.py, expressions in typer_exprs.py, calls in typer_calls.py.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import field
from anodize.language.records import dataclass
from typing import Any, NoReturn

from anodize.language.liveness import spin_read
from anodize.language import messages
from anodize.language.contract import Contract, Requires, equal_lengths
from anodize.language.diagnostics import CheckError, Diagnostic, Span
from anodize.language.param_annotations import constant_param_type, constant_params
from anodize.language.symbols import MISSING, RESERVED_PREFIX, Symbol
from anodize.language.tile_vocab import OPTION_NUM_STAGES, OPTION_NUM_WARPS
from anodize.language.vocab import SLICE_KINDS
from anodize.language.ir import FaultSite, ParamSpec
from anodize.language.fn_types import FnTypes

from anodize.language import ir
from anodize.language.ranges import RangeFacts
from anodize.language.record_types import RecordError, RecordTy, record_of
from anodize.language.returns import may_fall_through
from anodize.language.typer_base import _Fail, _Silent
from anodize.language.typer_calls import CallTyping
from anodize.language.typer_effects import EffectsTyping
from anodize.language.typer_exprs import ExprTyping
from anodize.language.typer_locals import LocalsTyping
from anodize.language.tile_forms import REFERENCE_PATH
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, attention_tiles_in_registers, tile_storage_bound
from anodize.language.types import BY_NAME, VOID, LocalArrayTy, ScalarTy, SharedTy, SliceTy, Ty, WitnessTy
from anodize.language.typer_stmts import StmtTyping

__all__ = ["build_ir", "parse_contract", "type_helper", "type_kernel"]


# ---- the per-kernel context ----------------------------------------------------------------


@dataclass
class _KernelCtx:
    front: Any  # front.ModuleFront: the module being typed
    path: str
    contract: Contract | None
    sites: list[FaultSite] = field(default_factory=list)
    diags: list[Diagnostic] = field(default_factory=list)
    helpers: dict[tuple[object, tuple[Ty, ...], frozenset[tuple[str, str]]], ir.FuncIR] = field(default_factory=dict)
    stack: list[object] = field(default_factory=list)
    ranks: set[int] = field(default_factory=set)
    uses_barrier: bool = False
    uses_warp: bool = False
    uses_shared: bool = False
    shared: dict[str, SharedTy] = field(default_factory=dict)
    equal: list[set[str]] = field(default_factory=list)
    equal2d: list[set[str]] = field(default_factory=list)
    equal3d: list[set[str]] = field(default_factory=list)
    # a specialisation: type variable -> scalar name, `az.Constant` parameter -> its value
    spec: dict[str, Any] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)  # Constant parameters with a value
    unknown_consts: set[str] = field(default_factory=set)  # Constant parameters checked without one
    kernel_name: str = ""
    views: list[FnTypes] = field(default_factory=list)  # each body's typing, keyed by its source (fn_types.py)
    loops: list[ir.While] = field(default_factory=list)  # `while` loops outside `unsafe` (liveness.py)
    unsafe_loops: list[ir.While] = field(default_factory=list)  # and inside it
    unsafe_shared: set[str] = field(default_factory=set)  # shared arrays written in `unsafe`

    def site(self, span: Span, kind: str, param: str, message: str = "") -> int:
        self.sites.append(FaultSite(span.path, span.line, span.col + 1, kind, param, message))
        return len(self.sites) - 1


# ---- the function compiler -------------------------------------------------------------------


class _FnCompiler(StmtTyping, ExprTyping, CallTyping, EffectsTyping, LocalsTyping, ast.NodeVisitor, RangeFacts):  # (mixins first: their visit_Constant overrides NodeVisitor's)
    """Compiles one function body (the kernel, or one specialisation of a helper).

    Two kinds of proofs remove bounds checks: `facts`, the (witness, slice) pairs a
    guard such as `i in c` proves, and `rfacts` (see `ranges.py`), integer range facts
    from comparisons.  Both are scoped the same way."""

    def __init__(
        self,
        kctx: _KernelCtx,
        fdef: ast.FunctionDef,
        params: dict[str, Ty],
        *,
        is_kernel: bool,
        ret: Ty | None = None,
    ):
        self.k = kctx
        self.fdef = fdef
        self.src = kctx.front.src
        self.symbols = kctx.front.symbols
        self.is_kernel = is_kernel
        self.vars: dict[str, Ty] = {n: t for n, t in params.items() if isinstance(t, (ScalarTy, WitnessTy))}
        self.slices: dict[str, SliceTy] = {n: t for n, t in params.items() if isinstance(t, SliceTy)}
        self.shared: dict[str, SharedTy] = {}
        self.arrays: dict[str, LocalArrayTy] = {n: t for n, t in params.items() if isinstance(t, LocalArrayTy)}
        for n, t in params.items():  # a helper's record parameter: the record, and its leaves (typer_records.py)
            if isinstance(t, RecordTy):
                self.vars[n] = t  # type: ignore[assignment]
                self.vars.update((f"{n}." + ".".join(p), lt) for p, lt, _ in t.leaves())
        self.locals: dict[str, Ty] = {}
        self.facts: set[tuple[str, str]] = set()
        self.unsafe = 0
        self.loops = 0
        self.ret: Ty | None = ret  # None: inferred from the first `return`
        self.failed_names: set[str] = set()
        self.rfacts = frozenset()
        self._if_false_facts: frozenset[Any] = frozenset()
        self.leader = 0  # > 0 under `if thread.is_block_leader():` (collectives.py)
        self.collective_site: ast.expr | None = None  # the value of the assignment being typed
        self.exprs: dict[ast.AST, ir.Expr] = {}  # each expression typed: the view (fn_types.py) the checker reads

    # -- plumbing -------------------------------------------------------------------------
    def span(self, node: ast.AST) -> Span:
        return self.src.span(node)

    def fail(self, diag: Diagnostic) -> NoReturn:
        raise _Fail(diag)

    def unsupported(self, node: ast.AST, key: str, help: str | None = None, **values: object) -> NoReturn:
        """`az-unsupported` at `node`: `key` (and `help`) name texts of the message catalogue."""
        self.fail(messages.unsupported(self.span(node), key, help=help, **values))

    def type_error(self, node: ast.AST, key: str, help: str | None = None, **values: object) -> NoReturn:
        """`az-type` at `node`: `key` (and `help`) name texts of the message catalogue."""
        self.fail(messages.type_error(self.span(node), key, help=help, **values))

    def visit(self, node: ast.AST) -> Any:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            return self.generic_visit(node)
        try:
            res = method(node)
            if isinstance(node, ast.expr):
                self.exprs[node] = res
            return res
        except (_Fail, _Silent, CheckError):
            raise
        except Exception as exc:  # an internal error: locate it, hide the compiler's frames
            self.fail(messages.internal_error(self.span(node), exc))

    def generic_visit(self, node: ast.AST) -> NoReturn:
        name = type(node).__name__
        self.fail(messages.unsupported_construct(self.span(node), name))

    def body(self, stmts: list[ast.stmt]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in stmts:
            try:
                res = self.visit(s)
            except _Fail as f:
                self.k.diags.append(f.diag)
                for t in ast.walk(s):
                    if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store):
                        self.failed_names.add(t.id)
                continue
            except _Silent:
                continue
            out.extend(res)
            if isinstance(s, ast.If) and not s.orelse and self._terminates(s.body):
                self.facts |= self._guard_facts(s.test, negated=True)
                self.rfacts |= self._if_false_facts  # nothing was assigned on the fall-through path
        return tuple(out)

    @staticmethod
    def _terminates(stmts: list[ast.stmt]) -> bool:
        return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Break, ast.Continue))

    # -- name resolution --------------------------------------------------------------------
    def sym(self, node: ast.expr) -> Symbol:
        """What a name or attribute chain (not a local) refers to, from the module's one table."""
        if isinstance(node, ast.Name):
            if node.id in self.vars or node.id in self.slices or node.id in self.shared or node.id in self.arrays:
                return MISSING
        elif not isinstance(node, ast.Attribute):
            return MISSING
        s = self.symbols.resolve(node)
        if s.kind == "rebound":
            self.fail(messages.rebound(self.span(node), s.name, tuple(self.src.span(w) for w in s.where[:3])))
        return s

    def tag(self, node: ast.expr) -> tuple[str, ...] | None:
        """The kernel-language meaning of a name (`("scalar", "f32")`), else None."""
        s = self.sym(node)
        return s.tag if s.kind == "intrinsic" else None

    def record_type(self, s: Symbol, use: ast.AST) -> RecordTy:
        """The record type of an `@az.record` class (record_types.py); a declaration it cannot
        lay out is az-type where the kernel uses the record (`use`), naming the field."""
        assert s.cls is not None
        try:
            return record_of(self.symbols, s.cls)
        except RecordError as e:
            self.fail(messages.record_error(self.span(use), e, s.name, getattr(e.node, "lineno", 0)))

    def resolve_type(self, node: ast.expr | None, what: str) -> Ty:
        """A type annotation to a compiler type."""
        if node is None:
            self.fail(messages.signature(self.span(self.fdef), "annotation-missing", what=what))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.fail(messages.quoted_annotation(self.span(node), node.value))
        if isinstance(node, ast.Constant) and node.value is None:
            return VOID
        if isinstance(node, ast.Subscript):
            base = self.tag(node.value)
            if base == ("tuple_type",):  # a helper's `-> tuple[f32, i32]` (typer_locals.py)
                return self.resolve_tuple_type(node)
            if base == ("constant_type",):
                c = constant_param_type(self.symbols, node)
                if c is None:
                    self.fail(messages.bad_constant_annotation(self.span(node)))
                return BY_NAME[c]
            elem = self.resolve_type(node.slice, what)
            if base and base[0] == "slice" and isinstance(elem, ScalarTy):
                return SliceTy(SLICE_KINDS[base[1]], elem)
            if base and base[0] == "slice" and isinstance(elem, RecordTy):  # `Slice[Rec]` (typer_records.py)
                if SLICE_KINDS[base[1]].atomic:
                    self.type_error(node, "record-atomic", name=ast.unparse(node))
                return SliceTy(SLICE_KINDS[base[1]], elem)  # type: ignore[arg-type]
            if base == ("local_array_type",) and isinstance(elem, ScalarTy):  # a helper's `LocalArray[T]`
                return LocalArrayTy(elem, ())
            self.type_error(node, "not-kernel-type", expr=ast.unparse(node))
        s = self.sym(node)
        if s.kind == "record":
            return self.record_type(s, node)
        if s.kind == "typevar":
            bound = self.k.spec.get(s.name)
            if bound is None:
                self.fail(messages.unspecialised_typevar(self.span(node), s.name, s.constraints))
            return BY_NAME[bound]
        if s.kind == "intrinsic" and s.name in ("builtins.int", "builtins.float", "builtins.bool"):
            alt = {"builtins.int": "i64", "builtins.float": "f64", "builtins.bool": "bool_"}[s.name]
            self.fail(messages.python_number_annotation(self.span(node), s.name[9:], alt))
        tag = s.tag if s.kind == "intrinsic" else None
        if tag and tag[0] == "scalar":
            return BY_NAME[tag[1]]
        if tag and tag[0] == "witness_type":
            return WitnessTy(int(tag[1]))
        if tag == ("block_witness_type",):
            return WitnessTy(1, block=True)
        if tag and tag[0] == "slice":
            self.type_error(node, "needs-element-type-f32", tag=tag[1])
        self.type_error(node, "not-kernel-type", expr=ast.unparse(node))


def record_params(ptypes: dict[str, Ty]) -> list[tuple[str, Ty]]:
    """A helper's parameters as its body receives them: a record parameter as its leaves."""
    out: list[tuple[str, Ty]] = []
    for n, t in ptypes.items():
        if isinstance(t, RecordTy):
            out.extend((f"{n}." + ".".join(p), lt) for p, lt, _ in t.leaves())
        else:
            out.append((n, t))
    return out


def _compile_helper(
    k: _KernelCtx, fdef: ast.FunctionDef, ptypes: dict[str, Ty], ret: Ty | None, facts: set[tuple[str, str]]
) -> ir.FuncIR:
    k.stack.append(fdef)
    try:
        c = _FnCompiler(k, fdef, ptypes, is_kernel=False, ret=ret)
        c.facts = set(facts)
        body = c.body(fdef.body)
        if isinstance(c.ret, WitnessTy) and fdef.body and may_fall_through(fdef.body):
            # falling off the end gives a zeroed value: for a witness, index 0 on every thread
            last = fdef.body[-1]
            k.diags.append(messages.type_error(k.front.src.span(last), "helper-witness-falls-off",
                                               help="helper-witness-falls-off-help", name=fdef.name, ret=c.ret))
        k.views.append(FnTypes(fdef, c.exprs, c.vars, tuple(k.spec.items())))
        return ir.FuncIR(
            fdef.name,
            tuple(record_params(ptypes)),
            tuple(c.locals.items()),
            body,
            c.ret if c.ret is not None else VOID,
            k.front.src.span(fdef),
        )
    finally:
        k.stack.pop()


# ---- the kernel ------------------------------------------------------------------------------


def type_kernel(front: Any, fdef: ast.FunctionDef, spec: tuple[tuple[str, Any], ...] = ()) -> Any:
    """The typed model of one kernel of `front` (a `front.TypedKernel`) for one specialisation
    (`spec`: type variable -> scalar name, `az.Constant` parameter -> value; a Constant
    without a value is typed as an unknown value): its IR, or the located diagnostics that
    stopped it.  Call `front.typed(fdef, spec)`, which caches it."""
    from anodize.language.front import TypedKernel

    contract, cdiags = front.contract(fdef)
    if cdiags:
        return TypedKernel(None, tuple(cdiags))
    views: list[FnTypes] = []
    try:
        return TypedKernel(_type_kernel(front, fdef, contract, dict(spec), views), (), tuple(views))
    except CheckError as e:
        return TypedKernel(None, tuple(e.diagnostics), tuple(views))


def type_helper(front: Any, fdef: ast.FunctionDef) -> FnTypes | None:
    """A helper's body typed on its own, for the parameter and return types it is annotated
    with (a helper no kernel of its module calls); None when an annotation is missing or
    names a type variable (its types are then those of its callers' specialisations)."""
    k = _KernelCtx(front, front.path, None, kernel_name=fdef.name)
    a = fdef.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
        return None
    sig = _FnCompiler(k, fdef, {}, is_kernel=False)
    try:
        ptypes = {p.arg: sig.resolve_type(p.annotation, p.arg) for p in a.args if p.annotation is not None}
        ret = sig.resolve_type(fdef.returns, "the return") if fdef.returns is not None else None
    except (_Fail, CheckError):
        return None
    if len(ptypes) != len(a.args):
        return None
    try:
        _compile_helper(k, fdef, ptypes, ret, set())
    except (_Fail, _Silent, CheckError):
        return None
    return next((v for v in k.views if v.fdef is fdef), None)


def build_ir(kernel: Any) -> ir.KernelIR:
    """Type a kernel object's `def` (a `Kernel`, or its Python function) for its
    specialisation (`kernel.spec`): its module's one front (`front.py`).  Raises CheckError
    with located diagnostics."""
    from anodize.language.front import kernel_of

    fn = getattr(kernel, "fn", kernel)
    front, fdef = kernel_of(fn)
    typed = front.typed(fdef, tuple(getattr(kernel, "spec", None) or ()))
    if typed.ir is None:
        raise CheckError(list(typed.diagnostics), {front.path: front.source}) from None
    return typed.ir


def parse_contract(kernel: Any) -> Contract | None:
    """A kernel object's contract, as the front end reads it (CheckError when malformed)."""
    from anodize.language.front import kernel_contract

    return kernel_contract(kernel)


@functools.lru_cache(maxsize=8)
def _mentions_reserved(source: str) -> bool:
    """Once per module text, not once per kernel (a scan of the whole module for each of its
    thousands of kernels was quadratic, issue 34)."""
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
    front: Any, fdef: ast.FunctionDef, contract: Contract | None, spec: dict[str, Any], views: list[FnTypes] | None = None
) -> ir.KernelIR:
    src = front.src
    k = _KernelCtx(front, front.path, contract, spec=spec, kernel_name=fdef.name)
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
    comp = _FnCompiler(k, fdef, {}, is_kernel=True)
    params: list[ParamSpec] = []
    ptypes: dict[str, Ty] = {}
    for p in a.args:
        try:
            ty = comp.resolve_type(p.annotation, f"kernel parameter `{p.arg}`")
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
            if comp.resolve_type(fdef.returns, "the return") != VOID:
                k.diags.append(messages.signature(src.span(fdef.returns), "kernel-must-return-none"))
        except _Fail as f:
            k.diags.append(f.diag)
    if k.diags:
        raise CheckError(k.diags) from None
    compiler, warps = _tile_hook(front, fdef, ptypes, spec)
    comp = compiler(k, fdef, ptypes, is_kernel=True, ret=VOID)
    body = comp.body(fdef.body)
    k.views.append(FnTypes(fdef, comp.exprs, comp.vars, tuple(sorted(spec.items())), frozenset(k.unknown_consts)))
    for loop in k.loops:  # liveness: no spin-wait outside `unsafe`
        spins, read = spin_read(loop, frozenset(k.unsafe_shared))
        if spins and loop.span is not None:
            k.diags.append(messages.spin_wait(loop.span, read))
    if k.diags:
        raise CheckError(k.diags) from None
    domain = contract.domain if contract is not None else (max(k.ranks) if k.ranks else 1)
    kir = ir.KernelIR(
        name=fdef.name,
        params=tuple(params),
        locals=tuple(comp.locals.items()),
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
        shared=tuple(k.shared.items()),
        tile_warps=warps,
        tile_stages=int(spec.get(OPTION_NUM_STAGES, 0)) if warps else 0,
    )
    bound = tile_storage_bound(kir) if warps and front.path != REFERENCE_PATH else 0
    if bound > STATIC_SHARED_MAX_BYTES and not attention_tiles_in_registers(kir):
        raise CheckError([messages.type_error(src.name_span(fdef), "tile-storage-too-large", help="tile-storage-too-large",
                                              nbytes=bound, limit=STATIC_SHARED_MAX_BYTES)])
    return kir


def _tile_hook(front: Any, fdef: ast.FunctionDef, ptypes: dict[str, Ty], spec: dict[str, Any]) -> tuple[type, int]:
    """The function compiler of a kernel's body: the tile typer (`typer_tiles.py`) and its
    `num_warps` for an `@az.tile_kernel` (the decorator's, or the specialisation's compile option:
    an autotuning configuration's), else the SIMT one and 0."""
    if front.symbols.tile_decorator(fdef) is None:
        return _FnCompiler, 0
    from anodize.language.typer_tiles import TileCompiler, check_tile_params, num_warps

    warps, diags = num_warps(front, fdef)
    warps = int(spec.get(OPTION_NUM_WARPS, warps))
    diags += check_tile_params(front, fdef, ptypes)
    if diags:
        raise CheckError(diags) from None
    return TileCompiler, warps


def _equal_shapes(req: Requires, rank: int) -> list[set[str]]:
    """Classes of parameters whose shapes `requires` proves equal on every one of `rank` axes."""
    from anodize.language.contract import Shape

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

"""Kernel source to the typed kernel model (typed IR): the one typing of a kernel.

`type_kernel(front, fdef)` walks a kernel of a parsed module (`front.py`) with one
`visit_<Node>` method per supported construct (Triton's code_generator style).
Anything without a visitor reaches `generic_visit`, which reports a located
`az-unsupported` diagnostic naming the construct.  Names resolve through the
module's one symbol table (`symbols.py`): nothing is imported, so `anodize check`
reports every error found here, with the same code and span as compile.  An
internal error is reported as `az-internal` at the construct being typed.

`build_ir(kernel)` types a kernel object's `def` (the front of its module's source).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, NoReturn

from anodize.language import messages
from anodize.language.contract import Contract, Requires, equal_lengths
from anodize.language.diagnostics import CheckError, Diagnostic, Span
from anodize.language.symbols import MISSING, RESERVED_PREFIX, Symbol, constant_param_type, constant_params
from anodize.language.halfbits import round_half
from anodize.language.vocab import MATH_FUNCS, MATH_INT_EXPONENT, MATH_PREDICATES, RAW_IDS, SLICE_KINDS, WITNESS_MAKERS, WITNESS_PARTS
from anodize.language.ir import FaultSite, ParamSpec
from anodize.language.fn_types import FnTypes

from anodize.language import collectives, ir, shared_safe
from anodize.language.ranges import RangeFacts
from anodize.language.returns import may_fall_through
from anodize.language.typer_base import _AXES_TEXT, _BINOPS, _CMPOPS, _Fail, _Silent, _assigned, _fold, _wrap_int
from anodize.language.typer_calls import CallTyping
from anodize.language.typer_effects import EffectsTyping
from anodize.language.typer_exprs import ExprTyping
from anodize.language.typer_locals import LocalsTyping
from anodize.language.types import BOOL, BY_NAME, F64, I32, I64, U32, VOID, LocalArrayTy, PromotionError, ScalarTy, SharedTy, SliceTy, TupleTy, Ty, VoidTy, WitnessTy, implicitly_converts, promote

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

    def site(self, span: Span, kind: str, param: str, message: str = "") -> int:
        self.sites.append(FaultSite(span.path, span.line, span.col + 1, kind, param, message))
        return len(self.sites) - 1


# ---- the function compiler -------------------------------------------------------------------


class _FnCompiler(ExprTyping, CallTyping, EffectsTyping, LocalsTyping, ast.NodeVisitor, RangeFacts):  # (mixins first: their visit_Constant overrides NodeVisitor's)
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
            if base == ("local_array_type",) and isinstance(elem, ScalarTy):  # a helper's `LocalArray[T]`
                return LocalArrayTy(elem, ())
            self.type_error(node, "not-kernel-type", expr=ast.unparse(node))
        s = self.sym(node)
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

    # ---- statements ---------------------------------------------------------------------
    def visit_Pass(self, node: ast.Pass) -> list[ir.Stmt]:
        return []

    def visit_Expr(self, node: ast.Expr) -> list[ir.Stmt]:
        v = node.value
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            return []  # a docstring
        if isinstance(v, ast.Call):
            special = self.statement_call(v)
            if special is not None:
                return special
        return [ir.ExprStmt(self.expr(v), self.span(node))]

    def declare(self, name: str, ty: Ty, node: ast.AST) -> None:
        self.past_loop().discard(name)
        if name in self.slices or name in self.shared:
            self.unsupported(node, "rebinding-slice", name=name)
        if name in self.arrays:
            self.unsupported(node, "rebinding-local-array", help="local-array-escape-help", name=name)
        old = self.vars.get(name)
        if old is None:
            self.vars[name] = ty
            self.locals[name] = ty
        elif old != ty:
            self.type_error(node, "local-retyped", name=name, old=old, ty=ty)

    def assign_value(self, name: str, value: ir.Expr, node: ast.AST) -> ir.Assign:
        self.past_loop().discard(name)
        self.facts = {f for f in self.facts if f[0] != name}
        old = self.vars.get(name)
        if old is None:
            ty = value.ty
            if isinstance(ty, (VoidTy, SliceTy, SharedTy, LocalArrayTy, TupleTy)):
                self.type_error(node, "assign-local", ty=ty)
            self.declare(name, ty, node)
        else:
            value = self.coerce(value, old, node, f"`{name}`")
        self.note_assign(name, value)
        return ir.Assign(name, value, self.span(node))

    def visit_Assign(self, node: ast.Assign) -> list[ir.Stmt]:
        if len(node.targets) != 1:
            self.unsupported(node, "chained-assignment")
        target = node.targets[0]
        if isinstance(target, ast.Name):
            self.collective_site = node.value  # a collective may be this whole value
            if isinstance(node.value, ast.Call) and (self.tag(node.value.func) or ("",))[0] == "shared_array":
                return self.shared_decl(target.id, node.value)
            if isinstance(node.value, ast.Call) and self.tag(node.value.func) == ("local_array",):
                return self.local_decl(target.id, node.value)
            value = self.expr(node.value)
            self.local_escape(value, node.value)
            if isinstance(value.ty, TupleTy):
                self.type_error(node.value, "tuple-bind", help="unpack-bind-help", ty=value.ty, name=target.id)
            return [self.assign_value(target.id, value, node)]
        if isinstance(target, ast.Subscript):
            return [self.store(target, self.expr(node.value), node)]
        if isinstance(target, ast.Tuple):
            return self.unpack(target, node.value, node)
        self.unsupported(target, "assign-to", target=ast.unparse(target))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> list[ir.Stmt]:
        if not isinstance(node.target, ast.Name):
            self.unsupported(node.target, "annotated-assignment-anything-name")
        ty = self.resolve_type(node.annotation, f"`{node.target.id}`")
        if not isinstance(ty, (ScalarTy, WitnessTy)):
            self.type_error(node.annotation, "local-s-annotation-must")
        self.declare(node.target.id, ty, node)
        if node.value is None:
            return []
        self.collective_site = node.value  # a collective may be this whole value
        return [self.assign_value(node.target.id, self.expr(node.value), node)]

    def visit_AugAssign(self, node: ast.AugAssign) -> list[ir.Stmt]:
        op = _BINOPS.get(type(node.op))
        if op is None:
            self.generic_visit(node.op)
        if isinstance(node.target, ast.Name):
            cur = self.load_name(node.target)
            val = self.exprs[node] = self.binop(op, cur, self.expr(node.value), node)  # (the operation's type)
            return [self.assign_value(node.target.id, val, node)]
        if isinstance(node.target, ast.Subscript):
            cur = self.subscript(node.target, for_update=True)
            return [self.store(node.target, self.binop(op, cur, self.expr(node.value), node), node)]
        self.unsupported(node.target, "augmented-assignment", target=ast.unparse(node.target))

    def visit_If(self, node: ast.If) -> list[ir.Stmt]:
        cond = self.truth(self.expr(node.test), node.test)
        saved = set(self.facts)
        saved_r = self.rfacts
        assigned = _assigned(node.body) | _assigned(node.orelse)
        true_r, false_r = self.guard_facts(cond, False), self.guard_facts(cond, True)
        self.facts = saved | self._guard_facts(node.test, negated=False)
        self.rfacts = saved_r | true_r
        lead = collectives.is_leader_test(self, node.test)
        self.leader += lead
        body = self.body(node.body)
        self.leader -= lead
        self.facts = saved | self._guard_facts(node.test, negated=True)
        self.rfacts = saved_r | false_r
        orelse = self.body(node.orelse)
        self.facts = {f for f in saved if f[0] not in assigned}
        self.rfacts = saved_r
        self.kill_facts(assigned)
        self._if_false_facts = false_r
        return [ir.If(cond, body, orelse, self.span(node))]

    def _guard_facts(self, test: ast.expr, *, negated: bool) -> set[tuple[str, str]]:
        """(witness, slice) pairs that `test` (or its negation) proves in range."""
        out: set[tuple[str, str]] = set()
        if negated:
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                return self._guard_facts(test.operand, negated=False)
            if (
                isinstance(test, ast.Compare)
                and len(test.ops) == 1
                and isinstance(test.ops[0], ast.NotIn)
            ):
                return self._contains_fact(test.left, test.comparators[0])
            return out
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            for v in test.values:
                out |= self._guard_facts(v, negated=False)
            return out
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In):
            return self._contains_fact(test.left, test.comparators[0])
        return out

    def _contains_fact(self, w: ast.expr, s: ast.expr) -> set[tuple[str, str]]:
        if not (isinstance(w, ast.Name) and isinstance(s, ast.Name)):
            return set()
        if not isinstance(self.vars.get(w.id), WitnessTy) or s.id not in self.slices:
            return set()
        return {(w.id, other) for other in self.equal_class(s.id)}

    def equal_class(self, name: str) -> set[str]:
        """`name` and every slice `requires` proves to have the same length (shape for 2-D)."""
        if not self.is_kernel:
            return {name}
        classes = {1: self.k.equal, 2: self.k.equal2d, 3: self.k.equal3d}[self.slices[name].rank]
        for c in classes:
            if name in c:
                return {n for n in c if n in self.slices and self.slices[n].rank == self.slices[name].rank}
        return {name}

    def loop_body(
        self, stmts: list[ast.stmt], extra: set[tuple[str, str]] = frozenset(), rextra: frozenset[Any] = frozenset()  # type: ignore[assignment]
    ) -> tuple[ir.Stmt, ...]:
        assigned = _assigned(stmts)
        self.facts = {f for f in self.facts if f[0] not in assigned}
        self.kill_facts(assigned)
        saved = set(self.facts)
        saved_r = self.rfacts
        self.facts |= extra
        self.rfacts |= rextra
        self.loops += 1
        try:
            return self.body(stmts)
        finally:
            self.loops -= 1
            self.facts = saved
            self.rfacts = saved_r

    def visit_While(self, node: ast.While) -> list[ir.Stmt]:
        if node.orelse:
            self.unsupported(node.orelse[0], "while-else")
        assigned = _assigned(node.body)
        self.facts = {f for f in self.facts if f[0] not in assigned}
        self.kill_facts(assigned)
        cond = self.truth(self.expr(node.test), node.test)
        return [ir.While(cond, self.loop_body(node.body, rextra=self.guard_facts(cond, False)), self.span(node))]

    def visit_For(self, node: ast.For) -> list[ir.Stmt]:
        if node.orelse:
            self.unsupported(node.orelse[0], "for-else")
        if not isinstance(node.target, ast.Name):
            self.unsupported(node.target, "target-other-than-single")
        it = node.iter
        tag = self.tag(it.func) if isinstance(it, ast.Call) else None
        if tag == ("builtin", "range"):
            return [self.for_range(node, it)]  # type: ignore[arg-type]
        if tag == ("witness", "grid_stride"):
            return [self.for_grid_stride(node, it)]  # type: ignore[arg-type]
        self.unsupported(it, "iteration-over-anything-range")

    def for_range(self, node: ast.For, call: ast.Call) -> ir.Stmt:
        if call.keywords or not 1 <= len(call.args) <= 3:
            self.type_error(call, "range-takes-1-3")
        args = [self.expr(a) for a in call.args]
        for a, n in zip(args, call.args, strict=True):
            if not isinstance(a.ty, ScalarTy) or not (a.ty.is_int or a.ty.is_bool):
                if isinstance(a.ty, WitnessTy) and a.ty.rank == 1:
                    continue
                self.type_error(n, "range-arguments-must-integers", ty=a.ty)
        args = [self.as_int(a) for a in args]
        if len(args) == 1:
            args = [ir.Const(0, I64, weak=True), args[0]]
        if len(args) == 2:
            args.append(ir.Const(1, I64, weak=True))
        if isinstance(args[2], ir.Const) and args[2].value == 0:
            self.fail(messages.type_error(self.span(call.args[2]), "range-step-must-zero"))
        strong = [a.ty for a in args if not (isinstance(a, ir.Const) and a.weak)]
        ty: ScalarTy = I64
        try:
            if strong:
                ty = strong[0]  # type: ignore[assignment]
                for t in strong[1:]:
                    ty = promote(ty, t)  # type: ignore[arg-type]
        except PromotionError as exc:
            self.fail(messages.promotion_error(self.span(call), exc))
        if ty.is_bool:
            ty = I64
        var = node.target.id  # type: ignore[attr-defined]
        existing = self.vars.get(var)
        if existing is not None and existing != ty:
            ty = existing  # type: ignore[assignment]
            if not isinstance(ty, ScalarTy) or not ty.is_int:
                self.type_error(node.target, "loop-variable-was-before", var=var, existing=existing)
        start, stop, step = (self.coerce(a, ty, n, "`range` argument") for a, n in zip(args, [call] * 3, strict=True))
        self.declare(var, ty, node.target)
        self.facts = {f for f in self.facts if f[0] != var}
        self.kill_facts({var})
        body = self.loop_body(node.body, rextra=self.note_range_loop(var, start, stop, step))
        return ir.ForRange(var, start, stop, step, body, self.span(node))

    def for_grid_stride(self, node: ast.For, call: ast.Call) -> ir.Stmt:
        if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Name):
            self.type_error(call, "thread-grid-stride-takes")
        name = call.args[0].id
        if name not in self.slices or self.slices[name].rank != 1:
            self.type_error(call.args[0], "thread-grid-stride-takes-2")
        self.note_rank(1, call)
        var = node.target.id  # type: ignore[attr-defined]
        self.declare(var, WitnessTy(1), node.target)
        site = self.rank_site(call)
        extra = {(var, other) for other in self.equal_class(name)}
        self.facts = {f for f in self.facts if f[0] != var}
        self.kill_facts({var})
        body = self.loop_body(node.body, extra)
        self.past_loop().add(var)  # its index is this thread's only inside the loop (typer_exprs.load_name)
        return ir.GridStride(var, ir.SliceRef(name, self.slices[name], self.span(call.args[0])), site, body, self.span(node))

    def past_loop(self) -> set[str]:
        """Grid-stride loop variables read after their loop is an error until bound again: their
        value there differs between backends (the last index, or the one past the end)."""
        got = self.__dict__.get("_past_loop")
        if got is None:
            got = self._past_loop = set()
        return got

    def visit_Break(self, node: ast.Break) -> list[ir.Stmt]:
        if not self.loops:
            self.type_error(node, "break-outside-loop")
        return [ir.Break(self.span(node))]

    def visit_Continue(self, node: ast.Continue) -> list[ir.Stmt]:
        if not self.loops:
            self.type_error(node, "continue-outside-loop")
        return [ir.Continue(self.span(node))]

    def visit_Return(self, node: ast.Return) -> list[ir.Stmt]:
        if node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None):
            if self.ret not in (None, VOID):
                self.type_error(node, "helper-returns-return-needs", ret=self.ret)
            self.ret = VOID
            return [ir.Return(None, self.span(node))]
        if self.is_kernel:
            self.type_error(node.value, "kernel-returns-nothing-write")
        if isinstance(node.value, ast.Tuple) or isinstance(self.ret, TupleTy):
            return self.tuple_return(node)  # typer_locals.py
        value = self.expr(node.value)
        self.local_escape(value, node.value, returned=True)
        if isinstance(value.ty, TupleTy):
            return self.tuple_return(node, value)
        if self.ret is None:
            if not isinstance(value.ty, (ScalarTy, WitnessTy)):
                self.type_error(node.value, "helper-return", ty=value.ty)
            self.ret = value.ty
        elif self.ret == VOID:
            self.type_error(node.value, "helper-returns-nothing-elsewhere")
        else:
            value = self.coerce(value, self.ret, node.value, "the return value")
        return [ir.Return(value, self.span(node))]

    def visit_With(self, node: ast.With) -> list[ir.Stmt]:
        if len(node.items) != 1 or node.items[0].optional_vars is not None:
            self.unsupported(node, "with-other")
        ctx = node.items[0].context_expr
        if not (isinstance(ctx, ast.Call) and not ctx.args and self.tag(ctx.func) == ("unsafe",)):
            self.unsupported(node, "with-other")
        self.unsafe += 1
        try:
            return list(self.body(node.body))
        finally:
            self.unsafe -= 1

    def need_unsafe(self, node: ast.AST, what: str) -> None:
        if not self.unsafe:
            self.fail(messages.unsafe_op(self.span(node), what.strip("`")))

    def shared_decl(self, name: str, call: ast.Call) -> list[ir.Stmt]:
        """`az.shared.array` / `dynamic_array` / `atomic_array`: safe (shared_safe.py)."""
        tag = self.tag(call.func)
        shape_node, dtype_node, atomic = shared_safe.decl_args(self, call, tag[1] if len(tag) > 1 else "")
        shape = self.const_value(shape_node) if shape_node is not None else 0
        dims = (shape,) if isinstance(shape, int) else shape
        if (
            not isinstance(dims, tuple)
            or not 1 <= len(dims) <= 2
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims)
        ):
            self.type_error(shape_node, "shared-array-s-shape")
        if 0 in dims and dims != (0,):
            self.type_error(shape_node, "dynamic-shared-1d")
        elem = self.resolve_type(dtype_node, "the shared array")
        if not isinstance(elem, ScalarTy):
            self.type_error(dtype_node, "shared-array-s-dtype")
        if name in self.vars or name in self.slices or name in self.shared:
            self.unsupported(call, "rebinding-shared-array", name=name)
        ty = SharedTy(elem, tuple(dims), atomic)
        shared_safe.check_decl(self, call, shape_node, ty)
        uname = name if name not in self.k.shared else f"{name}.{len(self.k.shared)}"
        self.k.shared[uname] = ty
        self.shared[name] = ty
        self.k.uses_shared = True
        self._shared_unique = getattr(self, "_shared_unique", {})
        self._shared_unique[name] = uname
        return [ir.SharedDecl(uname, ty, self.span(call))]

    def shared_ref(self, name: str, node: ast.AST) -> ir.SharedRef:
        uname = getattr(self, "_shared_unique", {}).get(name, name)
        return ir.SharedRef(uname, self.shared[name], self.span(node))

    def const_value(self, node: ast.expr) -> Any:
        try:
            return ast.literal_eval(node)
        except ValueError:
            pass
        if isinstance(node, ast.Tuple):
            return tuple(self.const_value(e) for e in node.elts)
        if isinstance(node, ast.Name) and self.is_kernel:
            if node.id in self.k.consts:
                return self.k.consts[node.id]
            if node.id in self.k.unknown_consts:
                return 1  # checked without a value: the specialisation checks the real one
        s = self.sym(node)
        if s.kind == "constant":
            return s.value
        self.type_error(node, "must-compile-time-constant", expr=ast.unparse(node))

    # ---- calls used as statements --------------------------------------------------------
    def statement_call(self, call: ast.Call) -> list[ir.Stmt] | None:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "write_unchecked" and isinstance(f.value, ast.Name):
            name = f.value.id
            if name in self.slices:
                return [self.write_unchecked(name, call)]
        tag = self.tag(f) if isinstance(f, (ast.Name, ast.Attribute)) else None
        if tag == ("barrier",):  # safe: the phase discipline is az-shared-race's
            if call.args or call.keywords:
                self.type_error(call, "syncthreads-takes-arguments")
            self.k.uses_barrier = True
            return [ir.Barrier(self.span(call))]
        if tag is not None and tag[0] == "fence":  # az.threadfence(), az.warp.sync(): safe
            self.arity(call, 0, "threadfence" if tag[1] == "threadfence" else "warp.sync")
            if call.keywords:
                self.unsupported(call.keywords[0], "keyword-arguments-kernel-call")
            if tag[1] == "warp_sync":
                self.k.uses_warp = True  # the CPU backend runs the warp's lanes as threads
            return [ir.Fence(tag[1], self.span(call))]
        if tag == ("print",):
            return self.print_stmt(call)
        if tag == ("breakpoint",):
            return self.breakpoint_stmt(call)
        return None

    def write_unchecked(self, name: str, call: ast.Call) -> ir.Stmt:
        self.need_unsafe(call, "`write_unchecked`")
        sty = self.slices[name]
        if not sty.kind.disjoint:
            self.type_error(call, "write-unchecked-method-disjoint", sty=sty)
        if len(call.args) != 2 or call.keywords:
            self.type_error(call, "write-unchecked-takes-index")
        idx_node, val_node = call.args
        if sty.rank >= 2:
            if not isinstance(idx_node, ast.Tuple) or len(idx_node.elts) != sty.rank:
                self.type_error(idx_node, "write-unchecked-nd", rank=sty.rank, axes=_AXES_TEXT[sty.rank])
            index = tuple(self.as_index(self.expr(e), e) for e in idx_node.elts)
        else:
            index = (self.as_index(self.expr(idx_node), idx_node),)
        value = self.coerce(self.expr(val_node), sty.elem, val_node, f"an element of `{name}`")
        span = self.span(call)
        ref = ir.SliceRef(name, sty, self.span(call.func))
        if self.slice_in_range(name, index):
            return ir.Write(ref, index, value, False, -1, span)
        return ir.Write(ref, index, value, True, self.k.site(span, "write", name), span)



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
            tuple(ptypes.items()),
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


def _reserved_names(front: Any, fdef: ast.FunctionDef) -> list[Diagnostic]:
    """Names in a kernel that collide with the compiler's own symbols."""
    out: list[Diagnostic] = []
    if RESERVED_PREFIX not in front.source:  # (no walk of the kernel when no name could collide)
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
    compiler, warps = _tile_hook(front, fdef, ptypes)
    comp = compiler(k, fdef, ptypes, is_kernel=True, ret=VOID)
    body = comp.body(fdef.body)
    k.views.append(FnTypes(fdef, comp.exprs, comp.vars, tuple(sorted(spec.items())), frozenset(k.unknown_consts)))
    if k.diags:
        raise CheckError(k.diags) from None
    domain = contract.domain if contract is not None else (max(k.ranks) if k.ranks else 1)
    return ir.KernelIR(
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
        shared=tuple(k.shared.items()),
        tile_warps=warps,
    )


def _tile_hook(front: Any, fdef: ast.FunctionDef, ptypes: dict[str, Ty]) -> tuple[type, int]:
    """The function compiler of a kernel's body: the tile typer (`typer_tiles.py`) and its
    `num_warps` for an `@az.tile_kernel`, else the SIMT one and 0."""
    if front.symbols.tile_decorator(fdef) is None:
        return _FnCompiler, 0
    from anodize.language.typer_tiles import TileCompiler, check_tile_params, num_warps

    warps, diags = num_warps(front, fdef)
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

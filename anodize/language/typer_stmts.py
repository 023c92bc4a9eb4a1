"""The typer's statements: assignments and declarations, `if` with its guard facts, loops
(`range`, grid-stride), `break`/`continue`/`return`, `with az.unsafe()`, shared-array
declarations, and calls used as statements (barriers, fences, `write_unchecked`).  `StmtTyper`
is the typer's collaborator for them (`FnTyper.stmts`, typer_fn.py)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from anodize.language import ir, messages
from anodize.language.intrinsics import INTRINSICS, WRITE_UNCHECKED, method
from anodize.language.record_types import RecordTy
from anodize.language.typer_base import _AXES_TEXT, _BINOPS, _assigned
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, static_shared_bytes
from anodize.language.types import I64, VOID, LocalArrayTy, PromotionError, ScalarTy, SharedTy, SliceTy, TupleTy, Ty, VoidTy, WitnessTy, promote

if TYPE_CHECKING:
    from anodize.language.typer_fn import FnTyper


class StmtTyper:
    """Statements of one function body."""

    def __init__(self, fn: FnTyper):
        self.fn = fn
        self.st = fn.st

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
        return [ir.ExprStmt(self.fn.expr(v), self.st.span(node))]

    def declare(self, name: str, ty: Ty, node: ast.AST) -> None:
        self.st.past_loop.discard(name)
        if name in self.st.slices or name in self.st.shared:
            self.st.unsupported(node, "rebinding-slice", name=name)
        if name in self.st.arrays:
            self.st.unsupported(node, "rebinding-local-array", help="local-array-escape-help", name=name)
        old = self.st.vars.get(name)
        if old is None:
            self.st.vars[name] = ty
            self.st.locals[name] = ty
        elif old != ty:
            self.st.type_error(node, "local-retyped", name=name, old=old, ty=ty)

    def assign_value(self, name: str, value: ir.Expr, node: ast.AST) -> ir.Assign:
        self.st.past_loop.discard(name)
        self.st.facts = {f for f in self.st.facts if f[0] != name}
        old = self.st.vars.get(name)
        if old is None:
            ty = value.ty
            if isinstance(ty, (VoidTy, SliceTy, SharedTy, LocalArrayTy, TupleTy)):
                self.st.type_error(node, "assign-local", ty=ty)
            self.declare(name, ty, node)
        else:
            value = self.fn.exprs.coerce(value, old, node, f"`{name}`")
        self.fn.ranges.note_assign(name, value)
        return ir.Assign(name, value, self.st.span(node))

    def visit_Assign(self, node: ast.Assign) -> list[ir.Stmt]:
        if len(node.targets) != 1:
            self.st.unsupported(node, "chained-assignment")
        target = node.targets[0]
        if isinstance(target, ast.Name):
            self.st.collective_site = node.value  # a collective may be this whole value
            if isinstance(node.value, ast.Call) and (self.fn.names.tag(node.value.func) or ("",))[0] == "shared_array":
                return self.shared_decl(target.id, node.value)
            if isinstance(node.value, ast.Call) and self.fn.names.tag(node.value.func) == ("local_array",):
                return self.fn.local_values.local_decl(target.id, node.value)
            pre, bound = self.fn.records.value(node.value)
            value = self.fn.expr(node.value) if bound is None else bound
            if isinstance(value, ir.RecordValue):  # `r = p[i]`, `r = Rec(...)`, `r = f(x)` (typer_records.py)
                return pre + self.fn.records.assign_local(target.id, value, node)
            self.fn.local_values.local_escape(value, node.value)
            if isinstance(value.ty, TupleTy):
                self.st.type_error(node.value, "tuple-bind", help="unpack-bind-help", ty=value.ty, name=target.id)
            return [self.assign_value(target.id, value, node)]
        if isinstance(target, (ast.Attribute, ast.Subscript)) and self.fn.records.rooted(target):
            pre, bound = self.fn.records.value(node.value)  # `out[i] = f(x)`: the call first, as Python does
            return pre + self.fn.records.store(target, node.value, node, typed=bound)  # `out[i] = Rec(...)`, `out[i].v = x`
        if isinstance(target, ast.Subscript):
            return [self.fn.exprs.store(target, self.fn.expr(node.value), node)]
        if isinstance(target, ast.Tuple):
            return self.fn.local_values.unpack(target, node.value, node)
        self.st.unsupported(target, "assign-to", target=ast.unparse(target))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> list[ir.Stmt]:
        if not isinstance(node.target, ast.Name):
            self.st.unsupported(node.target, "annotated-assignment-anything-name")
        ty = self.fn.names.resolve_type(node.annotation, f"`{node.target.id}`")
        if isinstance(ty, RecordTy) and node.value is not None:  # `r: Rec = p[i]`
            pre, bound = self.fn.records.value(node.value)
            value = self.fn.expr(node.value) if bound is None else bound
            if not (isinstance(value, ir.RecordValue) and value.ty == ty):
                self.st.type_error(node.value, "expected-found", want=ty, what=f"`{node.target.id}`", got=value.ty)
            return pre + self.fn.records.assign_local(node.target.id, value, node)
        if not isinstance(ty, (ScalarTy, WitnessTy)):
            self.st.type_error(node.annotation, "local-s-annotation-must")
        self.declare(node.target.id, ty, node)
        if node.value is None:
            return []
        self.st.collective_site = node.value  # a collective may be this whole value
        return [self.assign_value(node.target.id, self.fn.expr(node.value), node)]

    def visit_AugAssign(self, node: ast.AugAssign) -> list[ir.Stmt]:
        op = _BINOPS.get(type(node.op))
        if op is None:
            self.fn.generic_visit(node.op)
        if isinstance(node.target, ast.Name):
            cur = self.fn.exprs.load_name(node.target)
            val = self.st.typed[node] = self.fn.exprs.binop(op, cur, self.fn.expr(node.value), node)  # (the operation's type)
            return [self.assign_value(node.target.id, val, node)]
        if isinstance(node.target, (ast.Attribute, ast.Subscript)) and self.fn.records.rooted(node.target):
            return self.fn.records.store(node.target, node.value, node, op=op)  # `out[i].v += x`
        if isinstance(node.target, ast.Subscript):
            cur = self.fn.exprs.subscript(node.target, for_update=True)
            return [self.fn.exprs.store(node.target, self.fn.exprs.binop(op, cur, self.fn.expr(node.value), node), node)]
        self.st.unsupported(node.target, "augmented-assignment", target=ast.unparse(node.target))

    def visit_If(self, node: ast.If) -> list[ir.Stmt]:
        cond = self.fn.exprs.truth(self.fn.expr(node.test), node.test)
        saved = set(self.st.facts)
        saved_r = self.st.rfacts
        assigned = _assigned(node.body) | _assigned(node.orelse)
        true_r, false_r = self.fn.ranges.guard_facts(cond, False), self.fn.ranges.guard_facts(cond, True)
        self.st.facts = saved | self.witness_guard_facts(node.test, negated=False)
        self.st.rfacts = saved_r | true_r
        lead = self.fn.collectives.is_leader_test(node.test)
        self.st.leader += lead
        body = self.fn.body(node.body)
        self.st.leader -= lead
        self.st.facts = saved | self.witness_guard_facts(node.test, negated=True)
        self.st.rfacts = saved_r | false_r
        orelse = self.fn.body(node.orelse)
        self.st.facts = {f for f in saved if f[0] not in assigned}
        self.st.rfacts = saved_r
        self.fn.ranges.kill_facts(assigned)
        self.st.if_false_facts = false_r
        return [ir.If(cond, body, orelse, self.st.span(node))]

    def witness_guard_facts(self, test: ast.expr, *, negated: bool) -> set[tuple[str, str]]:
        """(witness, slice) pairs that `test` (or its negation) proves in range."""
        out: set[tuple[str, str]] = set()
        if negated:
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                return self.witness_guard_facts(test.operand, negated=False)
            if (
                isinstance(test, ast.Compare)
                and len(test.ops) == 1
                and isinstance(test.ops[0], ast.NotIn)
            ):
                return self._contains_fact(test.left, test.comparators[0])
            return out
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            for v in test.values:
                out |= self.witness_guard_facts(v, negated=False)
            return out
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In):
            return self._contains_fact(test.left, test.comparators[0])
        return out

    def _contains_fact(self, w: ast.expr, s: ast.expr) -> set[tuple[str, str]]:
        if not (isinstance(w, ast.Name) and isinstance(s, ast.Name)):
            return set()
        if not isinstance(self.st.vars.get(w.id), WitnessTy) or s.id not in self.st.slices:
            return set()
        return {(w.id, other) for other in self.equal_class(s.id)}

    def equal_class(self, name: str) -> set[str]:
        """`name` and every slice `requires` proves to have the same length (shape for 2-D)."""
        if not self.st.is_kernel:
            return {name}
        classes = {1: self.st.k.equal, 2: self.st.k.equal2d, 3: self.st.k.equal3d}[self.st.slices[name].rank]
        for c in classes:
            if name in c:
                return {n for n in c if n in self.st.slices and self.st.slices[n].rank == self.st.slices[name].rank}
        return {name}

    def loop_body(
        self, stmts: list[ast.stmt], extra: set[tuple[str, str]] = frozenset(), rextra: frozenset[Any] = frozenset()  # type: ignore[assignment]
    ) -> tuple[ir.Stmt, ...]:
        assigned = _assigned(stmts)
        self.st.facts = {f for f in self.st.facts if f[0] not in assigned}
        self.fn.ranges.kill_facts(assigned)
        saved = set(self.st.facts)
        saved_r = self.st.rfacts
        self.st.facts |= extra
        self.st.rfacts |= rextra
        self.st.loops += 1
        try:
            return self.fn.body(stmts)
        finally:
            self.st.loops -= 1
            self.st.facts = saved
            self.st.rfacts = saved_r

    def visit_While(self, node: ast.While) -> list[ir.Stmt]:
        if node.orelse:
            self.st.unsupported(node.orelse[0], "while-else")
        assigned = _assigned(node.body)
        self.st.facts = {f for f in self.st.facts if f[0] not in assigned}
        self.fn.ranges.kill_facts(assigned)
        cond = self.fn.exprs.truth(self.fn.expr(node.test), node.test)
        loop = ir.While(cond, self.loop_body(node.body, rextra=self.fn.ranges.guard_facts(cond, False)), self.st.span(node))
        (self.st.k.unsafe_loops if self.st.unsafe else self.st.k.loops).append(loop)
        return [loop]

    def visit_For(self, node: ast.For) -> list[ir.Stmt]:
        if node.orelse:
            self.st.unsupported(node.orelse[0], "for-else")
        if not isinstance(node.target, ast.Name):
            self.st.unsupported(node.target, "target-other-than-single")
        it = node.iter
        tag = self.fn.names.tag(it.func) if isinstance(it, ast.Call) else None
        if tag == ("builtin", "range"):
            return [self.for_range(node, it)]  # type: ignore[arg-type]
        if tag == ("witness", "grid_stride"):
            return [self.for_grid_stride(node, it)]  # type: ignore[arg-type]
        self.st.unsupported(it, "iteration-over-anything-range")

    def for_range(self, node: ast.For, call: ast.Call) -> ir.Stmt:
        if call.keywords or not 1 <= len(call.args) <= 3:
            self.st.type_error(call, "range-takes-1-3")
        args = [self.fn.expr(a) for a in call.args]
        for a, n in zip(args, call.args, strict=True):
            if not isinstance(a.ty, ScalarTy) or not (a.ty.is_int or a.ty.is_bool):
                if isinstance(a.ty, WitnessTy) and a.ty.rank == 1:
                    continue
                self.st.type_error(n, "range-arguments-must-integers", ty=a.ty)
        args = [self.fn.exprs.as_int(a) for a in args]
        if len(args) == 1:
            args = [ir.Const(0, I64, weak=True), args[0]]
        if len(args) == 2:
            args.append(ir.Const(1, I64, weak=True))
        if isinstance(args[2], ir.Const) and args[2].value == 0:
            self.st.fail(messages.type_error(self.st.span(call.args[2]), "range-step-must-zero"))
        strong = [a.ty for a in args if not (isinstance(a, ir.Const) and a.weak)]
        ty: ScalarTy = I64
        try:
            if strong:
                ty = strong[0]  # type: ignore[assignment]
                for t in strong[1:]:
                    ty = promote(ty, t)  # type: ignore[arg-type]
        except PromotionError as exc:
            self.st.fail(messages.promotion_error(self.st.span(call), exc))
        if ty.is_bool:
            ty = I64
        var = node.target.id  # type: ignore[attr-defined]
        existing = self.st.vars.get(var)
        if existing is not None and existing != ty:
            ty = existing  # type: ignore[assignment]
            if not isinstance(ty, ScalarTy) or not ty.is_int:
                self.st.type_error(node.target, "loop-variable-was-before", var=var, existing=existing)
        start, stop, step = (self.fn.exprs.coerce(a, ty, n, "`range` argument") for a, n in zip(args, [call] * 3, strict=True))
        self.declare(var, ty, node.target)
        self.st.facts = {f for f in self.st.facts if f[0] != var}
        self.fn.ranges.kill_facts({var})
        outer = self.st.loop_ranges.pop(var, None)
        span = _constant_range(start, stop, step)
        if span is not None and not _assigns(node.body, var):
            self.st.loop_ranges[var] = span
        try:
            body = self.loop_body(node.body, rextra=self.fn.ranges.note_range_loop(var, start, stop, step))
        finally:
            self.st.loop_ranges.pop(var, None)
            if outer is not None:
                self.st.loop_ranges[var] = outer
        return ir.ForRange(var, start, stop, step, body, self.st.span(node))

    def for_grid_stride(self, node: ast.For, call: ast.Call) -> ir.Stmt:
        if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Name):
            self.st.type_error(call, "thread-grid-stride-takes")
        name = call.args[0].id
        if name not in self.st.slices or self.st.slices[name].rank != 1:
            self.st.type_error(call.args[0], "thread-grid-stride-takes-2")
        self.fn.calls.note_rank(1, call)
        var = node.target.id  # type: ignore[attr-defined]
        self.declare(var, WitnessTy(1), node.target)
        site = self.fn.calls.rank_site(call)
        extra = {(var, other) for other in self.equal_class(name)}
        self.st.facts = {f for f in self.st.facts if f[0] != var}
        self.fn.ranges.kill_facts({var})
        body = self.loop_body(node.body, extra)
        self.st.past_loop.add(var)  # its index is this thread's only inside the loop (typer_exprs.load_name)
        return ir.GridStride(var, ir.SliceRef(name, self.st.slices[name], self.st.span(call.args[0])), site, body, self.st.span(node))

    def visit_Break(self, node: ast.Break) -> list[ir.Stmt]:
        if not self.st.loops:
            self.st.type_error(node, "break-outside-loop")
        return [ir.Break(self.st.span(node))]

    def visit_Continue(self, node: ast.Continue) -> list[ir.Stmt]:
        if not self.st.loops:
            self.st.type_error(node, "continue-outside-loop")
        return [ir.Continue(self.st.span(node))]

    def visit_Return(self, node: ast.Return) -> list[ir.Stmt]:
        if node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None):
            if self.st.ret not in (None, VOID):
                self.st.type_error(node, "helper-returns-return-needs", ret=self.st.ret)
            self.st.ret = VOID
            return [ir.Return(None, self.st.span(node))]
        if self.st.is_kernel:
            self.st.type_error(node.value, "kernel-returns-nothing-write")
        if isinstance(node.value, ast.Tuple) or isinstance(self.st.ret, TupleTy):
            return self.fn.local_values.tuple_return(node)  # typer_locals.py
        pre, bound = self.fn.records.value(node.value)  # (a record-returning helper's result bound first)
        value = self.fn.expr(node.value) if bound is None else bound
        self.fn.local_values.local_escape(value, node.value, returned=True)
        if isinstance(value.ty, TupleTy):
            return self.fn.local_values.tuple_return(node, value)
        if isinstance(value, ir.RecordValue) or isinstance(self.st.ret, RecordTy):
            return pre + self.fn.records.return_value(value, node)
        if self.st.ret is None:
            if not isinstance(value.ty, (ScalarTy, WitnessTy)):
                self.st.type_error(node.value, "helper-return", ty=value.ty)
            self.st.ret = value.ty
        elif self.st.ret == VOID:
            self.st.type_error(node.value, "helper-returns-nothing-elsewhere")
        else:
            value = self.fn.exprs.coerce(value, self.st.ret, node.value, "the return value")
        return [ir.Return(value, self.st.span(node))]

    def visit_With(self, node: ast.With) -> list[ir.Stmt]:
        if len(node.items) != 1 or node.items[0].optional_vars is not None:
            self.st.unsupported(node, "with-other")
        ctx = node.items[0].context_expr
        if not (isinstance(ctx, ast.Call) and not ctx.args and self.fn.names.tag(ctx.func) == ("unsafe",)):
            self.st.unsupported(node, "with-other")
        self.st.unsafe += 1
        try:
            return list(self.fn.body(node.body))
        finally:
            self.st.unsafe -= 1

    def shared_decl(self, name: str, call: ast.Call) -> list[ir.Stmt]:
        """`az.shared.array` / `dynamic_array` / `atomic_array`: safe (shared_safe.py)."""
        tag = self.fn.names.tag(call.func)
        shape_node, dtype_node, atomic = self.fn.shared_mem.decl_args(call, tag[1] if len(tag) > 1 else "")
        shape = self.fn.names.const_value(shape_node) if shape_node is not None else 0
        dims = (shape,) if isinstance(shape, int) else shape
        if (
            not isinstance(dims, tuple)
            or not 1 <= len(dims) <= 2
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims)
        ):
            self.st.type_error(shape_node, "shared-array-s-shape")
        if 0 in dims and dims != (0,):
            self.st.type_error(shape_node, "dynamic-shared-1d")
        elem = self.fn.names.resolve_type(dtype_node, "the shared array")
        if not isinstance(elem, ScalarTy):
            self.st.type_error(dtype_node, "shared-array-s-dtype")
        if name in self.st.vars or name in self.st.slices or name in self.st.shared:
            self.st.unsupported(call, "rebinding-shared-array", name=name)
        ty = SharedTy(elem, tuple(dims), atomic)
        self.fn.shared_mem.check_decl(call, shape_node, ty)
        uname = name if name not in self.st.k.shared else f"{name}.{len(self.st.k.shared)}"
        self.st.k.shared[uname] = ty
        nbytes = static_shared_bytes(self.st.k.shared)
        if nbytes > STATIC_SHARED_MAX_BYTES:
            self.st.k.diags.append(messages.type_error(self.st.span(call), "shared-too-large", help="shared-too-large", name=name,
                                                    nbytes=nbytes, limit=STATIC_SHARED_MAX_BYTES))
        self.st.shared[name] = ty
        self.st.k.uses_shared = True
        self.st.shared_unique[name] = uname
        return [ir.SharedDecl(uname, ty, self.st.span(call))]

    # ---- calls used as statements --------------------------------------------------------
    def statement_call(self, call: ast.Call) -> list[ir.Stmt] | None:
        f = call.func
        if isinstance(f, ast.Attribute) and method("slice", f.attr) is WRITE_UNCHECKED and isinstance(f.value, ast.Name):
            name = f.value.id
            if name in self.st.slices:
                return [self.write_unchecked(name, call)]
        tag = self.fn.names.tag(f) if isinstance(f, (ast.Name, ast.Attribute)) else None
        if tag == ("barrier",):  # safe: the phase discipline is az-shared-race's
            if call.args or call.keywords:
                self.st.type_error(call, "syncthreads-takes-arguments")
            self.st.k.uses_barrier = True
            return [ir.Barrier(self.st.span(call))]
        if tag == ("barrier", "grid"):  # az.grid.sync(): a cooperative kernel's own body (grid_sync.py)
            if call.args or call.keywords:
                self.st.type_error(call, "syncthreads-takes-arguments")
            if not self.st.is_kernel:
                self.st.unsupported(call, "grid-sync-in-helper", help="grid-sync-in-kernel")
            contract = self.st.k.contract
            if contract is None or not contract.cooperative:
                self.st.fail(messages.grid_sync_not_cooperative(self.st.span(call)))
            self.st.k.uses_barrier = True
            self.st.k.grid_syncs = True
            return [ir.Barrier(self.st.span(call), grid=True)]
        if tag is not None and tag[0] == "fence":  # az.threadfence(), az.warp.sync(): safe
            self.fn.calls.arity(call, INTRINSICS[self.fn.names.sym(f).name], "threadfence" if tag[1] == "threadfence" else "warp.sync")
            if call.keywords:
                self.st.unsupported(call.keywords[0], "keyword-arguments-kernel-call")
            if tag[1] == "warp_sync":
                self.st.k.uses_warp = True  # the CPU backend runs the warp's lanes as threads
            return [ir.Fence(tag[1], self.st.span(call))]
        if tag == ("print",):
            return self.fn.effects.print_stmt(call)
        if tag == ("breakpoint",):
            return self.fn.effects.breakpoint_stmt(call)
        return None

    def write_unchecked(self, name: str, call: ast.Call) -> ir.Stmt:
        self.st.need_unsafe(call, "`write_unchecked`")
        sty = self.st.slices[name]
        if not sty.kind.disjoint:
            self.st.type_error(call, "write-unchecked-method-disjoint", sty=sty)
        if not WRITE_UNCHECKED.takes(len(call.args)) or call.keywords:
            self.st.type_error(call, "write-unchecked-takes-index")
        idx_node, val_node = call.args
        if sty.rank >= 2:
            if not isinstance(idx_node, ast.Tuple) or len(idx_node.elts) != sty.rank:
                self.st.type_error(idx_node, "write-unchecked-nd", rank=sty.rank, axes=_AXES_TEXT[sty.rank])
            index = tuple(self.fn.exprs.as_index(self.fn.expr(e), e) for e in idx_node.elts)
        else:
            index = (self.fn.exprs.as_index(self.fn.expr(idx_node), idx_node),)
        value = self.fn.exprs.coerce(self.fn.expr(val_node), sty.elem, val_node, f"an element of `{name}`")
        span = self.st.span(call)
        ref = ir.SliceRef(name, sty, self.st.span(call.func))
        if self.fn.ranges.slice_in_range(name, index):
            return ir.Write(ref, index, value, False, -1, span)
        return ir.Write(ref, index, value, True, self.st.k.site(span, "write", name), span)


def _constant_range(start: ir.Expr, stop: ir.Expr, step: ir.Expr) -> tuple[int, int] | None:
    """`(lo, hi)` of the values `range(start, stop, step)` of constants takes (None: not constants,
    or empty)."""
    vals = [e.value for e in (start, stop, step) if isinstance(e, ir.Const) and type(e.value) is int]
    if len(vals) != 3:
        return None
    r = range(*vals)
    return (min(r[0], r[-1]), max(r[0], r[-1])) if len(r) else None


def _assigns(body: list[ast.stmt], name: str) -> bool:
    """Whether `body` binds `name` anywhere (an assignment, a loop target, a `with ... as`)."""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del))
               for stmt in body for n in ast.walk(stmt))

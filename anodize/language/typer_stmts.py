"""The typer's statements: assignments and declarations, `if` with its guard facts, loops
(`range`, grid-stride), `break`/`continue`/`return`, `with az.unsafe()`, shared-array
declarations, and calls used as statements (barriers, fences, `write_unchecked`).  A mixin
of `_FnCompiler` (typer.py)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from anodize.language import collectives, ir, messages, shared_safe, typer_records
from anodize.language.record_types import RecordTy
from anodize.language.typer_base import _AXES_TEXT, _BINOPS, _assigned
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, static_shared_bytes
from anodize.language.types import I64, VOID, LocalArrayTy, PromotionError, ScalarTy, SharedTy, SliceTy, TupleTy, Ty, VoidTy, WitnessTy, promote

if TYPE_CHECKING:
    from anodize.language.typer import _FnCompiler as _Base  # type: ignore[attr-defined]
else:
    _Base = object


class StmtTyping(_Base):
    """Statements of the typer's function compiler."""

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
            if isinstance(value, ir.RecordValue):  # `r = p[i]`, `r = Rec(...)` (typer_records.py)
                return typer_records.assign_local(self, target.id, value, node)
            self.local_escape(value, node.value)
            if isinstance(value.ty, TupleTy):
                self.type_error(node.value, "tuple-bind", help="unpack-bind-help", ty=value.ty, name=target.id)
            return [self.assign_value(target.id, value, node)]
        if isinstance(target, (ast.Attribute, ast.Subscript)) and typer_records.rooted(self, target):
            return typer_records.store(self, target, node.value, node)  # `out[i] = Rec(...)`, `out[i].v = x`
        if isinstance(target, ast.Subscript):
            return [self.store(target, self.expr(node.value), node)]
        if isinstance(target, ast.Tuple):
            return self.unpack(target, node.value, node)
        self.unsupported(target, "assign-to", target=ast.unparse(target))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> list[ir.Stmt]:
        if not isinstance(node.target, ast.Name):
            self.unsupported(node.target, "annotated-assignment-anything-name")
        ty = self.resolve_type(node.annotation, f"`{node.target.id}`")
        if isinstance(ty, RecordTy) and node.value is not None:  # `r: Rec = p[i]`
            value = self.expr(node.value)
            if not (isinstance(value, ir.RecordValue) and value.ty == ty):
                self.type_error(node.value, "expected-found", want=ty, what=f"`{node.target.id}`", got=value.ty)
            return typer_records.assign_local(self, node.target.id, value, node)
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
        if isinstance(node.target, (ast.Attribute, ast.Subscript)) and typer_records.rooted(self, node.target):
            return typer_records.store(self, node.target, node.value, node, op=op)  # `out[i].v += x`
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
        loop = ir.While(cond, self.loop_body(node.body, rextra=self.guard_facts(cond, False)), self.span(node))
        (self.k.unsafe_loops if self.unsafe else self.k.loops).append(loop)
        return [loop]

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
        nbytes = static_shared_bytes(self.k.shared)
        if nbytes > STATIC_SHARED_MAX_BYTES:
            self.k.diags.append(messages.type_error(self.span(call), "shared-too-large", help="shared-too-large", name=name,
                                                    nbytes=nbytes, limit=STATIC_SHARED_MAX_BYTES))
        self.shared[name] = ty
        self.k.uses_shared = True
        self._shared_unique = getattr(self, "_shared_unique", {})
        self._shared_unique[name] = uname
        return [ir.SharedDecl(uname, ty, self.span(call))]

    def shared_ref(self, name: str, node: ast.AST) -> ir.SharedRef:
        uname = getattr(self, "_shared_unique", {}).get(name, name)
        return ir.SharedRef(uname, self.shared[name], self.span(node))

    def const_value(self, node: ast.expr) -> Any:
        """A compile-time value: a literal, a tuple of them, a module constant (every binding form
        `symbols.constant` reads), an `az.Constant` parameter, or arithmetic over those
        (`(TILE, TILE + 1)`, `BM * 2`)."""
        try:
            return ast.literal_eval(node)
        except ValueError:
            pass
        if isinstance(node, ast.Tuple):
            return tuple(self.const_value(e) for e in node.elts)
        env: dict[str, Any] = {}
        if self.is_kernel:
            own = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            env = {n: self.k.consts[n] for n in own if n in self.k.consts}
            env.update({n: 1 for n in own if n in self.k.unknown_consts})  # checked without a value: the specialisation checks the real one
        got = self.symbols.constant(node, env)
        if got is not None:
            return got[0]
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

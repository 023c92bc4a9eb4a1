"""The kernel model's abstract interpreter, statements: assignments, branches, loops to a
fixed point, returns and breaks under thread-dependent control, `with az.unsafe()`.
`StatementFlow` is a collaborator of the interpreter over its shared state (`FlowState`,
checker/kernel_state.py); expressions are `ExprFlow`'s (checker/kernel_exprs.py)."""

from __future__ import annotations

from collections.abc import Sequence

import ast

from anodize.language.intrinsics import GRID_STRIDE, RANGE
from anodize.language.vocab import WITNESS_TYPES

from .kernel_exprs import ExprFlow
from .kernel_state import FlowState, Loop
from .kernel_values import LOCAL_ARRAY, MAX_FIXPOINT, NONE, UNIFORM, UNKNOWN, VARYING, Env, Space, Val, _scalar3, join, join_env, record_root


class StatementFlow:
    """The statements of the kernel model's abstract interpreter."""

    def __init__(self, st: FlowState, exprs: ExprFlow):
        self.st = st
        self.m = st.m
        self.fn = st.fn
        self.exprs = exprs
        self.ev = exprs.ev

    # entry ----------------------------------------------------------------------------------
    def run(self) -> None:
        env: Env = {}
        for p in self.fn.params.values():
            if p.kind == "slice":
                env[p.name] = Val("slice", params=frozenset([p.name]), origin=p.node)
            elif p.kind == "witness":
                env[p.name] = Val("witness", domain=p.domain, tdep=True, origin=p.node, spaces=frozenset([Space("param", param=p.name)]))
            elif p.kind == "scalar" and (p.scalar or "").startswith("@"):  # a record (typer_records.py)
                env[p.name] = Val("record", tdep=self.fn.kind == "func")
            elif p.kind == "scalar":
                # a helper's scalar may come from a thread-dependent value at its call site
                env[p.name] = VARYING if self.fn.kind == "func" else UNIFORM
            elif p.kind == "local":
                env[p.name] = LOCAL_ARRAY
            else:
                env[p.name] = UNKNOWN
        self.block(self.fn.node.body, env)

    # statements -----------------------------------------------------------------------------
    def block(self, stmts: Sequence[ast.stmt], env: Env | None) -> Env | None:
        last: Env | None = env
        dead: Env | None = None
        for stmt in stmts:
            if env is None:
                # Unreachable code is still checked (codegen compiles it), from the state at
                # the exit that made it unreachable; nothing flows out of it.
                if dead is None:
                    dead = dict(last) if last is not None else {}
                dead = self.statement(stmt, dead) or dead
                continue
            last = env
            env = self.statement(stmt, env)
        return env

    def assign_name(self, name: str, val: Val, env: Env) -> None:
        if val.kind == "scalar" and self.st.divergent() is not None:
            val = val.tainted(self.st.lane_divergent() is not None)
        env[name] = val

    def statement(self, s: ast.stmt, env: Env) -> Env | None:
        m = self.m
        if isinstance(s, ast.Assign):
            val = self.ev(s.value, env)
            for t in s.targets:
                self.store(t, val, env)
            return env
        if isinstance(s, ast.Expr):
            self.ev(s.value, env)
            return env
        if isinstance(s, ast.AugAssign):
            rhs = self.ev(s.value, env)
            if isinstance(s.target, ast.Name):
                old = self.ev(s.target, env)
                m.stores.add(s.target)
                m.ctx[s.target] = self.st.here()
                p = self.fn.params.get(s.target.id)
                if p is None or p.kind != "slice":  # rebinding a slice parameter is an error
                    self.assign_name(s.target.id, _scalar3(old.tdep or rhs.tdep, old.lane or rhs.lane), env)
            else:
                self.ev(s.target, env)
                m.stores.add(s.target)
                root = record_root(s.target, m.values)
                if root is not s.target:  # `out[i].v += x`
                    m.stores.add(root)
                self.exprs.mark_write(getattr(root, "value", root), env)
            return env
        if isinstance(s, ast.If):
            return self.if_(s, env)
        if isinstance(s, (ast.For, ast.AsyncFor)):
            return self.for_(s, env)
        if isinstance(s, ast.While):
            return self.loop(s, env, lambda e: self.ev(s.test, e), None, s.body, s.orelse)
        if isinstance(s, ast.AnnAssign):
            val = self.ev(s.value, env) if s.value is not None else UNKNOWN
            q = m.qualname(s.annotation) or ""
            if q.startswith("az.") and q[3:] in WITNESS_TYPES:
                if not (val.kind == "witness" and val.domain == WITNESS_TYPES[q[3:]]):
                    val = VARYING  # annotating a non-witness as one does not make it one
            self.store(s.target, val, env)
            return env
        if isinstance(s, ast.Return):
            d = self.st.divergent()
            if s.value is not None:
                v = self.ev(s.value, env)
                if d is not None and v.kind == "scalar":
                    # returned under thread-dependent control: which value a thread gets
                    # depends on the thread (the returns join, each tainted by its divergence)
                    v = v.tainted()
                self.fn.returns = join(self.fn.returns, v)
            else:
                self.fn.returns = join(self.fn.returns, NONE)
            if d is not None:
                if self.st.div_return is None:
                    self.st.div_return = s
                for lp in self.st.loops:
                    lp.divergent = lp.divergent or s
                if self.st.lane_divergent() is not None:
                    if self.st.lane_return is None:
                        self.st.lane_return = s
                    for lp in self.st.loops:
                        lp.lane_divergent = lp.lane_divergent or s
            return None
        if isinstance(s, (ast.Break, ast.Continue)):
            if self.st.loops:
                lp = self.st.loops[-1]
                if self.st.divergent() is not None and lp.divergent is None:
                    lp.divergent = s
                if self.st.lane_divergent() is not None and lp.lane_divergent is None:
                    lp.lane_divergent = s
                (lp.break_envs if isinstance(s, ast.Break) else lp.continue_envs).append(dict(env))
            return None
        if isinstance(s, (ast.With, ast.AsyncWith)):
            unsafe = False
            for item in s.items:
                self.ev(item.context_expr, env)
                e = item.context_expr
                callee = self.m.callees.get(e) if isinstance(e, ast.Call) else None
                if callee is not None and callee.kind == "unsafe":
                    unsafe = True
                if item.optional_vars is not None:
                    self.store(item.optional_vars, UNKNOWN, env)
            prev = self.st.unsafe
            self.st.unsafe = prev or unsafe
            out = self.block(s.body, env)
            self.st.unsafe = prev
            return out
        if isinstance(s, ast.Delete):
            for t in s.targets:
                for tgt in _targets(t):
                    self.ev(tgt, env)
                    m.stores.add(tgt)
                    self.exprs.mark_write(getattr(tgt, "value", tgt), env)
                    if isinstance(tgt, ast.Name):
                        env.pop(tgt.id, None)
            return env
        if isinstance(s, ast.Raise):
            return None
        if isinstance(s, ast.Assert):
            self.ev(s.test, env)
            return env
        if isinstance(s, ast.Try):
            out = self.block(s.body, dict(env))
            for h in s.handlers:
                out = join_env(out, self.block(h.body, dict(env)))
            return out
        # pass, global, nonlocal, import; nested def/class/match: analysed no further (the
        # rules report what needs reporting)
        return env

    def store(self, target: ast.expr, val: Val, env: Env) -> None:
        m = self.m
        if isinstance(target, ast.Name):
            m.stores.add(target)
            m.values[target] = val
            m.ctx[target] = self.st.here()
            name = target.id
            p = self.fn.params.get(name)
            if p is not None and p.kind == "slice":
                return  # rebinding a slice parameter is an error; keep its declared kind
            self.assign_name(name, val, env)
        elif isinstance(target, (ast.Tuple, ast.List)):
            # `a, b = f(x)` / `a, b = b, a`: tuples hold scalars, so each name gets the scalar
            # join of the right side (over-approximated: every element's dependence)
            elt = val if val.kind == "scalar" else UNKNOWN
            for e in target.elts:
                self.store(e.value if isinstance(e, ast.Starred) else e, elt, env)
        elif isinstance(target, ast.Starred):
            self.store(target.value, UNKNOWN, env)
        else:  # subscript or attribute
            m.stores.add(target)
            self.ev(target, env)
            root = record_root(target, m.values)
            if root is not target:  # `out[i].v = x`: a store of the element `out[i]`
                m.stores.add(root)
            self.exprs.mark_write(getattr(root, "value", root), env)

    def if_(self, s: ast.If, env: Env) -> Env | None:
        tv = self.ev(s.test, env)
        tdep = tv.tdep
        guards = self._guards_of(s.test, env)
        if tdep:
            self.st.push_cond(s.test, tv.lane)
        self.st.guards.extend(guards)
        body = self.block(s.body, dict(env))
        del self.st.guards[len(self.st.guards) - len(guards) :]
        other: Env | None = self.block(s.orelse, dict(env)) if s.orelse else dict(env)
        if tdep:
            self.st.pop_cond()
            # values bound on only one side of a thread-dependent branch differ between threads
            for e in (body, other):
                if e is not None:
                    for k, v in list(e.items()):
                        if v.kind == "scalar" and env.get(k) != v:
                            e[k] = v.tainted(tv.lane)
        return join_env(body, other)

    def _guards_of(self, test: ast.expr, env: Env) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        parts = [test]
        while parts:
            t = parts.pop()
            if isinstance(t, ast.BoolOp) and isinstance(t.op, ast.And):
                parts += t.values
            elif (
                isinstance(t, ast.Compare)
                and len(t.ops) == 1
                and isinstance(t.ops[0], ast.In)
                and isinstance(t.left, ast.Name)
                and isinstance(t.comparators[0], ast.Name)
            ):
                out.append((t.left.id, t.comparators[0].id))
        return out

    def for_(self, s: ast.For | ast.AsyncFor, env: Env) -> Env | None:
        it = self.ev(s.iter, env)
        callee = self.m.callees.get(s.iter) if isinstance(s.iter, ast.Call) else None
        loop_tdep: ast.AST | None
        if callee is not None and callee.tag == GRID_STRIDE:
            over = self.m.values.get(s.iter.args[0]) if isinstance(s.iter, ast.Call) and s.iter.args else None  # type: ignore[union-attr]
            # one space per slice the loop may iterate: a loop over a slice chosen at run time
            # maps each choice its own way
            names = sorted(over.params) if over is not None and over.kind == "slice" else []
            binding = frozenset((p.name, p.name) for p in self.fn.params.values() if p.kind == "slice")
            spaces = frozenset(Space("grid_stride", s.iter, frozenset([n]), binding=binding) for n in names) or frozenset(
                [Space("grid_stride", s.iter, binding=binding)]
            )
            var = Val("witness", domain=1, tdep=True, origin=s.iter, spaces=spaces)
            loop_tdep = s.iter  # each thread runs its own number of iterations
        elif callee is not None and callee.tag == RANGE:
            var = _scalar3(it.tdep, it.lane)
            loop_tdep = s.iter if it.tdep else None
        else:
            var = UNKNOWN
            loop_tdep = s.iter
        # a grid-stride loop's trip count differs between the lanes; a range's as its bounds
        loop_lane = callee is None or callee.tag != RANGE or it.lane

        def head(e: Env) -> Val:
            self.store(s.target, var, e)
            return _scalar3(loop_tdep is not None, loop_lane)

        out = self.loop(s, env, head, loop_tdep, s.body, s.orelse)
        if var.kind == "witness" and out is not None and isinstance(s.target, ast.Name) and s.target.id in out:
            # past a grid-stride loop its variable is no index of this thread's: after no
            # iteration it is the value from before the loop (or none), after the last one the
            # backends leave the last index or the next, past the end
            out[s.target.id] = VARYING
        return out

    def loop(self, s, env: Env, head, head_div, body, orelse) -> Env | None:  # type: ignore[no-untyped-def]
        entry = dict(env)
        state: Env = dict(env)
        lp = Loop()
        self.st.loops.append(lp)
        exit_env: Env | None = None
        for _ in range(MAX_FIXPOINT):
            before = (dict(state), lp.divergent, self.st.div_return, lp.lane_divergent, self.st.lane_return)
            lp.break_envs, lp.continue_envs = [], []
            iter_env = dict(state)
            hv = head(iter_env)
            div = head_div if head_div is not None else (s.test if isinstance(s, ast.While) and hv.tdep else None)
            if div is not None and lp.divergent is None:
                lp.divergent = div
            if div is not None and hv.lane and lp.lane_divergent is None:
                lp.lane_divergent = div
            if div is not None:
                self.st.push_cond(div, hv.lane)
            out = self.block(body, dict(iter_env))
            if div is not None:
                self.st.pop_cond()
            back = out
            for ce in lp.continue_envs:
                back = join_env(back, ce)
            if lp.divergent is not None and back is not None:
                for k, v in list(back.items()):
                    if v.kind == "scalar" and state.get(k) != v:
                        back[k] = v.tainted(lp.lane_divergent is not None)
            new_state = join_env(state, back) or state
            exit_env = dict(iter_env)
            for be in lp.break_envs:
                exit_env = join_env(exit_env, be)
            if (new_state, lp.divergent, self.st.div_return, lp.lane_divergent, self.st.lane_return) == before:
                break
            state = new_state
        else:
            # no fixed point in MAX_FIXPOINT passes: widen (every changed value to a
            # thread-dependent int, the loop divergent) and record one last pass
            for k, v in list(state.items()):
                if entry.get(k) != v:
                    state[k] = VARYING if v.kind in ("witness", "scalar") else UNKNOWN
            lp.divergent = lp.divergent or s
            lp.lane_divergent = lp.lane_divergent or s
            lp.break_envs, lp.continue_envs = [], []
            iter_env = dict(state)
            head(iter_env)
            self.st.push_cond(s, True)
            self.block(body, dict(iter_env))
            self.st.pop_cond()
            exit_env = dict(iter_env)
            for be in lp.break_envs:
                exit_env = join_env(exit_env, be)
        self.st.loops.pop()
        if orelse:
            exit_env = self.block(orelse, exit_env) if exit_env is not None else None
        # after the loop every thread is back together: only the values carry the divergence
        return exit_env


def _targets(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, (ast.Tuple, ast.List)):
        return list(node.elts)
    return [node]

"""Barrier intervals and the shared-memory accesses in them (for checker/rules/shared_race.py).

`Intervals(model, fn, block).run()` walks one kernel or helper body in program
order with a small dataflow state:

- `pending`: the shared-memory accesses made since the last `az.syncthreads()` on
  some path to here, each with the names assigned since it ran (its "dirty" set);
- `forms`: locals bound to thread-affine values (`t = thread.tid_x()`, `r = by + ty`);
- `shared`: locals bound to shared arrays (by their `az.shared.array` call);
- `consts`: locals holding a known int (so `s = 128; while s > 0:` is entered);
- `fresh`: whether some path from the entry reaches here without a barrier.

A barrier (or a helper call that reaches one on every path) empties `pending`.
Branches join, loops iterate to a fixed point (the end of a body flows into its
start and past the loop), and each access is compared with every pending access
and with itself (`index_forms.py` decides).  A helper's body also flows from its
end back to its start, since its caller may call it again without a barrier.

Here: the statements (`Intervals`); the state record (`WalkState`) and accesses are in
barrier_state.py, expressions and the access comparison in barrier_accesses.py
(`AccessWalk`), index forms in index_eval.py (`FormEval`): collaborators over one state.
"""

from __future__ import annotations

import ast

from .index_forms import Block, Div, Fact, Lin, Mod, Stride, pow2, join_forms
from anodize.language.intrinsics import RANGE

from .index_eval import FormEval, Named
from .typed_ints import IntView, wide
from .kernel_model import ModuleModel
from .kernel_values import FunctionInfo
from .barrier_accesses import AccessWalk
from .barrier_state import ALL, _MAX_PASSES, _OPAQUE, Access, DynPart, DynSummary, Race, State, WalkState, _Typed, _add, _dynamic, join, _names_of, _same


class _Loop:
    def __init__(self) -> None:
        self.breaks: list[State] = []
        self.continues: list[State] = []


class Intervals:
    """The statements of the race walk over one function; its expressions and accesses are
    `AccessWalk`'s, its index forms `FormEval`'s, all over one `WalkState`."""

    def __init__(
        self,
        model: ModuleModel,
        fn: FunctionInfo,
        block: Block,
        must_barrier: dict[str, bool],
        dynamic: dict[str, DynSummary] | None = None,
        types: IntView | None = None,
    ):
        self.st = WalkState(model, fn, block, must_barrier, dynamic or {}, types if types is not None else IntView(None))
        self.m = model
        self.fn = fn
        self.types = self.st.types
        self.forms = FormEval(self.st)
        self.walk = AccessWalk(self.st, self.forms, self)
        self.ev = self.walk.ev
        self.loops: list[_Loop] = []
        self._assigned: dict[ast.If, frozenset[str]] = {}

    # what the walk found (read by rules/shared_race.py)
    @property
    def races(self) -> dict[ast.Subscript, Race]:
        return self.st.races

    @property
    def escapes(self) -> dict[ast.Name, str]:
        return self.st.escapes

    @property
    def head(self) -> DynPart | None:
        return self.st.head

    @property
    def tail(self) -> DynPart | None:
        return self.st.tail

    # ---- entry -----------------------------------------------------------------------------
    def run(self) -> bool:
        """Walk the body; record races and escapes.  True when every path reaches a barrier."""
        try:
            return self._run()
        finally:
            del self.walk.stmts  # the walk's reference back: no cycle left for the collector

    def _run(self) -> bool:
        start = State()
        for _ in range(_MAX_PASSES):
            self.st.exits = []
            end = self.block_(self.fn.node.body, start.copy())
            out = end
            for e in self.st.exits:
                out = join(out, e)
            if self.fn.kind != "func" or out is None:
                break
            # a helper's end flows into its start (the caller may call it again with no
            # barrier between); everything may have changed by then
            again = join(start, State({a: frozenset([ALL]) for a in out.pending}))
            if _same(again, start):
                break
            start = again  # type: ignore[assignment]
        if out is not None:
            for a in out.pending:
                if _dynamic(a.arrays):
                    self.st.tail = _add(self.st.tail, a)
        return out is not None and not out.fresh

    # ---- statements ------------------------------------------------------------------------
    def block_(self, body: list[ast.stmt], st: State | None) -> State | None:
        for stmt in body:
            if st is None:
                return None
            st = self.stmt(stmt, st)
        return st

    def stmt(self, s: ast.stmt, st: State) -> State | None:
        if isinstance(s, ast.Assign):
            self.ev(s.value, st, alias_ok=True)
            for tgt in s.targets:
                self.store(tgt, s.value, st)
            return st
        if isinstance(s, ast.Expr):
            self.ev(s.value, st)
            return st
        if isinstance(s, ast.If):
            return self.if_(s, st)
        if isinstance(s, ast.AugAssign):
            return self.aug(s, st)
        if isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.ev(s.value, st, alias_ok=True)
            self.store(s.target, s.value, st)
            return st
        if isinstance(s, ast.While):
            enters = self._const_test(s.test, st) is True
            return self.loop(st, lambda e: self.ev(s.test, e), s.body, s.orelse, enters)
        if isinstance(s, (ast.For, ast.AsyncFor)):
            return self.for_(s, st)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.ev(item.context_expr, st)
                if item.optional_vars is not None:
                    self.store(item.optional_vars, None, st)
            return self.block_(s.body, st)
        if isinstance(s, ast.Return):
            if s.value is not None:
                self.ev(s.value, st)
            self.st.exits.append(st)
            return None
        if isinstance(s, (ast.Break, ast.Continue)):
            if self.loops:
                (self.loops[-1].breaks if isinstance(s, ast.Break) else self.loops[-1].continues).append(st)
            return None
        if isinstance(s, ast.Raise):
            return None
        if isinstance(s, ast.Delete):
            for tgt in s.targets:
                self.store(tgt, None, st)
            return st
        if isinstance(s, ast.Try):
            out = self.block_(s.body, st.copy())
            for h in s.handlers:
                out = join(out, self.block_(h.body, join(st, out) or st.copy()))
            if s.finalbody and out is not None:
                out = self.block_(s.finalbody, out)
            return out
        if type(s) in _OPAQUE:
            return st  # nested definitions, `match`, `try`/`except*`: other rules reject them
        for child in ast.iter_child_nodes(s):  # pass, assert, global, import, ...
            self.walk.ev_any(child, st)
        return st

    def aug(self, s: ast.AugAssign, st: State) -> State:
        self.ev(s.value, st)
        target = s.target
        if isinstance(target, ast.Subscript) and self.walk.shared_ids(target.value, st) is not None:
            self.walk.index_ev(target, st)
            self.walk.touch(self.walk.access(target, False, st), st)
            self.walk.touch(self.walk.access(target, True, st), st)
        elif isinstance(target, ast.Name):
            new = None
            t = self.types.int_ty(s)  # the operation's type (the typer records it at the statement)
            local = self.types.local(target.id)
            if t is not None and t.is_int and local is not None and isinstance(s.op, (ast.Add, ast.Sub)):
                old = self.forms.convert(self.forms.form(target, st), self._local_expr(local), t)
                val = self.forms.typed(s.value, t, st)
                if old[0] is not None and val[0] is not None:
                    new = self.forms.arith(old, val, isinstance(s.op, ast.Add), t)
                    if new is not None:  # stored back into the local (converted to its type)
                        new = self.forms.convert(new, self._local_expr(t), local)
            self.assign(target.id, st, new)
        else:
            self.ev(target, st)
        return st

    def store(self, target: ast.expr, value: ast.expr | None, st: State) -> None:
        if isinstance(target, ast.Name):
            ids = self.walk.shared_ids(value, st) if value is not None else None
            form = self.stored(target.id, value, st) if value is not None else None
            self.assign(target.id, st, form)
            if ids is not None:
                st.shared[target.id] = ids
        elif isinstance(target, ast.Subscript) and self.walk.shared_ids(target.value, st) is not None:
            self.walk.index_ev(target, st)
            self.walk.touch(self.walk.access(target, True, st, value), st)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self.store(e, None, st)
        elif isinstance(target, ast.Starred):
            self.store(target.value, None, st)
        else:
            self.ev(target, st)

    def assign(self, name: str, st: State, form: Named | None) -> None:
        """`name` gets a new value: pending accesses that read it become dirty."""
        for a, dirty in list(st.pending.items()):
            if name in _names_of(a) and name not in dirty:
                st.pending[a] = dirty | {name}
        for k, (_, names) in list(st.forms.items()):
            if name in names:
                del st.forms[k]
        st.forms.pop(name, None)
        st.shared.pop(name, None)
        st.consts.pop(name, None)
        for i, f in enumerate(self.st.facts):
            if f is not None and name in f[1]:
                self.st.facts[i] = None
        if form is None or form[0] is None:
            return
        val = form[0]
        if isinstance(val, Lin) and val.is_const:
            if val.exact:
                st.consts[name] = val.const
        elif name not in form[1] and (isinstance(val, (Div, Mod, Stride)) or val.thread()):
            st.forms[name] = form  # a thread-affine local

    def stored(self, name: str, value: ast.expr, st: State) -> Named | None:
        """The form of `value` stored into the local `name`: converted (wrapping) to the local's
        type, which the typed model gives (its first binding's, or its annotation's)."""
        local = self.types.local(name)
        if local is None or not local.is_int:
            return None
        return self.forms.convert(self.forms.form(value, st), self.types.exprs.get(value), local)

    @staticmethod
    def _local_expr(t: object) -> object:
        """A stand-in typed expression of type `t` (a local's value, an operation's result)."""
        return _Typed(t)

    def _const_test(self, test: ast.expr, st: State) -> bool | None:
        """A `while` test that the known constants decide (compared in the test's own type)."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        links = getattr(self.types.exprs.get(test), "link_types", None)
        if not links or not links[0].is_int:
            return None
        lt = links[0]
        a = self.forms.typed(test.left, lt, st)[0]
        b = self.forms.typed(test.comparators[0], lt, st)[0]
        if not (isinstance(a, Lin) and isinstance(b, Lin) and a.is_const and b.is_const and a.exact and b.exact):
            return None
        x, y = a.const, b.const
        op = type(test.ops[0]).__name__
        table = {"Lt": x < y, "LtE": x <= y, "Gt": x > y, "GtE": x >= y, "Eq": x == y, "NotEq": x != y}
        return table.get(op)

    def for_(self, s: ast.For | ast.AsyncFor, st: State) -> State | None:
        self.ev(s.iter, st)
        target = s.target
        var = self._range_stride(s.iter, target, st)

        def head(e: State) -> None:
            self.store(target, None, e)
            if var is not None and isinstance(target, ast.Name):
                e.forms[target.id] = var  # `for j in range(tid, n, 256)`

        def leave(e: State) -> None:
            # left from the head: after the last iteration the variable holds the last value
            # (`var`'s form), after none the value from before the loop (the head state's
            # form, joined with `var`'s over the iterations): only a form covering both holds
            prev = e.forms.get(target.id) if isinstance(target, ast.Name) else None
            head(e)
            if var is not None and isinstance(target, ast.Name):
                both = join_forms(prev[0], var[0]) if prev is not None and prev[0] is not None and var[0] is not None else None
                if both is None:
                    e.forms.pop(target.id, None)
                else:
                    e.forms[target.id] = (both, prev[1] | var[1])  # type: ignore[index]

        return self.loop(st, head, s.body, s.orelse, False, leave)

    def if_(self, s: ast.If, st: State) -> State | None:
        self.ev(s.test, st)
        memo: dict[ast.expr, Named] = {}  # the test's forms, for both sides (the state is the same)
        pos = self.forms.facts_of(s.test, st, True, memo)
        neg = self.forms.facts_of(s.test, st, False, memo)
        start = len(self.st.log)
        body = self.st.under(pos, lambda: self.block_(s.body, st.copy()))
        if not s.orelse:
            other: State | None = st.copy()
        else:  # `else:` or `elif` (a one-statement `else` holding an `if`)
            mid = len(self.st.log)
            other = self.st.under(neg, lambda: self.block_(s.orelse, st.copy()))
            self._across(s, self.st.log[start:mid], self.st.log[mid:])
        return join(body, other)

    def _across(self, s: ast.If, body: list[Access], orelse: list[Access]) -> None:
        """Some threads take one side and some the other, in one barrier interval: each access of
        the `else` side against each of the `if` side (with every name either side assigns dirty:
        a symbol may name another value on each side)."""
        if not body or not orelse:
            return
        dirty = self._assigned.get(s)
        if dirty is None:
            dirty = self._assigned[s] = frozenset(
                n.id for part in (s.body, s.orelse) for st in part for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            )
        for b in dict.fromkeys(orelse):
            if b.node in self.st.races:
                continue
            for a in dict.fromkeys(body):
                if self.walk.conflict(a, dirty, b):
                    self.st.races[b.node] = Race(b, a)
                    break

    def loop(  # type: ignore[no-untyped-def]
        self, entry: State, head, body: list[ast.stmt], orelse: list[ast.stmt], enters: bool, leave=None
    ) -> State | None:
        state = entry.copy()
        lp = _Loop()
        back: State | None = None
        for n in range(_MAX_PASSES):
            lp.breaks, lp.continues = [], []
            cur = state.copy()
            self.loops.append(lp)
            head(cur)
            out = self.block_(body, cur.copy())
            self.loops.pop()
            back = out
            for c in lp.continues:
                back = join(back, c)
            new = join(entry, back) or entry.copy()
            if n >= _MAX_PASSES // 2:  # widen: no thread-affine locals or constants survive
                new.forms, new.consts = {}, {}
            if _same(new, state):
                break
            state = new
        # the loop is left from its head (after a first pass when it is surely entered) or by `break`
        exit_from = back if enters else state
        ex: State | None = None
        if exit_from is not None:
            ex = exit_from.copy()
            (leave or head)(ex)
        if orelse and ex is not None:
            ex = self.block_(orelse, ex)
        for b in lp.breaks:
            ex = join(ex, b)
        return ex

    def _range_stride(self, it: ast.expr, target: ast.expr, st: State) -> Named | None:
        """`range(start, stop, step)` with a thread-affine `start` and a positive constant step."""
        if not isinstance(it, ast.Call):
            return None
        c = self.m.callees.get(it)
        args = it.args
        if (
            c is None
            or c.tag != RANGE
            or len(args) != 3
            or it.keywords
            or any(isinstance(a, ast.Starred) for a in args)
        ):
            return None
        var = self.types.local(target.id) if isinstance(target, ast.Name) else None
        if var is None or not var.is_int:
            return None
        start = self.forms.typed(args[0], var, st)  # the loop variable's type (range's arguments are converted)
        step = self.forms.typed(args[2], var, st)
        if not (isinstance(start[0], Lin) and start[0].thread() and not start[1]):
            return None
        if not (isinstance(step[0], Lin) and step[0].is_const and step[0].exact and pow2(step[0].const)):
            return None  # a power of two: the residue modulo the step survives wrapping
        if not wide(var):
            return None  # a narrow loop variable wraps modulo less than the step may divide
        return Stride(start[0], step[0].const), frozenset()


__all__ = ["ALL", "Access", "Intervals", "Race"]

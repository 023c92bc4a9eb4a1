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
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .index_forms import (
    COMPS,
    MAX_EXTENT,
    TX,
    TY,
    TZ,
    Block,
    Div,
    Fact,
    Form,
    Lin,
    Mod,
    Stride,
    exact_or_oob,
    injective,
    join_forms,
    normalize,
    pin,
    plain,
    pow2,
    separated,
)
from .index_eval import FormEval, Named, _arg_values, _arith, _free_names
from . import safe_shared
from .typed_ints import IntView, wide
from .kernel_model import FunctionInfo, ModuleModel, index_elements
from anodize.language.walk import child_fields
from anodize.language.vocab import BLOCK_COLLECTIVES

ALL = "*"  # an access to any shared array / every name dirty
_MAX_PASSES = 24
# statements the walk does not enter (nested definitions, `match`, `try`/`except*`)
_OPAQUE = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match, ast.TryStar})
# children of an expression that hold no expression
_LEAVES = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


@dataclass(frozen=True)
class Access:
    node: ast.Subscript
    write: bool
    arrays: frozenset[object]  # allocation calls, or ALL
    index: tuple[Named, ...] | None
    facts: tuple[tuple[Fact, frozenset[str]], ...]
    value: str | None = None  # a write's block-uniform value (its text), if any
    value_names: frozenset[str] = frozenset()
    safe: bool = False  # outside `unsafe`: under the phase discipline (safe_shared.py)
    witness: int = 0  # the rank of the block-local witness that is exactly its index (0: none)

    def __hash__(self) -> int:
        # the fields' hash, computed once: an access keys the pending dicts of every state
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.node, self.write, self.arrays, self.index, self.facts, self.value, self.value_names, self.safe, self.witness))
            object.__setattr__(self, "_hash", h)
        return h  # type: ignore[no-any-return]


@dataclass
class State:
    pending: dict[Access, frozenset[str]] = field(default_factory=dict)
    forms: dict[str, Named] = field(default_factory=dict)
    shared: dict[str, frozenset[object]] = field(default_factory=dict)
    consts: dict[str, int] = field(default_factory=dict)
    fresh: bool = True

    def copy(self) -> State:
        return State(dict(self.pending), dict(self.forms), dict(self.shared), dict(self.consts), self.fresh)


def join(a: State | None, b: State | None) -> State | None:
    if a is None:
        return None if b is None else b.copy()
    if b is None:
        return a.copy()
    pending = dict(a.pending)
    for acc, dirty in b.pending.items():
        pending[acc] = pending.get(acc, frozenset()) | dirty
    shared = dict(a.shared)
    for name, ids in b.shared.items():
        shared[name] = shared.get(name, frozenset()) | ids
    return State(
        pending,
        _join_forms(a.forms, b.forms),
        shared,
        {k: v for k, v in a.consts.items() if b.consts.get(k) == v},
        a.fresh or b.fresh,
    )


def _same(a: State | None, b: State | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.pending, a.forms, a.shared, a.consts, a.fresh) == (b.pending, b.forms, b.shared, b.consts, b.fresh)


@dataclass
class Race:
    access: Access
    other: Access | None  # None: the access races with itself in another thread


class _Loop:
    def __init__(self) -> None:
        self.breaks: list[State] = []
        self.continues: list[State] = []


class Intervals(FormEval):
    def __init__(
        self,
        model: ModuleModel,
        fn: FunctionInfo,
        block: Block,
        must_barrier: dict[str, bool],
        dynamic: dict[str, DynSummary] | None = None,
        types: IntView | None = None,
    ):
        self.m = model
        self.fn = fn
        self.block = block
        self.must_barrier = must_barrier  # helper name -> reaches a barrier on every path
        self.dynamic = dynamic or {}  # helper name -> its accesses of dynamic shared memory
        # this function's own summary: dynamic accesses reachable from its entry, and pending at its exit
        self.head: DynPart | None = None
        self.tail: DynPart | None = None
        self.races: dict[ast.Subscript, Race] = {}
        self.escapes: dict[ast.Name, str] = {}
        self.exits: list[State] = []
        self.facts: list[tuple[Fact, frozenset[str]] | None] = []
        self.loops: list[_Loop] = []
        self._uniform: dict[ast.expr, Named] = {}
        self.types = types if types is not None else IntView(None)  # the typing of the body walked
        self.log: list[Access] = []  # every access touched, in walk order (for `_across`)
        self._assigned: dict[ast.If, frozenset[str]] = {}

    # ---- entry -----------------------------------------------------------------------------
    def run(self) -> bool:
        """Walk the body; record races and escapes.  True when every path reaches a barrier."""
        start = State()
        for _ in range(_MAX_PASSES):
            self.exits = []
            end = self.block_(self.fn.node.body, start.copy())
            out = end
            for e in self.exits:
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
                    self.tail = _add(self.tail, a)
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
            self.exits.append(st)
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
            self.ev_any(child, st)
        return st

    def aug(self, s: ast.AugAssign, st: State) -> State:
        self.ev(s.value, st)
        target = s.target
        if isinstance(target, ast.Subscript) and self.shared_ids(target.value, st) is not None:
            self.index_ev(target, st)
            self.touch(self.access(target, False, st), st)
            self.touch(self.access(target, True, st), st)
        elif isinstance(target, ast.Name):
            new = None
            t = self.types.int_ty(s)  # the operation's type (the typer records it at the statement)
            local = self.types.local(target.id)
            if t is not None and t.is_int and local is not None and isinstance(s.op, (ast.Add, ast.Sub)):
                old = self._convert(self.form(target, st), self._local_expr(local), t)
                val = self.typed(s.value, t, st)
                if old[0] is not None and val[0] is not None:
                    new = self._arith(old, val, isinstance(s.op, ast.Add), t)
                    if new is not None:  # stored back into the local (converted to its type)
                        new = self._convert(new, self._local_expr(t), local)
            self.assign(target.id, st, new)
        else:
            self.ev(target, st)
        return st

    def store(self, target: ast.expr, value: ast.expr | None, st: State) -> None:
        if isinstance(target, ast.Name):
            ids = self.shared_ids(value, st) if value is not None else None
            form = self.stored(target.id, value, st) if value is not None else None
            self.assign(target.id, st, form)
            if ids is not None:
                st.shared[target.id] = ids
        elif isinstance(target, ast.Subscript) and self.shared_ids(target.value, st) is not None:
            self.index_ev(target, st)
            self.touch(self.access(target, True, st, value), st)
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
        for i, f in enumerate(self.facts):
            if f is not None and name in f[1]:
                self.facts[i] = None
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
        return self._convert(self.form(value, st), self.types.exprs.get(value), local)

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
        a = self.typed(test.left, lt, st)[0]
        b = self.typed(test.comparators[0], lt, st)[0]
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
        pos = self.facts_of(s.test, st, True, memo)
        neg = self.facts_of(s.test, st, False, memo)
        start = len(self.log)
        body = self.under(pos, lambda: self.block_(s.body, st.copy()))
        if not s.orelse:
            other: State | None = st.copy()
        else:  # `else:` or `elif` (a one-statement `else` holding an `if`)
            mid = len(self.log)
            other = self.under(neg, lambda: self.block_(s.orelse, st.copy()))
            self._across(s, self.log[start:mid], self.log[mid:])
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
            if b.node in self.races:
                continue
            for a in dict.fromkeys(body):
                if self.conflict(a, dirty, b):
                    self.races[b.node] = Race(b, a)
                    break

    def under(self, facts, run):  # type: ignore[no-untyped-def]
        n = len(self.facts)
        self.facts.extend(facts)
        try:
            return run()
        finally:
            del self.facts[n:]

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
            or c.kind != "range"
            or len(args) != 3
            or it.keywords
            or any(isinstance(a, ast.Starred) for a in args)
        ):
            return None
        var = self.types.local(target.id) if isinstance(target, ast.Name) else None
        if var is None or not var.is_int:
            return None
        start = self.typed(args[0], var, st)  # the loop variable's type (range's arguments are converted)
        step = self.typed(args[2], var, st)
        if not (isinstance(start[0], Lin) and start[0].thread() and not start[1]):
            return None
        if not (isinstance(step[0], Lin) and step[0].is_const and step[0].exact and pow2(step[0].const)):
            return None  # a power of two: the residue modulo the step survives wrapping
        if not wide(var):
            return None  # a narrow loop variable wraps modulo less than the step may divide
        return Stride(start[0], step[0].const), frozenset()

    # ---- expressions -----------------------------------------------------------------------
    def ev_any(self, node: ast.AST, st: State, cond: bool = False) -> None:
        if isinstance(node, ast.expr):
            self.ev(node, st, cond)
        else:
            for child in ast.iter_child_nodes(node):
                self.ev_any(child, st, cond)

    def ev(self, node: ast.expr, st: State, cond: bool = False, alias_ok: bool = False) -> None:
        """Evaluate for effect: record shared reads, barriers and escapes, in evaluation order."""
        if isinstance(node, ast.Name):
            if node.id in st.shared and not alias_ok:
                self.escapes.setdefault(node, node.id)
            return
        if isinstance(node, ast.Constant):
            return
        if isinstance(node, ast.Subscript):
            if self.shared_ids(node.value, st) is not None:
                self.index_ev(node, st, cond)
                self.touch(self.access(node, False, st), st)
                return
            self.ev(node.value, st, cond)
            self.ev(node.slice, st, cond)
            return
        if isinstance(node, ast.Attribute):
            v = node.value
            if isinstance(v, ast.Name):  # `buf.shape` is no escape of `buf`; `buf.x` is
                # (a block-shared atomic array's methods neither: atomics never race)
                if v.id in st.shared and node.attr != "shape" and not self._atomic_method(node):
                    self.escapes.setdefault(v, v.id)
                return
            self.ev(v, st, cond)
            return
        if isinstance(node, ast.Call):
            callee = self.m.callees.get(node)
            kind = callee.kind if callee else "unknown"
            args, keywords = node.args, node.keywords
            if kind == "builtin" and callee is not None and callee.name == "len" and len(args) + len(keywords) == 1:
                a0 = args[0] if args else keywords[0].value
                if isinstance(a0, ast.Starred):
                    a0 = a0.value
                if isinstance(a0, ast.Name) and a0.id in st.shared:
                    return
            self.ev(node.func, st, cond)
            for a in args:
                self.ev(a, st, cond)
            for k in keywords:
                self.ev(k.value, st, cond)
            summary = self.dynamic.get(callee.fn.name) if kind == "helper" and callee is not None and callee.fn is not None else None
            if summary is not None and summary[0] is not None:
                # every dynamic array is one region: the helper's accesses before its first barrier
                # meet this function's pending ones (at an index the check does not follow)
                self.touch(self._summary_access(node, summary[0]), st)
            if not cond and (
                kind == "barrier"
                or (kind == "collective" and callee is not None and callee.name in BLOCK_COLLECTIVES)  # ends with one
                or (kind == "helper" and callee is not None and callee.fn is not None and self.must_barrier.get(callee.fn.name))
            ):
                st.pending.clear()
                st.fresh = False
            if summary is not None and summary[1] is not None:
                self.touch(self._summary_access(node, summary[1]), st)  # still pending after it returns
            return
        if isinstance(node, ast.BinOp):
            self.ev(node.left, st, cond)
            self.ev(node.right, st, cond)
            return
        if isinstance(node, ast.Compare):
            self.ev(node.left, st, cond)
            for c in node.comparators:
                self.ev(c, st, cond)
            return
        if isinstance(node, ast.UnaryOp):
            self.ev(node.operand, st, cond)
            return
        if isinstance(node, ast.BoolOp):
            values = node.values
            self.ev(values[0], st, cond)
            for v in values[1:]:
                self.ev(v, st, True)
            return
        if isinstance(node, ast.IfExp):
            self.ev(node.test, st, cond)
            self.under(self.facts_of(node.test, st, True), lambda: self.ev(node.body, st, True))
            self.under(self.facts_of(node.test, st, False), lambda: self.ev(node.orelse, st, True))
            return
        if isinstance(node, ast.NamedExpr):
            self.ev(node.value, st, cond)
            self.store(node.target, node.value, st)
            return
        if isinstance(node, ast.Dict):  # key, value, key, value (`ast` lists the keys first)
            for key, val in zip(node.keys, node.values):
                if key is not None:
                    self.ev(key, st, cond)
                self.ev(val, st, cond)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.ev(child, st, cond)
            elif not isinstance(child, _LEAVES):
                self.ev_any(child, st, cond)

    def _atomic_method(self, node: ast.Attribute) -> bool:
        funcs = self.__dict__.get("_sa_funcs")
        if funcs is None:
            funcs = self._sa_funcs = {c.func for c, k in self.m.callees.items() if k.kind == "shared_atomic"}
        return node in funcs

    def form(self, node: ast.expr, st: State) -> Named:  # type: ignore[override]
        got = safe_shared.form(self, node, st)  # a block-local witness
        if got is not None:
            return got
        return FormEval.form(self, node, st)

    def index_ev(self, node: ast.Subscript, st: State, cond: bool = False) -> None:
        self.ev(node.slice, st, cond)

    def shared_ids(self, node: ast.expr | None, st: State) -> frozenset[object] | None:
        """The allocations a shared-array expression may be; None when it is no shared array."""
        if node is None:
            return None
        if isinstance(node, ast.Name):
            if node.id in st.shared:
                return st.shared[node.id]
        elif isinstance(node, ast.Call):
            c = self.m.callees.get(node)
            if c is not None and c.kind == "shared":
                return frozenset([self._allocation(node)])
        elif isinstance(node, ast.IfExp):
            a, b = self.shared_ids(node.body, st), self.shared_ids(node.orelse, st)
            if a is not None or b is not None:
                return frozenset([ALL])
        v = self.m.values.get(node)
        if v is not None and v.kind == "shared":
            return frozenset([ALL])
        return None

    def _allocation(self, call: ast.Call) -> object:
        """A static array is its own call; every dynamic one (shape 0) is one region from the same
        base (per element type); a shape the checker cannot read may be either (ALL)."""
        args = _arg_values(call)
        c = self.m.callees.get(call)
        if c is not None and c.name == "shared.dynamic_array":  # `az.shared.dynamic_array(T)`
            return ("dynamic", self.m.code(args[0]) if args else "?")
        shape = args[0] if args else None
        dims: list[int] = []
        for e in shape.elts if isinstance(shape, ast.Tuple) else [shape]:
            v = e.value if isinstance(e, ast.Starred) else e
            n = _module_int(self.m, v) if v is not None else None
            if n is None:
                return ALL
            dims.append(n)
        if dims == [0]:
            elem = self.m.code(args[1]) if len(args) > 1 else "?"
            return ("dynamic", elem)
        return call

    # ---- accesses --------------------------------------------------------------------------
    def access(self, node: ast.Subscript, write: bool, st: State, value: ast.expr | None = None) -> Access:
        ids = self.shared_ids(node.value, st) or frozenset([ALL])
        elems = index_elements(node)
        facts = tuple([f for f in self.facts if f is not None])
        index = None
        ctx = self.m.ctx.get(node)
        safe = ctx is not None and not ctx.unsafe
        witness = safe_shared.witness_rank(self.m, node)
        if elems is not None:
            index = safe_shared.witness_index(self, node, witness) or tuple(self.form(e, st) for e in elems)
        vtext, vnames = None, frozenset[str]()
        if write and value is not None:
            v = self.m.values.get(value)
            if v is not None and v.kind == "scalar" and not v.tdep and not _reads_shared(value, st):
                vtext, vnames = self.m.code(value), _free_names(value)
        return Access(node, write, ids, index, facts, vtext, vnames, safe, witness)

    def _summary_access(self, call: ast.Call, part: DynPart) -> Access:
        facts = tuple([f for f in self.facts if f is not None])
        return Access(call, part[0], part[1], None, facts)  # type: ignore[arg-type]

    def touch(self, b: Access, st: State) -> None:
        summary = b.node.__class__ is ast.Call  # a helper's dynamic accesses, checked in its own walk
        if st.fresh and _dynamic(b.arrays):
            self.head = _add(self.head, b)
        if b.node not in self.races:
            if b.write and not summary and self.conflict(b, frozenset(), b):
                self.races[b.node] = Race(b, None)
            else:
                for a, dirty in st.pending.items():
                    if summary and a.node is b.node:
                        continue
                    if self.conflict(a, dirty, b):
                        self.races[b.node] = Race(b, a)
                        break
        st.pending[b] = st.pending.get(b, frozenset())
        self.log.append(b)

    def conflict(self, a: Access, dirty: frozenset[str], b: Access) -> bool:
        if not (a.write or b.write):
            return False
        if ALL in a.arrays or ALL in b.arrays:
            return True  # an array the check cannot place: its elements may be anywhere
        dyn_a = {x for x in a.arrays if x.__class__ is tuple}
        if dyn_a:
            dyn_b = {x for x in b.arrays if x.__class__ is tuple}
            if dyn_b and dyn_a != dyn_b:
                return True  # dynamic arrays of different element types share one region
        if not (a.arrays & b.arrays):
            return False
        if a.safe or b.safe:  # the safe tier's phase discipline first
            verdict = safe_shared.conflict(a, b)
            if verdict is not None:
                return verdict
        every = ALL in dirty
        if a.write and b.write and a.value is not None and a.value == b.value and not every and not (a.value_names & dirty):
            return False  # every thread writes the same block-uniform value (a benign race)
        if a.index is None or b.index is None or len(a.index) != len(b.index):
            return True
        fa = () if every else tuple([f for f, names in a.facts if not (names & dirty)])
        fb = tuple([f for f, _ in b.facts])
        ia = [None if every or (names & dirty) else normalize(f, self.block) for f, names in a.index]
        ib = [normalize(f, self.block) for f, _ in b.index]
        if any(f is None for f in ia) or any(f is None for f in ib):
            return True
        ia = [pin(f, fa) for f in ia]  # type: ignore[arg-type]
        ib = [pin(f, fb) for f in ib]  # type: ignore[arg-type]
        # per axis, whether both machine values are exact or out of bounds; then the values alone
        eo = [exact_or_oob(x) and exact_or_oob(y) for x, y in zip(ia, ib)]  # type: ignore[arg-type]
        ia = [plain(f) for f in ia]  # type: ignore[arg-type]
        ib = [plain(f) for f in ib]  # type: ignore[arg-type]
        # the same index, injective in the thread id: apart (tested first, as it costs less than
        # the ranges below; the answer does not depend on the order of the tests)
        same = ia == ib
        if same and injective(tuple(ia), fa, fb, self.block):  # type: ignore[arg-type]
            return False
        for x, y, both in zip(ia, ib, eo):
            if separated(x, fa, y, fb, self.block, both):  # type: ignore[arg-type]
                return False
        if same:
            return True  # the same index, not injective, the ranges not apart
        for n, (x, y) in enumerate(zip(ia, ib)):
            # `tid` (a first iteration) and `Stride(tid, 256)` (any iteration) share one residue
            j = join_forms(x, y) if x != y else None  # type: ignore[arg-type]
            if isinstance(j, Stride):
                ia[n] = ib[n] = j
        return not (ia == ib and injective(tuple(ia), fa, fb, self.block))  # type: ignore[arg-type]

# a function's accesses of dynamic shared memory (or of arrays the check cannot place): whether
# one writes, and the arrays
DynPart = tuple[bool, frozenset[object]]
DynSummary = tuple["DynPart | None", "DynPart | None"]  # (from the entry, pending at the exit)


def _dynamic(arrays: frozenset[object]) -> bool:
    return any(x == ALL or x.__class__ is tuple for x in arrays)


def _add(part: DynPart | None, a: Access) -> DynPart:
    ids = frozenset(x for x in a.arrays if x == ALL or x.__class__ is tuple)
    if part is None:
        return a.write, ids
    return part[0] or a.write, part[1] | ids


def _join_forms(a: dict[str, Named], b: dict[str, Named]) -> dict[str, Named]:
    out: dict[str, Named] = {}
    for k, (fa, na) in a.items():
        other = b.get(k)
        if other is None or fa is None or other[0] is None:
            continue
        f = join_forms(fa, other[0])
        if f is not None:
            out[k] = (f, na | other[1])
    return out


def _names_of(a: Access) -> frozenset[str]:
    out: frozenset[str] = a.value_names
    for _, names in a.index or ():
        out |= names
    for _, names in a.facts:
        out |= names
    return out


def _reads_shared(node: ast.AST, st: State) -> bool:
    return any(n in st.shared for n in _free_names(node))


def _int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _module_int(m: ModuleModel, node: ast.expr) -> int | None:
    """An int literal, or a module-level `NAME = <int>` bound once."""
    if isinstance(node, ast.Constant):
        return _int(node)
    if not isinstance(node, ast.Name):
        return None
    name = node.id
    found: list[int | None] = []
    for stmt in m.tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found.append(_int(stmt.value))
    return found[0] if len(found) == 1 else None


class _Typed:
    """A typed expression's stand-in: only its type (`Intervals._local_expr`)."""

    __slots__ = ("ty",)

    def __init__(self, ty: object) -> None:
        self.ty = ty


__all__ = ["ALL", "Access", "Intervals", "Race"]

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

from dataclasses import dataclass, field

import libcst as cst

from .index_forms import TX, TY, TZ, Block, Div, Fact, Form, Lin, Mod, Stride, injective, join_forms, normalize, pin, separated
from .kernel_model import FunctionInfo, ModuleModel, index_elements

ALL = "*"  # an access to any shared array / every name dirty
_TIDS = {"tid_x": TX, "tid_y": TY, "tid_z": TZ}
_DIMS = {"block_dim_x": 0, "block_dim_y": 1, "block_dim_z": 2}
_MAX_PASSES = 24
Named = tuple[Form | None, frozenset[str]]  # a form and the names it reads


@dataclass(frozen=True)
class Access:
    node: cst.Subscript
    write: bool
    arrays: frozenset[object]  # allocation calls, or ALL
    index: tuple[Named, ...] | None
    facts: tuple[tuple[Fact, frozenset[str]], ...]
    value: str | None = None  # a write's block-uniform value (its text), if any
    value_names: frozenset[str] = frozenset()


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


class Intervals:
    def __init__(self, model: ModuleModel, fn: FunctionInfo, block: Block, must_barrier: dict[str, bool]):
        self.m = model
        self.fn = fn
        self.block = block
        self.must_barrier = must_barrier  # helper name -> reaches a barrier on every path
        self.races: dict[cst.CSTNode, Race] = {}
        self.escapes: dict[cst.Name, str] = {}
        self.exits: list[State] = []
        self.facts: list[tuple[Fact, frozenset[str]] | None] = []
        self.loops: list[_Loop] = []

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
        return out is not None and not out.fresh

    # ---- statements ------------------------------------------------------------------------
    def block_(self, suite: cst.BaseSuite, st: State | None) -> State | None:
        stmts = suite.body if isinstance(suite, cst.IndentedBlock) else [suite]
        for stmt in stmts:
            if st is None:
                return None
            if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in stmt.body:
                    st = self.small(small, st)
                    if st is None:
                        return None
            else:
                st = self.compound(stmt, st)
        return st

    def small(self, s: cst.CSTNode, st: State) -> State | None:
        if isinstance(s, cst.Assign):
            self.ev(s.value, st, alias_ok=True)
            for t in s.targets:
                self.store(t.target, s.value, st)
            return st
        if isinstance(s, cst.AnnAssign):
            if s.value is not None:
                self.ev(s.value, st, alias_ok=True)
            self.store(s.target, s.value, st)
            return st
        if isinstance(s, cst.AugAssign):
            self.ev(s.value, st)
            if isinstance(s.target, cst.Subscript) and self.shared_ids(s.target.value, st) is not None:
                self.index_ev(s.target, st)
                self.touch(self.access(s.target, False, st), st)
                self.touch(self.access(s.target, True, st), st)
            elif isinstance(s.target, cst.Name):
                new = None
                old = self.form(s.target, st)
                val = self.form(s.value, st)
                if old[0] is not None and val[0] is not None and isinstance(s.operator, (cst.AddAssign, cst.SubtractAssign)):
                    new = _arith(old, val, isinstance(s.operator, cst.AddAssign))
                self.assign(s.target.value, st, new)
            else:
                self.ev(s.target, st)
            return st
        if isinstance(s, cst.Expr):
            self.ev(s.value, st)
            return st
        if isinstance(s, cst.Return):
            if s.value is not None:
                self.ev(s.value, st)
            self.exits.append(st)
            return None
        if isinstance(s, (cst.Break, cst.Continue)):
            if self.loops:
                (self.loops[-1].breaks if isinstance(s, cst.Break) else self.loops[-1].continues).append(st)
            return None
        if isinstance(s, cst.Raise):
            return None
        if isinstance(s, cst.Del):
            targets = [e.value for e in s.target.elements] if isinstance(s.target, cst.Tuple) else [s.target]
            for tgt in targets:
                self.store(tgt, None, st)
            return st
        for child in s.children:
            self.ev_any(child, st)
        return st

    def store(self, target: cst.BaseExpression, value: cst.BaseExpression | None, st: State) -> None:
        if isinstance(target, cst.Name):
            ids = self.shared_ids(value, st) if value is not None else None
            form = self.form(value, st) if value is not None else None
            self.assign(target.value, st, form)
            if ids is not None:
                st.shared[target.value] = ids
        elif isinstance(target, cst.Subscript) and self.shared_ids(target.value, st) is not None:
            self.index_ev(target, st)
            self.touch(self.access(target, True, st, value), st)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self.store(e.value, None, st)
        elif isinstance(target, cst.StarredElement):
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
            st.consts[name] = val.const
        elif name not in form[1] and (isinstance(val, (Div, Mod, Stride)) or val.thread()):
            st.forms[name] = form  # a thread-affine local

    def compound(self, s: cst.CSTNode, st: State) -> State | None:
        if isinstance(s, cst.If):
            return self.if_(s, st)
        if isinstance(s, cst.While):
            enters = _const_test(s.test, st) is True
            return self.loop(st, lambda e: self.ev(s.test, e), s.body, s.orelse, enters)
        if isinstance(s, cst.For):
            self.ev(s.iter, st)
            var = self._range_stride(s.iter, st)

            def head(e: State) -> None:
                self.store(s.target, None, e)
                if var is not None and isinstance(s.target, cst.Name):
                    e.forms[s.target.value] = var  # `for j in range(tid, n, 256)`

            return self.loop(st, head, s.body, s.orelse, False)
        if isinstance(s, cst.With):
            for item in s.items:
                self.ev(item.item, st)
                if item.asname is not None:
                    self.store(item.asname.name, None, st)  # type: ignore[arg-type]
            return self.block_(s.body, st)
        if isinstance(s, cst.Try):
            out = self.block_(s.body, st.copy())
            for h in s.handlers:
                out = join(out, self.block_(h.body, join(st, out) or st.copy()))
            if s.finalbody is not None and out is not None:
                out = self.block_(s.finalbody.body, out)
            return out
        return st  # nested definitions: other rules reject them

    def if_(self, s: cst.If, st: State) -> State | None:
        self.ev(s.test, st)
        pos = self.facts_of(s.test, st, True)
        neg = self.facts_of(s.test, st, False)
        body = self.under(pos, lambda: self.block_(s.body, st.copy()))
        if s.orelse is None:
            other: State | None = st.copy()
        elif isinstance(s.orelse, cst.If):
            other = self.under(neg, lambda: self.if_(s.orelse, st.copy()))  # type: ignore[arg-type]
        else:
            other = self.under(neg, lambda: self.block_(s.orelse.body, st.copy()))  # type: ignore[union-attr]
        return join(body, other)

    def under(self, facts, run):  # type: ignore[no-untyped-def]
        n = len(self.facts)
        self.facts.extend(facts)
        try:
            return run()
        finally:
            del self.facts[n:]

    def loop(self, entry: State, head, body: cst.BaseSuite, orelse: cst.Else | None, enters: bool) -> State | None:  # type: ignore[no-untyped-def]
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
            head(ex)
        if orelse is not None and ex is not None:
            ex = self.block_(orelse.body, ex)
        for b in lp.breaks:
            ex = join(ex, b)
        return ex

    def _range_stride(self, it: cst.BaseExpression, st: State) -> Named | None:
        """`range(start, stop, step)` with a thread-affine `start` and a positive constant step."""
        c = self.m.callees.get(it) if isinstance(it, cst.Call) else None
        if c is None or c.kind != "range" or len(it.args) != 3 or any(a.keyword or a.star for a in it.args):  # type: ignore[attr-defined]
            return None
        start = self.form(it.args[0].value, st)  # type: ignore[attr-defined]
        step = self.form(it.args[2].value, st)  # type: ignore[attr-defined]
        if not (isinstance(start[0], Lin) and start[0].thread() and not start[1]):
            return None
        if not (isinstance(step[0], Lin) and step[0].is_const and step[0].const > 0):
            return None
        return Stride(start[0], step[0].const), frozenset()

    # ---- expressions -----------------------------------------------------------------------
    def ev_any(self, node: cst.CSTNode, st: State, cond: bool = False) -> None:
        if isinstance(node, cst.BaseExpression):
            self.ev(node, st, cond)
        else:
            for child in node.children:
                self.ev_any(child, st, cond)

    def ev(self, node: cst.BaseExpression, st: State, cond: bool = False, alias_ok: bool = False) -> None:
        """Evaluate for effect: record shared reads, barriers and escapes, in evaluation order."""
        if isinstance(node, cst.Name):
            if node.value in st.shared and not alias_ok:
                self.escapes.setdefault(node, node.value)
            return
        if isinstance(node, cst.Subscript) and self.shared_ids(node.value, st) is not None:
            self.index_ev(node, st, cond)
            self.touch(self.access(node, False, st), st)
            return
        if isinstance(node, cst.Attribute):
            if isinstance(node.value, cst.Name) and node.value.value in st.shared and node.attr.value == "shape":
                return
            self.ev(node.value, st, cond)
            return
        if isinstance(node, cst.Call):
            callee = self.m.callees.get(node)
            kind = callee.kind if callee else "unknown"
            if kind == "builtin" and callee is not None and callee.name == "len" and len(node.args) == 1:
                if isinstance(node.args[0].value, cst.Name) and node.args[0].value.value in st.shared:
                    return
            self.ev(node.func, st, cond)
            for a in node.args:
                self.ev(a.value, st, cond)
            if not cond and (
                kind == "barrier"
                or (kind == "helper" and callee is not None and callee.fn is not None and self.must_barrier.get(callee.fn.name))
            ):
                st.pending.clear()
                st.fresh = False
            return
        if isinstance(node, cst.BooleanOperation):
            self.ev(node.left, st, cond)
            self.ev(node.right, st, True)
            return
        if isinstance(node, cst.IfExp):
            self.ev(node.test, st, cond)
            self.under(self.facts_of(node.test, st, True), lambda: self.ev(node.body, st, True))
            self.under(self.facts_of(node.test, st, False), lambda: self.ev(node.orelse, st, True))
            return
        if isinstance(node, cst.NamedExpr):
            self.ev(node.value, st, cond)
            self.store(node.target, node.value, st)
            return
        for child in node.children:
            self.ev_any(child, st, cond)

    def index_ev(self, node: cst.Subscript, st: State, cond: bool = False) -> None:
        for el in node.slice:
            self.ev_any(el.slice, st, cond)

    def shared_ids(self, node: cst.BaseExpression | None, st: State) -> frozenset[object] | None:
        """The allocations a shared-array expression may be; None when it is no shared array."""
        if node is None:
            return None
        if isinstance(node, cst.Name) and node.value in st.shared:
            return st.shared[node.value]
        if isinstance(node, cst.Call):
            c = self.m.callees.get(node)
            if c is not None and c.kind == "shared":
                return frozenset([self._allocation(node)])
        if isinstance(node, cst.IfExp):
            a, b = self.shared_ids(node.body, st), self.shared_ids(node.orelse, st)
            if a is not None or b is not None:
                return frozenset([ALL])
        v = self.m.values.get(node)
        if v is not None and v.kind == "shared":
            return frozenset([ALL])
        return None

    def _allocation(self, call: cst.Call) -> object:
        """A static array is its own call; every dynamic one (shape 0) is one region from the same
        base (per element type); a shape the checker cannot read may be either (ALL)."""
        shape = call.args[0].value if call.args else None
        dims: list[int] = []
        for e in shape.elements if isinstance(shape, cst.Tuple) else [shape]:  # type: ignore[union-attr]
            v = e.value if isinstance(e, cst.BaseElement) else e
            n = _module_int(self.m, v) if isinstance(v, cst.BaseExpression) else None
            if n is None:
                return ALL
            dims.append(n)
        if dims == [0]:
            elem = self.m.code(call.args[1].value) if len(call.args) > 1 else "?"
            return ("dynamic", elem)
        return call

    # ---- accesses --------------------------------------------------------------------------
    def access(self, node: cst.Subscript, write: bool, st: State, value: cst.BaseExpression | None = None) -> Access:
        ids = self.shared_ids(node.value, st) or frozenset([ALL])
        elems = index_elements(node)
        facts = tuple(f for f in self.facts if f is not None)
        index = None
        if elems is not None:
            index = tuple(self.form(e, st) for e in elems)
        vtext, vnames = None, frozenset[str]()
        if write and value is not None:
            v = self.m.values.get(value)
            if v is not None and v.kind == "scalar" and not v.tdep and not _reads_shared(value, st):
                vtext, vnames = self.m.code(value), _free_names(value)
        return Access(node, write, ids, index, facts, vtext, vnames)

    def touch(self, b: Access, st: State) -> None:
        if b.node not in self.races:
            if b.write and self.conflict(b, frozenset(), b):
                self.races[b.node] = Race(b, None)
            else:
                for a, dirty in st.pending.items():
                    if self.conflict(a, dirty, b):
                        self.races[b.node] = Race(b, a)
                        break
        st.pending[b] = st.pending.get(b, frozenset())

    def conflict(self, a: Access, dirty: frozenset[str], b: Access) -> bool:
        if not (a.write or b.write):
            return False
        if ALL in a.arrays or ALL in b.arrays:
            return True  # an array the check cannot place: its elements may be anywhere
        dyn_a = {x for x in a.arrays if isinstance(x, tuple)}
        dyn_b = {x for x in b.arrays if isinstance(x, tuple)}
        if dyn_a and dyn_b and dyn_a != dyn_b:
            return True  # dynamic arrays of different element types share one region
        if not (a.arrays & b.arrays):
            return False
        every = ALL in dirty
        if a.write and b.write and a.value is not None and a.value == b.value and not every and not (a.value_names & dirty):
            return False  # every thread writes the same block-uniform value (a benign race)
        if a.index is None or b.index is None or len(a.index) != len(b.index):
            return True
        fa = tuple(f for f, names in a.facts if not every and not (names & dirty))
        fb = tuple(f for f, _ in b.facts)
        ia = [None if every or (names & dirty) else normalize(f, self.block) for f, names in a.index]
        ib = [normalize(f, self.block) for f, _ in b.index]
        if any(f is None for f in ia) or any(f is None for f in ib):
            return True
        ia = [pin(f, fa) for f in ia]  # type: ignore[arg-type]
        ib = [pin(f, fb) for f in ib]  # type: ignore[arg-type]
        for x, y in zip(ia, ib):
            if separated(x, fa, y, fb, self.block):  # type: ignore[arg-type]
                return False
        for n, (x, y) in enumerate(zip(ia, ib)):
            # `tid` (a first iteration) and `Stride(tid, 256)` (any iteration) share one residue
            j = join_forms(x, y) if x != y else None  # type: ignore[arg-type]
            if isinstance(j, Stride):
                ia[n] = ib[n] = j
        return not (ia == ib and injective(tuple(ia), fa, fb, self.block))  # type: ignore[arg-type]

    # ---- forms and facts -------------------------------------------------------------------
    def form(self, node: cst.BaseExpression, st: State) -> Named:
        none: Named = (None, frozenset())
        if isinstance(node, cst.Integer):
            return Lin((), int(node.evaluated_value)), frozenset()
        if isinstance(node, cst.Name):
            if node.value in st.forms:
                return st.forms[node.value]
            if node.value in st.consts:
                return Lin((), st.consts[node.value]), frozenset()
            return self.uniform(node)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
            f, names = self.form(node.expression, st)
            if isinstance(f, Lin):
                return (f.scale(-1) if isinstance(node.operator, cst.Minus) else f), names
            return self.uniform(node)
        if isinstance(node, cst.BinaryOperation):
            left, right = self.form(node.left, st), self.form(node.right, st)
            op = node.operator
            if isinstance(op, (cst.Add, cst.Subtract)):
                got = _arith(left, right, isinstance(op, cst.Add))
                if got is not None:
                    return got
            elif isinstance(op, cst.Multiply) and isinstance(left[0], Lin) and isinstance(right[0], Lin):
                if left[0].is_const:
                    return right[0].scale(left[0].const), right[1]
                if right[0].is_const:
                    return left[0].scale(right[0].const), left[1]
            elif isinstance(op, (cst.FloorDivide, cst.Modulo)) and isinstance(left[0], Lin) and isinstance(right[0], Lin):
                d = right[0].const if right[0].is_const else 0
                if d > 0 and left[0].is_const:
                    num = left[0].const
                    return Lin((), num // d if isinstance(op, cst.FloorDivide) else num % d), frozenset()
                if d > 0 and left[0].thread():
                    return (Div(left[0], d) if isinstance(op, cst.FloorDivide) else Mod(left[0], d)), left[1]
            return self.uniform(node)
        if isinstance(node, cst.Call):
            c = self.m.callees.get(node)
            short = c.name.split(".")[-1] if c is not None else ""
            if c is not None and c.kind == "rawid" and short in _TIDS:
                return Lin.make({_TIDS[short]: 1}), frozenset()
            if c is not None and c.kind == "rawid" and short == "lane_id":
                bx, by, bz = self.block.ext
                if bx is not None and (bx % 32 == 0 or by == bz == 1):
                    return Mod(Lin.make({TX: 1}), 32), frozenset()  # the lane of the linear thread id
                return none
            if c is not None and c.kind == "rawid" and short in _DIMS and self.block.ext[_DIMS[short]] is not None:
                return Lin((), self.block.ext[_DIMS[short]]), frozenset()  # type: ignore[arg-type]
            if c is not None and c.kind == "cast" and len(node.args) == 1 and short in ("i32", "i64", "u32", "u64"):
                inner = self.form(node.args[0].value, st)
                if inner[0] is not None:
                    return inner
            return self.uniform(node)
        return self.uniform(node)

    def uniform(self, node: cst.BaseExpression) -> Named:
        """A block-uniform value as an opaque symbol (keyed by its text)."""
        v = self.m.values.get(node)
        if v is None or v.tdep or v.kind not in ("scalar", "global"):
            return None, frozenset()
        return Lin.sym(self.m.code(node)), _free_names(node)

    def facts_of(self, test: cst.BaseExpression, st: State, positive: bool) -> list[tuple[Fact, frozenset[str]]]:
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self.facts_of(test.expression, st, not positive)
        if isinstance(test, cst.BooleanOperation):
            if isinstance(test.operator, cst.And) == positive:
                return self.facts_of(test.left, st, positive) + self.facts_of(test.right, st, positive)
            return []
        if not isinstance(test, cst.Comparison):
            return []
        if not positive and len(test.comparisons) != 1:
            return []
        out = []
        left = test.left
        for c in test.comparisons:
            op = type(c.operator).__name__
            if not positive:
                op = _NEGATE.get(op, "")
            out += self._compare(self.form(left, st), op, self.form(c.comparator, st))
            left = c.comparator
        return out

    def _compare(self, lf: Named, op: str, rf: Named) -> list[tuple[Fact, frozenset[str]]]:
        names = lf[1] | rf[1]
        l, r = lf[0], rf[0]
        if op == "Equal" and isinstance(r, Mod) and isinstance(l, Lin):
            l, r = r, l
        if op == "Equal" and isinstance(l, Mod) and isinstance(r, Lin) and r.is_const:
            th = l.lin.thread()
            if len(th) == 1 and list(th.values())[0] == 1 and l.lin.const == 0 and len(l.lin.terms) == 1:
                return [(("mod", next(iter(th)), l.m, r.const % l.m), names)]
            return []
        if not (isinstance(l, Lin) and isinstance(r, Lin)) or op not in _BOUNDS:
            return []
        diff = l - r  # diff OP 0
        th = diff.thread()
        if len(th) != 1:
            return []
        ((comp, a),) = th.items()
        if a not in (1, -1):
            return []
        rest = diff - Lin.make({comp: a})
        if a == 1:  # t + rest OP 0  ->  t OP -rest
            bound, op2 = rest.scale(-1), op
        else:  # -t + rest OP 0  ->  t OP' rest
            bound, op2 = rest, _FLIP[op]
        out = []
        lo, hi = _BOUNDS[op2]
        if lo is not None:
            out.append((("lo", comp, bound + Lin((), lo)), names))
        if hi is not None:
            out.append((("hi", comp, bound + Lin((), hi)), names))
        return out


# op -> (offset of the lower bound, offset of the upper bound) for `t OP bound`
_BOUNDS: dict[str, tuple[int | None, int | None]] = {
    "LessThan": (None, -1),
    "LessThanEqual": (None, 0),
    "GreaterThan": (1, None),
    "GreaterThanEqual": (0, None),
    "Equal": (0, 0),
}
_FLIP = {"LessThan": "GreaterThan", "LessThanEqual": "GreaterThanEqual", "GreaterThan": "LessThan",
         "GreaterThanEqual": "LessThanEqual", "Equal": "Equal"}
_NEGATE = {"LessThan": "GreaterThanEqual", "LessThanEqual": "GreaterThan", "GreaterThan": "LessThanEqual",
           "GreaterThanEqual": "LessThan", "NotEqual": "Equal"}


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


def _arith(a: Named, b: Named, add: bool) -> Named | None:
    x, y = a[0], b[0]
    if isinstance(x, Lin) and isinstance(y, Lin):
        return (x + y if add else x - y), a[1] | b[1]
    if isinstance(x, Stride) and isinstance(y, Lin) and not y.thread():
        return Stride(x.lin + y if add else x.lin - y, x.step), a[1] | b[1]
    if isinstance(y, Stride) and isinstance(x, Lin) and add and not x.thread():
        return Stride(y.lin + x, y.step), a[1] | b[1]
    return None


def _names_of(a: Access) -> frozenset[str]:
    out: frozenset[str] = a.value_names
    for _, names in a.index or ():
        out |= names
    for _, names in a.facts:
        out |= names
    return out


def _free_names(node: cst.CSTNode) -> frozenset[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            out.add(n.value)
        elif isinstance(n, cst.Attribute):
            stack.append(n.value)  # `x.shape`: the attribute is no name of its own
        else:
            stack.extend(n.children)
    return frozenset(out)


def _reads_shared(node: cst.CSTNode, st: State) -> bool:
    return any(n in st.shared for n in _free_names(node))


def _module_int(m: ModuleModel, node: cst.BaseExpression) -> int | None:
    """An int literal, or a module-level `NAME = <int>` bound once."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if not isinstance(node, cst.Name):
        return None
    found: list[int | None] = []
    for stmt in m.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == node.value for t in small.targets
                ):
                    found.append(int(small.value.evaluated_value) if isinstance(small.value, cst.Integer) else None)
    return found[0] if len(found) == 1 else None


def _const(node: cst.BaseExpression, st: State) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.Name):
        return st.consts.get(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        v = _const(node.expression, st)
        return None if v is None else -v
    return None


def _const_test(test: cst.BaseExpression, st: State) -> bool | None:
    """A `while` test that the known constants decide."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    a, b = _const(test.left, st), _const(test.comparisons[0].comparator, st)
    if a is None or b is None:
        return None
    op = type(test.comparisons[0].operator).__name__
    table = {"LessThan": a < b, "LessThanEqual": a <= b, "GreaterThan": a > b, "GreaterThanEqual": a >= b,
             "Equal": a == b, "NotEqual": a != b}
    return table.get(op)


__all__ = ["ALL", "Access", "Intervals", "Race"]

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
from .int_types import IntTypes
from .kernel_model import FunctionInfo, ModuleModel, index_elements
from anodize.language.walk import child_fields

ALL = "*"  # an access to any shared array / every name dirty
_TIDS = {"tid_x": TX, "tid_y": TY, "tid_z": TZ}
_DIMS = {"block_dim_x": 0, "block_dim_y": 1, "block_dim_z": 2}
_MAX_PASSES = 24
Named = tuple[Form | None, frozenset[str]]  # a form and the names it reads
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

    def __hash__(self) -> int:
        # the fields' hash, computed once: an access keys the pending dicts of every state
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.node, self.write, self.arrays, self.index, self.facts, self.value, self.value_names))
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


class Intervals:
    def __init__(
        self,
        model: ModuleModel,
        fn: FunctionInfo,
        block: Block,
        must_barrier: dict[str, bool],
        dynamic: dict[str, DynSummary] | None = None,
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
        self.types = IntTypes(model, fn)
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
            enters = _const_test(s.test, st) is True
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
            old = self.form(target, st)
            val = self.form(s.value, st)
            if old[0] is not None and val[0] is not None and isinstance(s.op, (ast.Add, ast.Sub)):
                new = self._arith(old, val, isinstance(s.op, ast.Add))
            self.assign(target.id, st, new)
        else:
            self.ev(target, st)
        return st

    def store(self, target: ast.expr, value: ast.expr | None, st: State) -> None:
        if isinstance(target, ast.Name):
            ids = self.shared_ids(value, st) if value is not None else None
            form = self.form(value, st) if value is not None else None
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
        if isinstance(val, Lin) and not val.exact and val.eo and self.types.rebound(name):
            # stored into a local typed by an earlier binding: converted (wrapping) to that type
            val = val.flagged(False, False, val.sg)
            form = val, form[1]
        if isinstance(val, Lin) and val.is_const:
            if val.exact:
                st.consts[name] = val.const
        elif name not in form[1] and (isinstance(val, (Div, Mod, Stride)) or val.thread()):
            st.forms[name] = form  # a thread-affine local

    def for_(self, s: ast.For | ast.AsyncFor, st: State) -> State | None:
        self.ev(s.iter, st)
        var = self._range_stride(s.iter, st)
        target = s.target

        def head(e: State) -> None:
            self.store(target, None, e)
            if var is not None and isinstance(target, ast.Name):
                e.forms[target.id] = var  # `for j in range(tid, n, 256)`

        return self.loop(st, head, s.body, s.orelse, False)

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
        self, entry: State, head, body: list[ast.stmt], orelse: list[ast.stmt], enters: bool
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
            head(ex)
        if orelse and ex is not None:
            ex = self.block_(orelse, ex)
        for b in lp.breaks:
            ex = join(ex, b)
        return ex

    def _range_stride(self, it: ast.expr, st: State) -> Named | None:
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
        start = self.form(args[0], st)
        step = self.form(args[2], st)
        if not (isinstance(start[0], Lin) and start[0].thread() and not start[1]):
            return None
        if not (isinstance(step[0], Lin) and step[0].is_const and pow2(step[0].const)):
            return None  # a power of two: the residue modulo the step survives wrapping
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
                if v.id in st.shared and node.attr != "shape":
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
        if elems is not None:
            index = tuple(self.form(e, st) for e in elems)
        vtext, vnames = None, frozenset[str]()
        if write and value is not None:
            v = self.m.values.get(value)
            if v is not None and v.kind == "scalar" and not v.tdep and not _reads_shared(value, st):
                vtext, vnames = self.m.code(value), _free_names(value)
        return Access(node, write, ids, index, facts, vtext, vnames)

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

    # ---- forms and facts -------------------------------------------------------------------
    def form(self, node: ast.expr, st: State) -> Named:
        none: Named = (None, frozenset())
        if isinstance(node, ast.Name):
            name = node.id
            if name in st.forms:
                return st.forms[name]
            if name in st.consts:
                return Lin((), st.consts[name]), frozenset()
            return self.uniform(node)
        if isinstance(node, ast.Constant):
            if type(node.value) is int:
                v = node.value
                exact = -_HALF <= v < _HALF  # a weak literal may become an i32 (wrapping)
                return Lin((), v, exact, exact, "w"), frozenset()
            return self.uniform(node)
        if isinstance(node, ast.BinOp):
            left, right = self.form(node.left, st), self.form(node.right, st)
            op = type(node.op)
            if op is ast.Add or op is ast.Sub:
                got = self._arith(left, right, op is ast.Add)
                if got is not None:
                    return got
            elif op is ast.Mult and isinstance(left[0], Lin) and isinstance(right[0], Lin):
                x, y = left[0], right[0]
                if x.is_const or y.is_const:
                    k, f, names = (x, y, right[1]) if x.is_const else (y, x, left[1])
                    r = f.scale(k.const)
                    sg = _sg(x.sg, y.sg)
                    exact = f.exact and k.exact and self._fits(r, sg)
                    return r.flagged(exact, exact, sg), names  # a wrapped product lands anywhere
            elif (op is ast.FloorDiv or op is ast.Mod) and isinstance(left[0], Lin) and isinstance(right[0], Lin):
                x, y = left[0], right[0]
                d = y.const if y.is_const and y.exact else 0
                if d > 0 and x.is_const and x.exact:
                    num = x.const
                    return Lin((), num // d if op is ast.FloorDiv else num % d, True, True, _sg(x.sg, y.sg)), frozenset()
                if d > 0 and x.thread():
                    # floor division needs the exact value; a power-of-two modulus only the value
                    # modulo 2**32 (it divides 2**32)
                    if op is ast.FloorDiv and x.exact:
                        return Div(x, d), left[1]
                    if op is ast.Mod and (x.exact or pow2(d)):
                        return Mod(x, d), left[1]
            return self.uniform(node)
        if isinstance(node, ast.UnaryOp) and type(node.op) in (ast.USub, ast.UAdd):
            f, names = self.form(node.operand, st)
            if isinstance(f, Lin):
                if isinstance(node.op, ast.UAdd):
                    return f, names
                r = f.scale(-1)
                exact = f.exact and self._fits(r, f.sg)
                # a signed value that wrapped (far from 0) stays far from 0 negated
                eo = exact or (f.sg == "s" and f.eo and self._small(r))
                return r.flagged(exact, eo, f.sg), names
            return self.uniform(node)
        if isinstance(node, ast.Call):
            c = self.m.callees.get(node)
            if c is None:
                return self.uniform(node)
            short = c.name.split(".")[-1]
            if c.kind == "rawid":
                if short in _TIDS:
                    return Lin(((_TIDS[short], 1),), 0, True, True, "s"), frozenset()
                if short == "lane_id":
                    bx, by, bz = self.block.ext
                    if bx is not None and (bx % 32 == 0 or by == bz == 1):
                        return Mod(Lin.make({TX: 1}), 32), frozenset()  # the lane of the linear thread id
                    return none
                ext = self.block.ext[_DIMS[short]] if short in _DIMS else None
                if ext is not None:
                    return Lin((), ext, True, True, "s"), frozenset()
            elif c.kind == "cast" and short in _CASTS:
                args = _arg_values(node)
                if len(args) == 1:
                    got = self._cast(self.form(args[0], st), short)
                    if got is not None:
                        return got
            return self.uniform(node)
        return self.uniform(node)

    # ---- machine integer flags (index_forms.py, "Machine integers") --------------------------
    def _vrange(self, lin: Lin) -> tuple[int, int] | None:
        """The value range of a form of thread ids and constants over the block (None with symbols)."""
        lo = hi = lin.const
        for k, a in lin.terms:
            if k not in COMPS:
                return None
            e = self.block.extent(k)
            top = a * ((e if e is not None else MAX_EXTENT) - 1)
            if top > 0:
                hi += top
            else:
                lo += top
        return lo, hi

    def _fits(self, lin: Lin, sg: str) -> bool:
        """Every machine type of signedness `sg` (32 bits or more) holds the form's every value."""
        r = self._vrange(lin)
        if r is None:
            return False
        return (-_HALF if sg == "s" else 0) <= r[0] and r[1] < _HALF

    def _small(self, lin: Lin) -> bool:
        """At most one symbol, with coefficient 1 or -1, plus a part within [-2**30, 2**30]."""
        syms = [(k, a) for k, a in lin.terms if k not in COMPS]
        if len(syms) > 1 or (syms and syms[0][1] not in (1, -1)):
            return False
        r = self._vrange(Lin(tuple([t for t in lin.terms if t[0] in COMPS]), lin.const))
        return r is not None and -_OOB <= r[0] and r[1] <= _OOB

    def _arith(self, a: Named, b: Named, add: bool) -> Named | None:
        got = _arith(a, b, add)
        if got is None or not isinstance(got[0], Lin):
            return got
        x, y, r = a[0], b[0], got[0]
        assert isinstance(x, Lin) and isinstance(y, Lin)
        sg = _sg(x.sg, y.sg)
        exact = x.exact and y.exact and self._fits(r, sg)
        # a signed sum wraps to a value far from every index: exact or out of bounds, as long as
        # one symbol at most is in it and no operand is an unsigned value that wrapped
        eo = exact or (
            sg == "s"
            and x.eo
            and y.eo
            and (x.exact or x.sg == "s")
            and (y.exact or y.sg == "s")
            and self._small(r)
        )
        return r.flagged(exact, eo, sg), got[1]

    def _cast(self, inner: Named, to: str) -> Named | None:
        """`i32(x)`, `u32(x)`, `i64(x)`, `u64(x)` of a form: the same value when it fits."""
        f = inner[0]
        if f is None:
            return None
        if isinstance(f, Stride):
            return inner  # the residue modulo the (power-of-two) step survives any int cast
        sg = "u" if to[0] == "u" else "s"
        if isinstance(f, Mod):
            return inner  # in [0, m - 1]
        if isinstance(f, Div):
            return inner if sg == "s" or self._fits(f.lin, "u") else None
        if not f.thread() and not (f.is_const and f.exact):
            return None  # a block-uniform value: the cast is a symbol of its own (its text)
        exact = f.exact and self._fits(f, sg)
        eo = exact or (to in ("i64", "int") and f.eo and f.sg == "s")  # sign extension keeps it far
        return f.flagged(exact, eo, sg), inner[1]

    def uniform(self, node: ast.expr) -> Named:
        """A block-uniform value as an opaque symbol (keyed by its text); a node's is computed once."""
        hit = self._uniform.get(node)
        if hit is None:
            v = self.m.values.get(node)
            if v is None or v.tdep or v.kind not in ("scalar", "global"):
                hit = None, frozenset()
            else:
                kind = self.types.kind(node)
                if kind == "f":
                    hit = None, frozenset()  # a float (or untyped) value: no integer symbol
                else:  # its machine value: exact by definition
                    hit = Lin(((self.m.code(node), 1),), 0, True, True, kind), _free_names(node)
            self._uniform[node] = hit
        return hit

    def facts_of(
        self, test: ast.expr, st: State, positive: bool, memo: dict[ast.expr, Named] | None = None
    ) -> list[tuple[Fact, frozenset[str]]]:
        """What `test` being `positive` says about the thread id (`memo`: forms already computed
        in this state)."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.facts_of(test.operand, st, not positive, memo)
        if isinstance(test, ast.BoolOp):
            if (isinstance(test.op, ast.And)) == positive:
                got: list[tuple[Fact, frozenset[str]]] = []
                for v in test.values:
                    got += self.facts_of(v, st, positive, memo)
                return got
            return []
        if not isinstance(test, ast.Compare):
            return []
        ops = test.ops
        if not positive and len(ops) != 1:
            return []
        out = []
        left = test.left
        if memo is None:
            memo = {}
        for o, right in zip(ops, test.comparators):
            op = type(o).__name__
            if not positive:
                op = _NEGATE.get(op, "")
            lf = memo.get(left)
            if lf is None:
                lf = memo[left] = self.form(left, st)
            rf = memo.get(right)
            if rf is None:
                rf = memo[right] = self.form(right, st)
            out += self._compare(lf, op, rf)
            left = right
        return out

    def _compare(self, lf: Named, op: str, rf: Named) -> list[tuple[Fact, frozenset[str]]]:
        names = lf[1] | rf[1]
        l, r = lf[0], rf[0]
        if op == "Eq" and isinstance(r, Mod) and isinstance(l, Lin):
            l, r = r, l
        if op == "Eq" and isinstance(l, Mod) and isinstance(r, Lin) and r.is_const and r.exact:
            th = l.lin.thread()
            if len(th) == 1 and list(th.values())[0] == 1 and l.lin.const == 0 and len(l.lin.terms) == 1:
                return [(("mod", next(iter(th)), l.m, r.const % l.m), names)]
            return []
        if not (isinstance(l, Lin) and isinstance(r, Lin)) or op not in _BOUNDS:
            return []
        if not (l.exact and r.exact):
            return []  # a value that may have wrapped (an unsigned difference...) says nothing
        diff = l - r  # diff OP 0
        th = diff.thread()
        if len(th) != 1:
            return []
        ((comp, a),) = th.items()
        if a not in (1, -1):
            return []
        rest = Lin(tuple([t for t in diff.terms if t[0] != comp]), diff.const)  # diff - a * comp
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


_HALF = 1 << 31
_OOB = 1 << 30  # no shared array axis has this many elements
_CASTS = frozenset({"i32", "i64", "u32", "u64", "int"})


def _sg(a: str, b: str) -> str:
    """The signedness of `a op b` (types.promote: signed with unsigned is signed; weak adopts)."""
    if a == "s" or b == "s":
        return "s"
    if a == "u" or b == "u":
        return "u"
    return "?" if a == "?" or b == "?" else "w"


# op (an `ast.cmpop` class name) -> (offset of the lower bound, offset of the upper bound) for `t OP bound`
_BOUNDS: dict[str, tuple[int | None, int | None]] = {
    "Lt": (None, -1),
    "LtE": (None, 0),
    "Gt": (1, None),
    "GtE": (0, None),
    "Eq": (0, 0),
}
_FLIP = {"Lt": "Gt", "LtE": "GtE", "Gt": "Lt", "GtE": "LtE", "Eq": "Eq"}
_NEGATE = {"Lt": "GtE", "LtE": "Gt", "Gt": "LtE", "GtE": "Lt", "NotEq": "Eq"}


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


def _free_names(node: ast.AST) -> frozenset[str]:
    """The names an expression reads (with keyword and lambda parameter names, as the old
    engine counted them; an attribute's name is no name of its own)."""
    out: set[str] = set()
    todo: list[object] = [node]
    pop, push, extend = todo.pop, todo.append, todo.extend
    while todo:  # every node below `node`, as `ast.walk` (with a stack)
        n = pop()
        cls = n.__class__
        if cls is ast.Name:
            out.add(n.id)  # type: ignore[attr-defined]
            continue
        if (cls is ast.keyword or cls is ast.arg) and n.arg:  # type: ignore[attr-defined]
            out.add(n.arg)  # type: ignore[attr-defined]
        fields = _FIELDS.get(cls)
        if fields is None:
            fields = _FIELDS[cls] = child_fields(cls)
        for f in fields:
            v = getattr(n, f)
            if v.__class__ is list:
                extend(v)
            elif v is not None:
                push(v)
    return frozenset(out)


_FIELDS: dict[type, tuple[str, ...]] = {}  # node class -> its fields that may hold nodes


def _reads_shared(node: ast.AST, st: State) -> bool:
    return any(n in st.shared for n in _free_names(node))


def _arg_values(call: ast.Call) -> list[ast.expr]:
    """A call's argument expressions, positional then keyword (`*x` as `x`, `**k` as `k`)."""
    out = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
    out += [k.value for k in call.keywords]
    return out


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


def _const(node: ast.expr, st: State) -> int | None:
    if isinstance(node, ast.Constant):
        return _int(node)
    if isinstance(node, ast.Name):
        return st.consts.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _const(node.operand, st)
        return None if v is None else -v
    return None


def _const_test(test: ast.expr, st: State) -> bool | None:
    """A `while` test that the known constants decide."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    a, b = _const(test.left, st), _const(test.comparators[0], st)
    if a is None or b is None:
        return None
    op = type(test.ops[0]).__name__
    table = {"Lt": a < b, "LtE": a <= b, "Gt": a > b, "GtE": a >= b, "Eq": a == b, "NotEq": a != b}
    return table.get(op)


__all__ = ["ALL", "Access", "Intervals", "Race"]

"""The race walk's expressions and accesses (checker/barrier_intervals.py): evaluation in
order for effect (shared reads and writes, barriers, helper calls, escapes), which shared
arrays an expression may be, and whether two accesses conflict (index_forms.py decides).
A collaborator of `Intervals` over its `WalkState` (barrier_state.py); index forms are
`FormEval`'s (index_eval.py)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .index_forms import Stride, exact_or_oob, injective, join_forms, normalize, pin, plain, separated
from .index_eval import FormEval, Named, _arg_values, _free_names
from . import safe_shared
from .shared_slots import SlotReader, Slots
from .kernel_values import index_elements
from .barrier_state import ALL, _LEAVES, Access, DynPart, Race, State, WalkState, _add, _dynamic, _module_int, _reads_shared

_NO_NAMES: frozenset[str] = frozenset()  # (a module constant: `frozenset[str]()` builds a generic alias per call)


if TYPE_CHECKING:
    from .barrier_intervals import Intervals


class AccessWalk:
    """The expressions and shared-memory accesses of the race walk."""

    def __init__(self, st: WalkState, forms: FormEval, stmts: Intervals):
        self.st = st
        self.m = st.m
        self.fn = st.fn
        self.block = st.block
        self.must_barrier = st.must_barrier
        self.dynamic = st.dynamic
        self.stmts = stmts
        self.form = forms.form
        self.facts_of = forms.facts_of
        self._slots = SlotReader(st.m, st.fn, st.block.ext, st.types, _module_int)
        self._owners: dict[ast.Subscript, Slots | str | None] = {}
        self._sa_funcs: set[ast.expr] | None = None  # `_atomic_method`'s (on first use)

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
                self.st.escapes.setdefault(node, node.id)
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
                    self.st.escapes.setdefault(v, v.id)
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
                (callee is not None and callee.decl is not None and callee.decl.barrier)  # or a block collective: ends with one
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
            self.st.under(self.facts_of(node.test, st, True), lambda: self.ev(node.body, st, True))
            self.st.under(self.facts_of(node.test, st, False), lambda: self.ev(node.orelse, st, True))
            return
        if isinstance(node, ast.NamedExpr):
            self.ev(node.value, st, cond)
            self.stmts.store(node.target, node.value, st)
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
        funcs = self._sa_funcs
        if funcs is None:
            funcs = self._sa_funcs = {c.func for c, k in self.m.callees.items() if k.kind == "shared_atomic"}
        return node in funcs

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
            if c is not None and c.kind == "shared_array":
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
            n = _module_int(self.m, v, self.fn) if v is not None else None
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
        facts = tuple([f for f in self.st.facts if f is not None])
        index = None
        ctx = self.m.ctx.get(node)
        safe = ctx is not None and not ctx.unsafe
        witness = safe_shared.witness_rank(self.m, node)
        owner = self._owner(node, ids, witness) if safe else None
        if elems is not None:
            index = safe_shared.witness_index(self, node, witness) or tuple(self.form(e, st) for e in elems)
        vtext, vnames = None, _NO_NAMES
        if write and value is not None:
            v = self.m.values.get(value)
            if v is not None and v.kind == "scalar" and not v.tdep and not _reads_shared(value, st):
                vtext, vnames = self.m.code(value), _free_names(value)
        return Access(node, write, ids, index, facts, vtext, vnames, safe, witness, owner)

    def _owner(self, node: ast.Subscript, ids: frozenset[object], witness: int) -> Slots | None:
        """The slots a safe-tier access reaches, as the thread's own (shared_slots.py), for an
        access of one static array; a multi-slot verdict is kept for the rule's report."""
        got = self._owners.get(node, False)
        if got is False:
            (alloc,) = ids if len(ids) == 1 else (None,)
            shape = self._shape(alloc) if isinstance(alloc, ast.Call) else None
            rank = len(shape) if shape is not None else witness
            got = self._slots.read(node, shape, rank, witness)
            if isinstance(got, str) or (got is not None and got.checked):
                self.st.slots[node] = got
            self._owners[node] = got
        return got if isinstance(got, Slots) else None

    def _shape(self, call: ast.Call) -> tuple[int, ...] | None:
        """A static array's constant shape (None when the check cannot read it)."""
        args = _arg_values(call)
        shape = args[0] if args else None
        dims: list[int] = []
        for e in shape.elts if isinstance(shape, ast.Tuple) else [shape]:
            n = _module_int(self.m, e, self.fn) if isinstance(e, ast.expr) and not isinstance(e, ast.Starred) else None
            if n is None or n <= 0:
                return None
            dims.append(n)
        return tuple(dims)

    def _summary_access(self, call: ast.Call, part: DynPart) -> Access:
        facts = tuple([f for f in self.st.facts if f is not None])
        return Access(call, part[0], part[1], None, facts)  # type: ignore[arg-type]

    def touch(self, b: Access, st: State) -> None:
        summary = b.node.__class__ is ast.Call  # a helper's dynamic accesses, checked in its own walk
        if st.fresh and _dynamic(b.arrays):
            self.st.head = _add(self.st.head, b)
        if b.node not in self.st.races:
            if b.write and not summary and self.conflict(b, frozenset(), b):
                self.st.races[b.node] = Race(b, None)
            else:
                for a, dirty in st.pending.items():
                    if summary and a.node is b.node:
                        continue
                    if self.conflict(a, dirty, b):
                        self.st.races[b.node] = Race(b, a)
                        break
        st.pending[b] = st.pending.get(b, frozenset())
        self.st.log.append(b)

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

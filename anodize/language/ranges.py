"""Integer range facts: the prover that removes bounds checks guards already imply.

Guards (`if r > 0 and r < rows - 1:`, `if not (...): return`), witness guards
(`ij in out`), a grid-stride loop's index and `requires` relations become
*difference constraints* `u - v <= k` between *atoms*, integers that cannot
change while a fact about them is alive:

* `("len", slice, axis)`: a slice's extent along an axis, `0 <= len <= 2**63 - 1`;
* `("var", name)`: a local with one binding in its function (assigned once,
  never reassigned, never a loop-carried value);
* `("wpart", name, part)`: `i.get()`, `ij.row` or `ij.col` of such a witness;
* `("raw", reg, axis)`: a raw thread id (unsafe tier), `tid.x < block.x` when the
  contract fixes the block;
* `ZERO`, the constant 0, so `x >= 1` is `ZERO - x <= -1`.

Facts are about mathematical integers.  An expression is *linear* (`atom + c`)
only when its machine value provably equals that integer: every `+`/`-` and
every integer cast on the way is checked not to wrap, using the facts known at
that point (so `x + 1` with an unbounded `x: i64` is not linear, while
`r + 1` inside `r < rows - 1` is).  A comparison gives facts only when both of
its sides are linear in the comparison's type; its signedness is the type's.
An index `e` is in range for an extent `n` when the facts prove `0 <= e` and
`e <= n - 1` (shortest paths over the constraint graph, Bellman-Ford; a
contradictory set of facts proves nothing).

The typer owns scoping: facts live in the region their guard dominates and
are dropped when a name they mention is assigned (typer_stmts.py, with `RangeFacts` below).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from functools import partial
from itertools import repeat
from operator import add
from typing import TYPE_CHECKING, NamedTuple

from anodize.language import contract as C
from anodize.language import ir
from anodize.language.types import I64, ScalarTy, WitnessTy
from anodize.language.vocab import WITNESS_PARTS
from anodize.language.binding_counts import bindings as _bindings, body_text as _body_text

if TYPE_CHECKING:
    from anodize.language.typer_state import FnState

Atom = tuple[str, ...]
ZERO: Atom = ("0",)
Edge = tuple[Atom, Atom, int]  # (u, v, k): u - v <= k

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1
LEN_DOMAIN = (0, I64_MAX)

__all__ = ["Atom", "ZERO", "Edge", "Lin", "Prover", "RangeEnv", "RangeFacts", "type_range", "le_edge", "I64_MAX", "I64_MIN"]


def type_range(ty: ScalarTy) -> tuple[int, int]:
    """The values an integer type holds, read with its signedness."""
    return ty.value_range


def machine_value(v: int, ty: ScalarTy) -> int:
    """The value a constant has once lowered to `ty` (wrapped), read with its signedness."""
    v &= (1 << ty.bits) - 1
    if ty.signed and v >= 1 << (ty.bits - 1):
        v -= 1 << ty.bits
    return v


class Lin(NamedTuple):
    """`atom + c` over the integers (`atom` ZERO for a constant).  A named tuple: the typer
    makes several per index it proves in range, and a tuple is built in a fraction of a
    frozen dataclass's time."""

    atom: Atom
    c: int


# `Lin(atom, c)` without the named tuple's Python-level `__new__` (a frame a form: the typer
# makes several per index it proves in range)
_lin: Callable[[tuple[Atom, int]], Lin] = partial(tuple.__new__, Lin)  # type: ignore[assignment]


def le_edge(a: Lin, b: Lin, k: int = 0) -> Edge:
    """The edge for `a <= b + k`."""
    return (a.atom, b.atom, b.c - a.c + k)


class Prover:
    """The facts at one program point, with every atom's a priori domain.

    The closure (shortest paths between every pair of atoms the facts mention,
    Floyd-Warshall) is computed once, on the first query; an atom the facts do not
    mention is related to the others only through its domain."""

    def __init__(self, edges: Iterable[Edge], domain: Callable[[Atom], tuple[int, int]]):
        self._given = edges  # read on the first query that needs them (`fits` by a domain needs none)
        self.edges: dict[tuple[Atom, Atom], int] = {}
        self.contradiction = False
        self.domain = domain
        self._index: dict[Atom, int] | None = None
        self._d: list[list[float]] = []

    def _closure(self) -> dict[Atom, int]:
        if self._index is not None:
            return self._index
        edges = self.edges
        for u, v, k in self._given:
            if u != v:
                old = edges.get((u, v))
                if old is None or k < old:
                    edges[(u, v)] = k
            elif k < 0:
                self.contradiction = True  # x - x <= negative
        self._given = ()
        atoms: dict[Atom, tuple[int, int]] = {}
        for u, v in self.edges:
            for a in (u, v):
                if a not in atoms and a != ZERO:
                    atoms[a] = self.domain(a)
        # the closure is a function of the edges and the atoms' domains alone: kernels written
        # alike (one idiom, the same names) share it (a process-wide table, bounded)
        key = (frozenset(self.edges.items()), frozenset(atoms.items()))
        hit = _CLOSURES.get(key)
        if hit is None:
            hit = _floyd_warshall(self.edges, atoms)
            if len(_CLOSURES) >= _CLOSURES_MAX:
                _CLOSURES.clear()
            _CLOSURES[key] = hit
        nodes, self._d, negative = hit
        if negative:
            self.contradiction = True  # a negative cycle: the facts contradict each other
        self._index = nodes
        return nodes

    def dist(self, src: Atom, dst: Atom) -> float:
        """The least `k` the facts give for `dst - src <= k` (inf when none)."""
        if src == dst:
            return 0
        nodes = self._closure()
        d = self._d
        si, di = nodes.get(src), nodes.get(dst)
        if si is not None and di is not None:
            return d[si][di]
        # an atom the facts do not mention is linked to the rest only through ZERO (its domain)
        to_zero = d[si][0] if si is not None else -self.domain(src)[0]
        from_zero = d[0][di] if di is not None else self.domain(dst)[1]
        return to_zero + from_zero

    def diff_le(self, u: Atom, v: Atom, k: int) -> bool:
        """Whether the facts prove `u - v <= k`."""
        if u == v:
            return k >= 0
        self._closure()
        if self.contradiction:
            return False
        return self.dist(v, u) <= k

    def le(self, a: Lin, b: Lin, k: int = 0) -> bool:
        """Whether the facts prove `a <= b + k`."""
        u, v, kk = le_edge(a, b, k)
        return self.diff_le(u, v, kk)

    def bounds(self, a: Lin) -> tuple[int, int]:
        """The tightest proven `(lo, hi)` of `a` (its atom's domain when the facts say nothing)."""
        if a.atom == ZERO:
            return a.c, a.c
        lo, hi = self.domain(a.atom)
        self._closure()
        if not self.contradiction:
            up = self.dist(ZERO, a.atom)
            down = self.dist(a.atom, ZERO)
            if up < hi:
                hi = int(up)
            if -down > lo:
                lo = int(-down)
        return lo + a.c, hi + a.c

    def fits(self, a: Lin, ty: ScalarTy) -> bool:
        """Whether `a`'s value always fits `ty` (so computing it in `ty` cannot wrap)."""
        tlo, thi = type_range(ty)
        if a.atom != ZERO:
            lo, hi = self.domain(a.atom)
            if tlo <= lo + a.c and hi + a.c <= thi:  # the domain alone suffices: no search
                return True
        lo, hi = self.bounds(a)
        return tlo <= lo and hi <= thi


_CLOSURES: dict[object, tuple[dict[Atom, int], list[list[float]], bool]] = {}
_CLOSURES_MAX = 4096
_LIN_ZERO = _lin((ZERO, 0))
# slice name and rank -> the extents `slice_in_range` proves an index against (bounded as above)
_EXTENTS: dict[tuple[str, int], list[Lin]] = {}


def _floyd_warshall(edges: dict[tuple[Atom, Atom], int], domains: dict[Atom, tuple[int, int]]) -> tuple[dict[Atom, int], list[list[float]], bool]:
    """Shortest paths between every pair of `ZERO` and the atoms (each atom's domain two edges
    to and from `ZERO`): the atom -> row index, the distances (read only, shared by every
    Prover of the same facts) and whether there is a negative cycle."""
    nodes: dict[Atom, int] = {ZERO: 0}
    for u, v in edges:
        for a in (u, v):
            if a not in nodes:
                nodes[a] = len(nodes)
    n = len(nodes)
    inf = float("inf")
    d: list[list[float]] = [[inf] * n for _ in range(n)]
    for i in range(n):
        d[i][i] = 0
    for (u, v), k in edges.items():  # u - v <= k: an edge v -> u of weight k
        vi, ui = nodes[v], nodes[u]
        if k < d[vi][ui]:
            d[vi][ui] = k
    for a, i in nodes.items():
        if i:
            lo, hi = domains[a]
            d[0][i] = min(d[0][i], hi)  # a - 0 <= hi
            d[i][0] = min(d[i][0], -lo)  # 0 - a <= -lo
    for k in range(n):
        dk = d[k]
        for i in range(n):
            di = d[i]
            dik = di[k]
            if dik != inf:  # row i through k, element-wise (`min` keeps the old entry on a tie)
                d[i] = di = list(map(min, di, map(add, repeat(dik), dk)))
                if i == k:
                    dk = di
    return nodes, d, any(d[i][i] < 0 for i in range(n))


class RangeEnv:
    """How one function's IR names map to atoms (these answer none: the typer's `RangeFacts`
    below names its locals, witnesses and raw ids), and the linear forms and guard facts
    over them."""

    def local_atom(self, name: str) -> Atom | None:
        """The atom of an immutable integer local, or None."""
        return None

    def witness_atom(self, name: str, part: str) -> Atom | None:
        """The atom of a part of an immutable witness, or None."""
        return None

    def raw_atom(self, reg: str, axis: str) -> Atom | None:
        return None

    # ---- linear forms ---------------------------------------------------------------------
    def linear(self, e: ir.Expr, p: Prover) -> Lin | None:
        """`e` as `atom + c` when its machine value (read with its type's signedness)
        provably equals that integer, else None."""
        ty = e.ty
        if not isinstance(ty, ScalarTy) or not ty.is_int:
            return None
        if isinstance(e, ir.Const):
            if isinstance(e.value, bool) or not isinstance(e.value, int):
                return None
            return _lin((ZERO, machine_value(e.value, ty)))
        if isinstance(e, ir.Local):
            a = self.local_atom(e.name)
            return _lin((a, 0)) if a is not None else None
        if isinstance(e, ir.WitnessPart):
            if isinstance(e.witness, ir.Local):
                a = self.witness_atom(e.witness.name, e.part)
                return _lin((a, 0)) if a is not None else None
            return None
        if isinstance(e, ir.Len):
            return _lin((("len", e.slice.name, str(e.axis)), 0))
        if isinstance(e, ir.RawId):
            a = self.raw_atom(e.reg, e.axis)
            return _lin((a, 0)) if a is not None else None
        if isinstance(e, ir.Cast):
            src = e.value.ty
            if not isinstance(src, ScalarTy) or not src.is_int:
                return None
            inner = self.linear(e.value, p)
            return inner if inner is not None and p.fits(inner, ty) else None
        if isinstance(e, ir.BinOp) and e.op in ("+", "-"):
            left = self.linear(e.left, p)
            right = self.linear(e.right, p)
            if left is None or right is None:
                return None
            if right.atom == ZERO:
                out = _lin((left.atom, left.c + right.c if e.op == "+" else left.c - right.c))
            elif left.atom == ZERO and e.op == "+":
                out = _lin((right.atom, left.c + right.c))
            elif e.op == "-" and left.atom == right.atom:
                out = _lin((ZERO, left.c - right.c))
            else:
                return None
            return out if p.fits(out, ty) else None
        return None

    def link(self, e: ir.Expr, ty: ScalarTy, p: Prover) -> Lin | None:
        """`e` converted to a comparison's type `ty`, linear only if the conversion is exact."""
        if not ty.is_int:
            return None
        a = self.linear(e, p)
        return a if a is not None and p.fits(a, ty) else None

    # ---- facts from conditions --------------------------------------------------------------
    def guard_edges(self, cond: ir.Expr, negated: bool, base: list[Edge], make: Callable[[list[Edge]], Prover]) -> list[Edge]:
        """The facts that hold where `cond` is true (false when `negated`), given `base`.

        Conjuncts are read left to right: each one is evaluated only where the ones
        before it held, so their facts help prove the next one's sides exact."""
        out: list[Edge] = []
        made: list[tuple[int, Prover]] = []

        def prover() -> Prover:
            if not made or made[-1][0] != len(out):
                made.append((len(out), make(base + out)))
            return made[-1][1]

        def walk(c: ir.Expr, neg: bool) -> None:
            if isinstance(c, ir.UnaryOp) and c.op == "not":
                walk(c.operand, not neg)
                return
            if isinstance(c, ir.BoolOp) and ((c.op == "and") != neg):
                for v in c.values:
                    walk(v, neg)
                return
            if isinstance(c, ir.Compare):
                if neg and len(c.ops) != 1:
                    return
                for i, op in enumerate(c.ops):
                    ty = c.link_types[i] if i < len(c.link_types) else None
                    if ty is None or not ty.is_int:
                        continue
                    p = prover()
                    a = self.link(c.operands[i], ty, p)
                    b = self.link(c.operands[i + 1], ty, p)
                    if a is None or b is None:
                        continue
                    out.extend(relation(_NEGATE[op] if neg else op, a, b))

        walk(cond, negated)
        return out


_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def relation(op: str, a: Lin, b: Lin) -> list[Edge]:
    """The edges for `a op b` over the integers."""
    if op == "<":
        return [le_edge(a, b, -1)]
    if op == "<=":
        return [le_edge(a, b)]
    if op == ">":
        return [le_edge(b, a, -1)]
    if op == ">=":
        return [le_edge(b, a)]
    if op == "==":
        return [le_edge(a, b), le_edge(b, a)]
    return []


def mentions(edge: Edge, names: set[str]) -> bool:
    """Whether an edge mentions a local or witness named in `names`."""
    for a in edge[:2]:
        if len(a) >= 2 and a[0] in ("var", "wpart") and a[1] in names:  # type: ignore[misc]
            return True
    return False


# ---- the typer's side: scoped facts per typed function body ----------------------------------------


_RAW_DOMAIN = {
    "ctaid": (0, (1 << 31) - 1),
    "nctaid": (1, (1 << 31) - 1),
    "laneid": (0, 31),
}


class RangeFacts(RangeEnv):
    """The typer's range facts for one function body (typer_fn.py's `FnTyper.ranges`): atoms of
    its names, the facts at the current point and the bounds queries.

    The state it reads is the body's (`FnState`, typer_state.py): `vars`, `slices`, `facts`
    (proven (witness, slice) pairs), `is_kernel`, `k.contract`, `fdef`, and `rfacts`, the
    difference constraints true at the current point, which the statement typer scopes exactly
    like `facts` (saved and restored around branches and loops, dropped for every name a
    region assigns)."""

    def __init__(self, st: FnState):
        self.st = st
        self._bindings: dict[str, int] | None = None  # how often each name of the body is bound
        self._nonneg: set[str] = set()  # witnesses a contract makes (never poisoned: >= 0)
        self._req_edges: list[Edge] | None = None  # `requires` relations (kernels only)
        self._provers: dict[object, Prover] = {}  # one per distinct state of the facts
        # `_witness_edges` by the proofs: the witnesses' types they were read with, the edges
        self._wedges: dict[frozenset[tuple[str, str]], tuple[tuple[tuple[str, object], ...], list[Edge]]] = {}

    # -- atoms ------------------------------------------------------------------------------
    def _immutable(self, name: str) -> bool:
        b = self._bindings
        if b is None:
            # once per `def` (every specialisation and helper call types the same tree): kept
            # on the node, whose lifetime is the module front's
            fdef = self.st.fdef
            b = getattr(fdef, "_az_bindings", None)
            if b is None:
                b = _bindings(fdef, _body_text(self.st.src, fdef))
                fdef._az_bindings = b  # type: ignore[attr-defined]
            self._bindings = b
        return b.get(name, 0) == 1

    def local_atom(self, name: str) -> Atom | None:
        ty = self.st.vars.get(name)
        if isinstance(ty, ScalarTy) and ty.is_int and self._immutable(name):
            return ("var", name)
        return None

    def witness_atom(self, name: str, part: str) -> Atom | None:
        ty = self.st.vars.get(name)
        if isinstance(ty, WitnessTy) and self._immutable(name):
            if (ty.rank == 1) == (part == "get"):
                return ("wpart", name, part)
        return None

    def raw_atom(self, reg: str, axis: str) -> Atom | None:
        return ("raw", reg, axis)

    def _block(self) -> tuple[int, int, int] | None:
        c = self.st.k.contract if self.st.is_kernel else None
        if c is None or not c.block:
            return None
        return (tuple(c.block) + (1, 1))[:3]  # type: ignore[return-value]

    def atom_domain(self, a: Atom) -> tuple[int, int]:
        kind = a[0]
        if kind == "len":
            return LEN_DOMAIN
        if kind == "var":
            ty = self.st.vars.get(a[1])
            return ty.value_range if isinstance(ty, ScalarTy) else (I64_MIN, I64_MAX)
        if kind == "wpart":
            return (0, I64_MAX) if a[1] in self._nonneg else (I64_MIN, I64_MAX)
        if kind == "raw":
            reg, axis = a[1], a[2]
            if reg in _RAW_DOMAIN:
                return _RAW_DOMAIN[reg]
            block = self._block()
            k = "xyz".index(axis) if axis in ("x", "y", "z") else 0
            if reg == "tid":
                return (0, block[k] - 1) if block else (0, 1023 if k < 2 else 63)
            if reg == "ntid":
                return (block[k], block[k]) if block else (1, 1024 if k < 2 else 64)
        return (I64_MIN, I64_MAX)

    # -- the facts at this point ---------------------------------------------------------------
    def _requires_edges(self) -> list[Edge]:
        """Relations of `requires` between extents and literals (kernels only): they hold
        over the integers at every launch (the evaluator rejects overflow)."""
        hit = self._req_edges
        if hit is not None:
            return hit
        out: list[Edge] = []
        c = self.st.k.contract if self.st.is_kernel else None
        req = c.requires if c is not None else None

        def lin(e: C.Expr) -> Lin | None:
            if isinstance(e, C.Const):
                return _lin((ZERO, e.value))
            if isinstance(e, (C.Len, C.Shape)):
                axis = e.axis if isinstance(e, C.Shape) else 0
                s = self.st.slices.get(e.param)
                if s is None or axis >= s.rank:
                    return None
                return _lin((("len", e.param, str(axis)), 0))
            if isinstance(e, C.Neg):
                v = lin(e.operand)
                return _lin((ZERO, -v.c)) if v is not None and v.atom == ZERO else None
            if isinstance(e, C.BinOp) and e.op in ("+", "-"):
                a, b = lin(e.left), lin(e.right)
                if a is None or b is None:
                    return None
                if b.atom == ZERO:
                    return _lin((a.atom, a.c + b.c if e.op == "+" else a.c - b.c))
                if a.atom == ZERO and e.op == "+":
                    return _lin((b.atom, a.c + b.c))
            return None

        for rel in req.relations if req is not None else ():
            a, b = lin(rel.left), lin(rel.right)
            if a is not None and b is not None:
                out.extend(relation(rel.op, a, b))
        self._req_edges = out
        return out

    def _witness_edges(self) -> list[Edge]:
        """`(w, s)` proofs (`w in s`, grid-stride indices) as ranges of the witness's parts
        (once per set of proofs and the witnesses' types: each guard and each new state of the
        facts asks)."""
        facts = self.st.facts
        key = frozenset(facts)
        hit = self._wedges.get(key)
        vars_ = self.st.vars
        if hit is not None and all(vars_.get(w) is t for w, t in hit[0]):
            return hit[1]
        out = self._witness_edges_now()
        self._wedges[key] = (tuple((w, vars_.get(w)) for w, _ in facts), out)
        return out

    def _witness_edges_now(self) -> list[Edge]:
        out: list[Edge] = []
        for w, s in self.st.facts:
            sty = self.st.slices.get(s)
            if sty is None:
                continue
            parts = WITNESS_PARTS[sty.rank]
            for axis, part in enumerate(parts):
                a = self.witness_atom(w, part)
                if a is not None:
                    x = _lin((a, 0))
                    out.append(le_edge(_lin((ZERO, 0)), x))
                    out.append(le_edge(x, _lin((("len", s, str(axis)), 0)), -1))
        return out

    def prover(self) -> Prover:
        """The facts at this point (one Prover per distinct state, so searches are reused)."""
        st = self.st
        cache = self._provers
        key = (st.rfacts, frozenset(st.facts), frozenset(self._nonneg))
        p = cache.get(key)
        if p is None:
            p = Prover([*st.rfacts, *self._witness_edges(), *self._requires_edges()], self.atom_domain)
            cache[key] = p
        return p

    def guard_facts(self, cond: ir.Expr, negated: bool) -> frozenset[Edge]:
        """The facts that hold where `cond` is true (false when `negated`)."""
        base = [*self._witness_edges(), *self._requires_edges()]
        return frozenset(self.guard_edges(cond, negated, list(self.st.rfacts), lambda es: Prover(base + es, self.atom_domain)))

    def kill_facts(self, names: set[str]) -> None:
        """Drop every fact about a name that is (re)assigned."""
        if names and self.st.rfacts:
            self.st.rfacts = frozenset(e for e in self.st.rfacts if not mentions(e, names))

    def note_assign(self, name: str, value: ir.Expr) -> None:
        """After `name = value`: forget old facts; an immutable int local equals its value."""
        self.kill_facts({name})
        if isinstance(value, ir.MakeWitness) and value.site < 0 and self._immutable(name):
            self._nonneg.add(name)  # a contract's witness is >= 0
            return
        atom = self.local_atom(name)
        if atom is None:
            return
        p = self.prover()
        v = self.linear(value, p)
        ty = self.st.vars[name]
        if v is not None and isinstance(ty, ScalarTy) and p.fits(v, ty):
            self.st.rfacts = self.st.rfacts | frozenset(relation("==", _lin((atom, 0)), v))

    def note_range_loop(self, var: str, start: ir.Expr, stop: ir.Expr, step: ir.Expr) -> frozenset[Edge]:
        """Facts inside `for var in range(start, stop, step)` with a constant step:
        `start <= var < stop` (step > 0) or `stop < var <= start` (step < 0)."""
        atom = self.local_atom(var)
        ty = self.st.vars.get(var)
        if atom is None or not isinstance(step, ir.Const) or not isinstance(ty, ScalarTy):
            return frozenset()
        p = self.prover()
        a, b = self.link(start, ty, p), self.link(stop, ty, p)
        if a is None or b is None:
            return frozenset()
        s = machine_value(int(step.value), ty)
        x = _lin((atom, 0))
        if s > 0:
            return frozenset(relation("<=", a, x) + relation("<", x, b))
        if s < 0:
            return frozenset(relation("<", b, x) + relation("<=", x, a))
        return frozenset()

    # -- queries ---------------------------------------------------------------------------
    def index_in_range(self, index: tuple[ir.Expr, ...], extents: list[Lin]) -> bool:
        """Whether every index expression lies in `[0, extent)` on its axis."""
        w = index[0] if len(index) == 1 else None
        if isinstance(w, ir.Local) and isinstance(w.ty, WitnessTy):
            parts = WITNESS_PARTS[w.ty.rank]
            index = tuple(ir.WitnessPart(w, part, I64) for part in parts)
        if len(index) != len(extents):
            return False
        p = self.prover()
        for e, n in zip(index, extents, strict=True):
            x = self.linear(e, p)
            if x is None or not p.le(_LIN_ZERO, x) or not p.le(x, n, -1):
                return False
        return True

    def slice_in_range(self, name: str, index: tuple[ir.Expr, ...]) -> bool:
        rank = self.st.slices[name].rank
        extents = _EXTENTS.get((name, rank))
        if extents is None:  # (never changed: every typing of every module shares them)
            if len(_EXTENTS) >= _CLOSURES_MAX:
                _EXTENTS.clear()
            extents = _EXTENTS[(name, rank)] = [_lin((("len", name, str(d)), 0)) for d in range(rank)]
        return self.index_in_range(index, extents)

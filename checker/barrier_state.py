"""The race walk's state (checker/barrier_intervals.py): the shared-memory accesses (`Access`)
pending since the last barrier, the dataflow `State` and its join, a found `Race`, each
function's summary of its dynamic shared-memory accesses, and small literal readings."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import field
from typing import TypeVar
from anodize.language.records import dataclass

from .index_forms import Block, Fact, join_forms
from .index_eval import Named, _free_names
from .kernel_model import ModuleModel
from .kernel_values import FunctionInfo
from .shared_slots import Slots
from .typed_ints import IntView
from anodize.language.param_annotations import constant_param_type


_T = TypeVar("_T")

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
    owner: Slots | None = None  # the slots the thread owns that it reaches (shared_slots.py)

    def __hash__(self) -> int:
        # the fields' hash, computed once: an access keys the pending dicts of every state
        h = getattr(self, "_hash", None)  # (not `__dict__`: no dict made of the fields)
        if h is None:
            h = hash((self.node, self.write, self.arrays, self.index, self.facts, self.value, self.value_names, self.safe, self.witness, self.owner))
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


def _module_int(m: ModuleModel, node: ast.expr, fn: object = None) -> int | None:
    """A shape dimension as the front end reads constants (`ModuleSymbols.constant`: a literal,
    a module constant of any binding form, arithmetic over those, `TILE + 1`); -1 (static, of
    a size known once specialised) when it reads an `az.Constant` parameter of `fn` (a zero
    size is refused at specialisation outside `unsafe`); None otherwise (a local, a value)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    env: dict[str, int | float | bool] = {}
    if fn is not None:
        params = getattr(fn, "params", {})
        local = getattr(fn, "locals", frozenset())
        for n in names:
            p = params.get(n)
            if p is not None:
                if constant_param_type(m.front.symbols, p.node.annotation) != "i64":
                    return None
                env[n] = 1
            elif n in local:
                return None
    got = m.front.symbols.constant(node, env or None)
    if got is None or type(got[0]) is not int:
        return None
    return -1 if env else got[0]


class WalkState:
    """The race walk's state over one function, one record shared by its collaborators (the
    statements, `Intervals`; the expressions and accesses, `AccessWalk`; the index forms,
    `FormEval`): the function, its block and typing, the helpers' summaries it reads, and what
    the walk finds (races, escapes, this function's dynamic-memory summary, the exits, the log
    of accesses) and the facts in force at the current point."""

    def __init__(
        self,
        model: ModuleModel,
        fn: FunctionInfo,
        block: Block,
        must_barrier: dict[str, bool],
        dynamic: dict[str, DynSummary],
        types: IntView,
    ):
        self.m = model
        self.fn = fn
        self.block = block
        self.types = types  # the typing of the body walked
        self.must_barrier = must_barrier  # helper name -> reaches a barrier on every path
        self.dynamic = dynamic  # helper name -> its accesses of dynamic shared memory
        # this function's own summary: dynamic accesses reachable from its entry, and pending at its exit
        self.head: DynPart | None = None
        self.tail: DynPart | None = None
        self.races: dict[ast.Subscript, Race] = {}
        self.escapes: dict[ast.Name, str] = {}
        self.exits: list[State] = []
        self.facts: list[tuple[Fact, frozenset[str]] | None] = []
        self.log: list[Access] = []  # every access touched, in walk order (for `Intervals._across`)
        # each multi-slot safe-tier access's verdict (shared_slots.py): its slots, or why refused
        self.slots: dict[ast.Subscript, Slots | str] = {}

    def under(self, facts: list[tuple[Fact, frozenset[str]]], run: Callable[[], _T]) -> _T:
        """`run()` with `facts` in force."""
        n = len(self.facts)
        self.facts.extend(facts)
        try:
            return run()
        finally:
            del self.facts[n:]


class _Typed:
    """A typed expression's stand-in: only its type (`Intervals._local_expr`)."""

    __slots__ = ("ty",)

    def __init__(self, ty: object) -> None:
        self.ty = ty

"""Index forms for the shared-memory race check (checker/rules/shared_race.py).

An index is a tuple of per-axis forms.  A form is affine in the thread id of the
block (`$x`, `$y`, `$z` for `tid_x/y/z`) over block-uniform symbols (names and
uniform expressions, keyed by their text): `Lin`, or `Div`/`Mod` of one by a
positive constant.  Guards give facts about the thread id: symbolic bounds
(`tid < s` gives `$x <= s - 1`) and congruences (`lane == 0` gives `$x % 32 == 0`).

`disjoint(a, b)` proves that two accesses, made by two *different* threads of
one block, can never touch the same element:

- one axis's value ranges are separated by a positive constant (`[0, s - 1]`
  against `[s, 2s - 1]`), or
- both accesses have the same form, and that form is injective in the thread id
  over the block: `tid`, `k * tid + c`, `(tid_y, tid_x)` for 2-D blocks,
  `ty * 16 + tx` for a 16-wide block, `tid // 32` among threads with equal
  `tid % 32`, `tid % m` over at most `m` threads, and a strided loop index
  (`tid + 256 * k` over at most 256 threads).

Machine integers.  Codegen computes indices in fixed-width two's complement
(i32/u32/i64/u64; thread ids are i32; casts and implicit conversions wrap), so a
form's value is only *congruent* to the machine value modulo 2**32 (every type is at
least 32 bits wide, and +, -, * and every int conversion keep that congruence).  The
proofs use no more: two threads' indices are apart when their difference is a
non-zero integer of magnitude below 2**32 (`injective`, and `separated` with the
whole span bounded), or when both indices are *exact or out of bounds* (`Lin.eo`:
the machine value is the form's value, or so far from it that it is no index of a
shared array, which is smaller than 2**30 elements per axis).  Division, a modulus
that is no power of two, and comparisons (guard facts) need *exact* operands
(`Lin.exact`); `barrier_intervals.py` sets both flags with the typer's promotion
rules.  Shared arrays are bounds-checked per axis, so an index outside its axis
touches nothing.
"""

from __future__ import annotations

import itertools
from anodize.language.records import dataclass
from functools import cached_property

TX, TY, TZ = "$x", "$y", "$z"
COMPS = (TX, TY, TZ)


class Lin:
    """sum(coef * key) + const; keys are thread components or symbol texts.

    Immutable, with value equality (as a frozen dataclass, but a plain slotted class: the race
    check builds some 100,000 of them per 10,000 lines).  `terms` is sorted by key and holds no
    zero coefficient, so two equal forms have equal `terms`.

    Machine flags (see the module docstring), kept by `barrier_intervals.py` for index forms;
    the arithmetic below gives plain values (exact, weak): `exact` -- the machine value is this
    value; `eo` -- exact, or out of every shared array's bounds; `sg` -- the signedness of its
    type: "s" signed, "u" unsigned, "w" a weak literal, "?" unknown."""

    __slots__ = ("terms", "const", "exact", "eo", "sg")

    def __init__(
        self, terms: tuple[tuple[str, int], ...] = (), const: int = 0, exact: bool = True, eo: bool = True, sg: str = "w"
    ) -> None:
        self.terms = terms
        self.const = const
        self.exact = exact
        self.eo = eo
        self.sg = sg

    def __eq__(self, o: object) -> bool:
        return (
            o.__class__ is Lin
            and self.terms == o.terms  # type: ignore[attr-defined]
            and self.const == o.const  # type: ignore[attr-defined]
            and self.exact == o.exact  # type: ignore[attr-defined]
            and self.eo == o.eo  # type: ignore[attr-defined]
            and self.sg == o.sg  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash((self.terms, self.const))

    def __repr__(self) -> str:
        return f"Lin(terms={self.terms!r}, const={self.const!r}, exact={self.exact}, eo={self.eo}, sg={self.sg!r})"

    def flagged(self, exact: bool, eo: bool, sg: str) -> Lin:
        if (self.exact, self.eo, self.sg) == (exact, eo, sg):
            return self
        return Lin(self.terms, self.const, exact, eo or exact, sg)

    def plain(self) -> Lin:
        """The same value with the default flags (for comparing values)."""
        return self if self.exact and self.eo and self.sg == "w" else Lin(self.terms, self.const)

    @staticmethod
    def make(d: dict[str, int], c: int = 0) -> Lin:
        return Lin(tuple(sorted((k, v) for k, v in d.items() if v)), c)

    @staticmethod
    def sym(key: str) -> Lin:
        return Lin(((key, 1),))

    def as_dict(self) -> dict[str, int]:
        return dict(self.terms)

    def __add__(self, o: Lin) -> Lin:
        if not o.terms:
            return self if not o.const else Lin(self.terms, self.const + o.const)
        if not self.terms:
            return o if not self.const else Lin(o.terms, self.const + o.const)
        d = dict(self.terms)
        for k, v in o.terms:
            d[k] = d.get(k, 0) + v
        return Lin.make(d, self.const + o.const)

    def scale(self, k: int) -> Lin:
        if k == 1:
            return self
        if k == 0:
            return Lin()
        # scaling by a non-zero factor keeps the terms sorted and non-zero
        return Lin(tuple([(n, v * k) for n, v in self.terms]), self.const * k)

    def __sub__(self, o: Lin) -> Lin:
        return self + o.scale(-1)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def thread(self) -> dict[str, int]:
        return {k: v for k, v in self.terms if k in COMPS}

    def without(self, comps: set[str]) -> Lin:
        """Thread components that are always 0 (extent 1) dropped."""
        for k, _ in self.terms:
            if k in comps:
                break
        else:
            return self
        # dropping terms keeps the rest sorted and non-zero (a component of extent 1 is 0: the
        # value, and so its flags, stay)
        return Lin(tuple([(k, v) for k, v in self.terms if k not in comps]), self.const, self.exact, self.eo, self.sg)


@dataclass(frozen=True)
class Div:
    """floor(lin / d), d > 0 (Python semantics, as the language)."""

    lin: Lin
    d: int


@dataclass(frozen=True)
class Mod:
    """lin % m, m > 0: always in [0, m - 1] (Python semantics, as the language)."""

    lin: Lin
    m: int


@dataclass(frozen=True)
class Stride:
    """lin + step * k for some k >= 0 (a strided loop index: `j = tid` ... `j += 256`)."""

    lin: Lin
    step: int


Form = Lin | Div | Mod | Stride


def meet(a: Lin, b: Lin) -> Lin:
    """`a` (equal in value to `b`) with the flags both have."""
    sg = a.sg if a.sg == b.sg else ("s" if {a.sg, b.sg} <= {"s", "w"} else "?")
    return a.flagged(a.exact and b.exact, a.eo and b.eo, sg)


def pow2(n: int) -> bool:
    return 0 < n <= 1 << 30 and n & (n - 1) == 0


def join_forms(a: Form, b: Form) -> Form | None:
    """A form covering both, for the loop head: `tid` and `tid + 256` give `Stride(tid, 256)`.

    A stride's step is a power of two: a thread's machine value stays in its residue class
    modulo the step however often the index wraps (the step divides 2**32)."""
    if a == b:
        return a
    if isinstance(a, Lin) and isinstance(b, Lin) and a.terms == b.terms and a.const == b.const:
        return meet(a, b)
    la, sa = (a.lin, a.step) if isinstance(a, Stride) else (a, 0)
    lb, sb = (b.lin, b.step) if isinstance(b, Stride) else (b, 0)
    if not (isinstance(la, Lin) and isinstance(lb, Lin)) or isinstance(a, (Div, Mod)) or isinstance(b, (Div, Mod)):
        return None
    d = lb - la
    th = la.thread()
    if not d.is_const or len(th) != 1 or list(th.values())[0] != 1:
        return None
    gap = abs(d.const)
    step = sa or sb or gap
    if (sa and sa != step) or (sb and sb != step) or gap % step or not pow2(step):
        return None
    return Stride(meet(la, lb) if d.const >= 0 else meet(lb, la), step)

# A fact about the thread id: ("lo", comp, Lin) comp >= Lin, ("hi", comp, Lin) comp <= Lin,
# ("mod", comp, m, r) comp % m == r.
Fact = tuple


@dataclass(frozen=True)
class Block:
    """Extents of the block per component; None where unknown."""

    ext: tuple[int | None, int | None, int | None]

    @staticmethod
    def of(block: tuple[int, ...] | None) -> Block:
        if block is None or not 1 <= len(block) <= 3 or any(b <= 0 for b in block):
            return Block((None, None, None))
        b = (*block, 1, 1)[:3]
        return Block((b[0], b[1], b[2]))

    def extent(self, comp: str) -> int | None:
        return self.ext[_AXIS[comp]]

    @cached_property
    def constant(self) -> set[str]:
        return {c for c in COMPS if self.extent(c) == 1}

    @cached_property
    def varying(self) -> set[str]:
        return {c for c in COMPS if self.extent(c) != 1}


_AXIS = {c: n for n, c in enumerate(COMPS)}


def normalize(form: Form | None, block: Block) -> Form | None:
    if form is None:
        return None
    zero = block.constant
    if isinstance(form, Lin):
        return form.without(zero)
    if isinstance(form, Div):
        return Div(form.lin.without(zero), form.d)
    if isinstance(form, Mod):
        return Mod(form.lin.without(zero), form.m)
    return Stride(form.lin.without(zero), form.step)


# ---- ranges --------------------------------------------------------------------------------


_ZERO = Lin()


def comp_bounds(comp: str, facts: tuple[Fact, ...], block: Block) -> tuple[list[Lin], list[Lin]]:
    lows = [_ZERO]  # thread ids are never negative
    highs: list[Lin] = []
    e = block.extent(comp)
    if e is not None:
        highs.append(Lin((), e - 1))
    for f in facts:
        if f[0] == "lo" and f[1] == comp:
            lows.append(f[2])
        elif f[0] == "hi" and f[1] == comp:
            highs.append(f[2])
    return lows, highs


def _const_range(lows: list[Lin], highs: list[Lin]) -> tuple[int | None, int | None]:
    lo = hi = None
    for b in lows:
        if not b.terms and (lo is None or b.const > lo):
            lo = b.const
    for b in highs:
        if not b.terms and (hi is None or b.const < hi):
            hi = b.const
    return lo, hi


def lin_range(lin: Lin, facts: tuple[Fact, ...], block: Block) -> tuple[list[Lin], list[Lin]]:
    """Candidate lower and upper bounds (each valid) of `lin` over the threads that satisfy `facts`."""
    base = Lin(tuple([t for t in lin.terms if t[0] not in COMPS]), lin.const)  # still sorted, non-zero
    lo_parts: list[list[Lin]] = []
    hi_parts: list[list[Lin]] = []
    for comp, a in lin.terms:
        if comp not in COMPS:
            continue
        lows, highs = comp_bounds(comp, facts, block)
        if a > 0:
            lo_parts.append([b.scale(a) for b in lows][:4])
            hi_parts.append([b.scale(a) for b in highs][:4])
        else:
            lo_parts.append([b.scale(a) for b in highs][:4])
            hi_parts.append([b.scale(a) for b in lows][:4])
    out_lo = [sum(combo, base) for combo in itertools.product(*lo_parts)] if all(lo_parts) else []
    out_hi = [sum(combo, base) for combo in itertools.product(*hi_parts)] if all(hi_parts) else []
    return out_lo, out_hi


def form_range(form: Form, facts: tuple[Fact, ...], block: Block) -> tuple[list[Lin], list[Lin]]:
    """Bounds of the form's value (not of the machine value: see `separated`)."""
    if isinstance(form, Lin):
        return lin_range(form, facts, block)
    if isinstance(form, Mod):
        return [Lin()], [Lin((), form.m - 1)]
    if isinstance(form, Stride):
        # `lin + step * k` may wrap after many rounds: its bounds say nothing of the machine value
        return [], []
    lo, hi = _const_range(*lin_range(form.lin, facts, block))
    return ([Lin((), lo // form.d)] if lo is not None else []), ([Lin((), hi // form.d)] if hi is not None else [])


WRAP = 1 << 32  # every machine int is congruent to its form's value modulo this


def plain(form: Form) -> Form:
    """The form with its machine flags dropped (for comparing values)."""
    if form.__class__ is Lin:
        return form.plain()  # type: ignore[union-attr]
    lin = form.lin  # type: ignore[union-attr]
    p = lin.plain()
    if p is lin:
        return form
    if isinstance(form, Div):
        return Div(p, form.d)
    if isinstance(form, Mod):
        return Mod(p, form.m)
    return Stride(p, form.step)  # type: ignore[union-attr]


def exact_or_oob(form: Form) -> bool:
    """The machine value is the form's value, or out of bounds (`Div`/`Mod` are only built
    over values they compute exactly)."""
    if isinstance(form, Lin):
        return form.eo
    return not isinstance(form, Stride)


def separated(a: Form, fa: tuple[Fact, ...], b: Form, fb: tuple[Fact, ...], block: Block, eo: bool = True) -> bool:
    """The machine values of `a` and `b` are provably apart: their value ranges are apart and
    either both are exact or out of bounds (`eo`), or the whole span of the two is below 2**32
    (then the values, congruent to the machine values modulo 2**32, keep them apart)."""
    alo, ahi = form_range(a, fa, block)
    blo, bhi = form_range(b, fb, block)
    for (hi, lo), (lo2, hi2) in itertools.chain(
        ((p, (alo, bhi)) for p in itertools.product(ahi, blo)), ((p, (blo, ahi)) for p in itertools.product(bhi, alo))
    ):
        # `lo - hi` is a positive constant (with canonical terms: the same terms, a larger constant)
        if lo.terms == hi.terms and lo.const > hi.const:
            if eo:
                return True
            for x in lo2:  # the other two bounds: the span of both below 2**32
                if x.terms == lo.terms:
                    for y in hi2:
                        if y.terms == lo.terms and y.const - x.const < WRAP:
                            return True
    return False


# ---- injectivity ---------------------------------------------------------------------------


def _width(comp: str, facts: tuple[tuple[Fact, ...], ...], block: Block) -> int | None:
    """How many values `comp` takes over the union of the fact sets, if bounded by constants."""
    los, his = [], []
    for fs in facts:
        lo, hi = _const_range(*comp_bounds(comp, fs, block))
        if lo is None or hi is None:
            return None
        los.append(lo)
        his.append(hi)
    return max(max(his) - min(los) + 1, 0)


def _congruence(comp: str, fa: tuple[Fact, ...], fb: tuple[Fact, ...]) -> int:
    """The largest m with `comp % m == r` in both fact sets (the same r), else 0."""
    best = 0
    for f in fa:
        if f[0] == "mod" and f[1] == comp and f in fb:
            best = max(best, f[2])
    return best


def _determines(form: Form, fa: tuple[Fact, ...], fb: tuple[Fact, ...], block: Block) -> set[str]:
    """Thread components whose values one axis's value pins down (given the symbols)."""
    if isinstance(form, Lin):
        th = form.thread()
        # one component, or mixed radix: ty * 16 + tx with tx in [0, 16)
        order = sorted(th.items(), key=lambda kv: abs(kv[1]))
        span = 0
        for n, (comp, a) in enumerate(order):
            if abs(a) <= span:
                return set()
            w = _width(comp, (fa, fb), block)
            if w is None:
                if n != len(order) - 1:
                    return set()
                w = MAX_EXTENT
            span += abs(a) * (w - 1)
        # two threads' values differ by at most `span`, a non-zero difference: below 2**32 it is
        # no multiple of 2**32, so the machine values differ too (`k * tid` with k = 2**32 does not)
        return set(th) if span < WRAP else set()
    th = form.lin.thread()
    if len(th) != 1:
        return set()
    ((comp, a),) = th.items()
    if isinstance(form, Div):
        if abs(a) == 1 and (form.d == 1 or _congruence(comp, fa, fb) >= form.d):
            return {comp}
        return set()
    # Mod and Stride: distinct threads closer than m (the step) keep distinct residues
    w = _width(comp, (fa, fb), block)
    if abs(a) == 1 and w is not None and w <= (form.m if isinstance(form, Mod) else form.step):
        return {comp}
    return set()


def injective(index: tuple[Form, ...], fa: tuple[Fact, ...], fb: tuple[Fact, ...], block: Block) -> bool:
    """Two different threads (one satisfying `fa`, one `fb`) always get different elements."""
    got: set[str] = set()
    for f in index:
        got |= _determines(f, fa, fb, block)
    need = {c for c in block.varying if _width(c, (fa, fb), block) != 1}  # pinned by both guards
    return need <= got


MAX_EXTENT = 1024  # no block axis has more threads


def pin(form: Form, facts: tuple[Fact, ...]) -> Form:
    """A constant axis `v` of an access that only one thread id `c` makes is `tid + (v - c)`."""
    if form.__class__ is not Lin or form.terms:  # type: ignore[union-attr]
        return form
    for comp in COMPS:
        los = [f[2] for f in facts if f[0] == "lo" and f[1] == comp]
        his = [f[2] for f in facts if f[0] == "hi" and f[1] == comp]
        for lo in los:
            if lo in his:
                p = Lin.make({comp: 1}) + form - lo
                return p.flagged(form.exact, form.eo, form.sg)  # type: ignore[union-attr]
    return form

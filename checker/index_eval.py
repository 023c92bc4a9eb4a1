"""Index forms of expressions, and guard facts, for the race walk (barrier_intervals.py).

`FormEval.form(node, state)` reads an index expression as an `index_forms` form
over the thread ids and block-uniform symbols, with the machine flags of
`index_forms.Lin` (exact, exact-or-out-of-bounds, signedness) set from each
expression's type in the one typed model (`typed_ints.IntView`: width and signedness,
the type each operand is converted to, each comparison's type); anything it cannot
read, cannot bound, or the typed model did not type, is None (unknown).  `facts_of(test, ...)` turns a guard
into facts about the thread id, from exact operands only.
"""

from __future__ import annotations

import ast
from typing import Any

from anodize.language import ir
from anodize.language.types import ScalarTy
from anodize.language.walk import nodes_of
from .index_forms import COMPS, MAX_EXTENT, TX, TY, TZ, Div, Fact, Form, Lin, Mod, Stride, pow2
from .typed_ints import bounds, holds, sign, wide
from . import safe_shared

Named = tuple[Form | None, frozenset[str]]  # a form and the names it reads
_TIDS = {"tid_x": TX, "tid_y": TY, "tid_z": TZ}
_DIMS = {"block_dim_x": 0, "block_dim_y": 1, "block_dim_z": 2}
# the callee kinds of a conversion: `i32(x)`, `az.bitcast(x, T)`, `cast(T, x)`, `T(x)` (a type variable)
_CASTS = frozenset({"scalar", "bitcast", "typecast", "typevar"})


class FormEval:
    """The index forms of the race walk (a collaborator of `Intervals`, over its `WalkState`)."""

    def __init__(self, st: Any):
        self.m = st.m
        self.fn = st.fn
        self.block = st.block
        self.types = st.types
        self._uniform: dict[ast.expr, Named] = {}

    # ---- forms and facts -------------------------------------------------------------------
    def form(self, node: ast.expr, st: Any) -> Named:
        """The node's form in its own type (the typed model's), with its machine flags."""
        got = safe_shared.form(self, node, st)  # a block-local witness
        if got is not None:
            return got
        none: Named = (None, frozenset())
        cls = node.__class__
        if cls is ast.Name:
            name = node.id  # type: ignore[attr-defined]
            if name in st.forms:
                return st.forms[name]
            if name in st.consts:
                t = self.types.local(name)
                return Lin((), st.consts[name], True, True, sign(t) if t is not None else "w"), frozenset()
        e = self.types.exprs.get(node)
        if e is None:
            return none  # the typed model did not type it: unknown
        if e.__class__ is ir.Const:
            return (self._const(e), frozenset()) if type(e.value) is not float else none
        t = e.ty
        if not (t.__class__ is ScalarTy and t.is_int):  # a float, a bool, a witness, ...: no form
            return self.uniform(node)
        if cls is ast.BinOp:
            got = self._binop(node, t, st)  # type: ignore[arg-type]
        elif cls is ast.UnaryOp and type(node.op) in (ast.USub, ast.UAdd):  # type: ignore[attr-defined]
            got = self._unary(node, t, st)  # type: ignore[arg-type]
        elif cls is ast.Call:
            got = self._call(node, t, st)  # type: ignore[arg-type]
        else:
            got = None
        if got is not None and got[0] is not None:
            if wide(t) or (isinstance(got[0], Lin) and got[0].exact):
                return got
            # a narrow type (i8, i16, u8, u16) wraps modulo less than 2**32: exact values only
        return self.uniform(node)

    def _const(self, e: Any) -> Lin:
        """A constant the typer computed: a weak literal (or a fold of literals, a module constant)
        adopts the other operand's type where it meets one (`convert` wraps it then); a typed
        one holds its machine value."""
        v = e.value
        if type(v) is not int:
            return Lin((), int(v), True, True, "?")  # a bool
        if e.weak:
            exact = -_HALF <= v < _HALF
            return Lin((), v, exact, exact, "w")
        exact = self._fits(Lin((), v), e.ty)
        return Lin((), v, exact, exact, sign(e.ty))

    def typed(self, node: ast.expr, t: ScalarTy, st: Any) -> Named:
        """The node's form converted (as the typer converts it) to the type `t`."""
        return self.convert(self.form(node, st), self.types.exprs.get(node), t)

    def convert(self, named: Named, src: Any, t: ScalarTy) -> Named:
        """A form of the typed expression `src` converted to the int type `t`: the same machine
        value when `t` holds every value of `src`'s type, else wrapped (exact only when the
        value fits); a narrow `t` keeps exact values only."""
        f, names = named
        none: Named = (None, frozenset())
        if f is None or not t.is_int:
            return none
        s = getattr(src, "ty", None)
        keeps = s.__class__ is ScalarTy and not getattr(src, "weak", False) and holds(t, s)
        if isinstance(f, Lin):
            if keeps:
                out = f.flagged(f.exact, f.eo, sign(t))
            else:
                exact = f.exact and self._fits(f, t)
                out = f.flagged(exact, exact, sign(t))
            return (out, names) if wide(t) or out.exact else none
        if keeps:
            return named
        if isinstance(f, Stride):
            return named if wide(t) else none  # the residue modulo a power-of-two step survives
        if isinstance(f, Mod):
            return named if f.m - 1 <= bounds(t)[1] else none  # in [0, m - 1]
        if isinstance(f, Div):  # floor(lin / d) of an exact lin
            r = self._vrange(f.lin)
            lo, hi = bounds(t)
            if r is not None:
                return named if lo <= r[0] // f.d and r[1] // f.d <= hi else none
            return named if wide(t) and (t.signed or self._fits(f.lin, "u")) else none
        return none

    def _binop(self, node: ast.BinOp, t: ScalarTy, st: Any) -> Named | None:
        op = type(node.op)
        if op not in (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod):
            return None
        left, right = self.typed(node.left, t, st), self.typed(node.right, t, st)
        if op is ast.Add or op is ast.Sub:
            return self.arith(left, right, op is ast.Add, t)
        if op is ast.Mult and isinstance(left[0], Lin) and isinstance(right[0], Lin):
            x, y = left[0], right[0]
            if x.is_const or y.is_const:
                k, f, names = (x, y, right[1]) if x.is_const else (y, x, left[1])
                r = f.scale(k.const)
                exact = f.exact and k.exact and self._fits(r, t)
                return r.flagged(exact, exact, sign(t)), names  # a wrapped product lands anywhere
        elif (op is ast.FloorDiv or op is ast.Mod) and isinstance(left[0], Lin) and isinstance(right[0], Lin):
            x, y = left[0], right[0]
            d = y.const if y.is_const and y.exact else 0
            if d > 0 and x.is_const and x.exact:
                num = x.const
                return Lin((), num // d if op is ast.FloorDiv else num % d, True, True, sign(t)), frozenset()
            if d > 0 and x.thread():
                # floor division needs the exact value; a power-of-two modulus only the value
                # modulo 2**32 (it divides 2**32)
                if op is ast.FloorDiv and x.exact:
                    return Div(x, d), left[1]
                if op is ast.Mod and (x.exact or (pow2(d) and wide(t))):
                    return Mod(x, d), left[1]
        return None

    def _unary(self, node: ast.UnaryOp, t: ScalarTy, st: Any) -> Named | None:
        g, names = self.typed(node.operand, t, st)
        if not isinstance(g, Lin):
            return None
        if isinstance(node.op, ast.UAdd):
            return g, names
        r = g.scale(-1)
        exact = g.exact and self._fits(r, t)
        # a signed value that wrapped (far from 0) stays far from 0 negated
        eo = exact or (g.sg == "s" and g.eo and self._small(r))
        return r.flagged(exact, eo, sign(t)), names

    def _call(self, node: ast.Call, t: ScalarTy, st: Any) -> Named | None:
        c = self.m.callees.get(node)
        if c is None:
            return None
        short = c.name.split(".")[-1]
        if c.kind == "raw":
            if short in _TIDS:
                return Lin(((_TIDS[short], 1),), 0, True, True, sign(t)), frozenset()
            if short == "lane_id":
                bx, by, bz = self.block.ext
                if bx is not None and (bx % 32 == 0 or by == bz == 1):
                    return Mod(Lin.make({TX: 1}), 32), frozenset()  # the lane of the linear thread id
                return None
            ext = self.block.ext[_DIMS[short]] if short in _DIMS else None
            if ext is not None:
                return Lin((), ext, True, True, sign(t)), frozenset()
        elif c.kind in _CASTS and not node.keywords:
            # `i32(x)`, `T(x)` (a type variable), `cast(T, x)`: the typed model gives both types
            args = node.args
            src = args[1] if len(args) == 2 and c.name == "typing.cast" else args[0] if len(args) == 1 else None
            if src is not None and not isinstance(src, ast.Starred):
                inner = self.form(src, st)
                f = inner[0]
                if isinstance(f, Lin) and not f.thread() and not (f.is_const and f.exact):
                    return None  # a block-uniform value: the cast is a symbol of its own (its text)
                return self.convert(inner, self.types.exprs.get(src), t)
        return None

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

    def _fits(self, lin: Lin, t: ScalarTy | str) -> bool:
        """The form's every value is one an exact form of type `t` may take (`typed_ints.bounds`:
        for 32 bits or more, a 32-bit value of its signedness; "u" unsigned, "w" a weak literal)."""
        r = self._vrange(lin)
        if r is None:
            return False
        lo, hi = bounds(t)
        return lo <= r[0] and r[1] <= hi

    def _small(self, lin: Lin) -> bool:
        """At most one symbol, with coefficient 1 or -1, plus a part within [-2**30, 2**30]."""
        syms = [(k, a) for k, a in lin.terms if k not in COMPS]
        if len(syms) > 1 or (syms and syms[0][1] not in (1, -1)):
            return False
        r = self._vrange(Lin(tuple([t for t in lin.terms if t[0] in COMPS]), lin.const))
        return r is not None and -_OOB <= r[0] and r[1] <= _OOB

    def arith(self, a: Named, b: Named, add: bool, t: ScalarTy) -> Named | None:
        """`a + b` (or `a - b`) computed in the int type `t` (both already converted to it)."""
        got = _arith(a, b, add)
        if got is None or not isinstance(got[0], Lin):
            return got if got is None or wide(t) else None
        x, y, r = a[0], b[0], got[0]
        assert isinstance(x, Lin) and isinstance(y, Lin)
        sg = sign(t)
        exact = x.exact and y.exact and self._fits(r, t)
        # a signed sum wraps to a value far from every index: exact or out of bounds, as long as
        # one symbol at most is in it and no operand is an unsigned value that wrapped
        eo = exact or (
            sg == "s"
            and x.eo
            and y.eo
            and (x.exact or x.sg == "s")
            and (y.exact or y.sg == "s")
            and wide(t)
            and self._small(r)
        )
        return r.flagged(exact, eo, sg), got[1]

    def uniform(self, node: ast.expr) -> Named:
        """A block-uniform value as an opaque symbol (keyed by its text); a node's is computed once."""
        hit = self._uniform.get(node)
        if hit is None:
            v = self.m.values.get(node)
            if v is None or v.tdep or v.kind not in ("scalar", "global"):
                hit = None, frozenset()
            else:
                t = self.types.int_ty(node)
                if t is None:
                    hit = None, frozenset()  # a float (or untyped) value: no integer symbol
                else:  # its machine value: exact by definition
                    hit = Lin(((self.m.code(node), 1),), 0, True, True, sign(t)), _free_names(node)
            self._uniform[node] = hit
        return hit

    def facts_of(
        self, test: ast.expr, st: Any, positive: bool, memo: dict[ast.expr, Named] | None = None
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
        # each link compares in its own type (the typed model's): both sides converted to it
        links = getattr(self.types.exprs.get(test), "link_types", None)
        if links is None or len(links) != len(ops):
            return []  # untyped, folded, or `in`: no fact
        out = []
        left = test.left
        if memo is None:
            memo = {}
        exprs = self.types.exprs
        for o, right, lt in zip(ops, test.comparators, links):
            op = type(o).__name__
            if not positive:
                op = _NEGATE.get(op, "")
            lf = memo.get(left)
            if lf is None:
                lf = memo[left] = self.form(left, st)
            rf = memo.get(right)
            if rf is None:
                rf = memo[right] = self.form(right, st)
            if lt.is_int:
                out += self._compare(self.convert(lf, exprs.get(left), lt), op, self.convert(rf, exprs.get(right), lt))
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


_HALF = 1 << 31
_OOB = 1 << 30  # no shared array axis has this many elements


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


def _arith(a: Named, b: Named, add: bool) -> Named | None:
    x, y = a[0], b[0]
    if isinstance(x, Lin) and isinstance(y, Lin):
        return (x + y if add else x - y), a[1] | b[1]
    if isinstance(x, Stride) and isinstance(y, Lin) and not y.thread():
        return Stride(x.lin + y if add else x.lin - y, x.step), a[1] | b[1]
    if isinstance(y, Stride) and isinstance(x, Lin) and add and not x.thread():
        return Stride(y.lin + x, y.step), a[1] | b[1]
    return None


def _free_names(node: ast.AST) -> frozenset[str]:
    """The names an expression reads (with keyword and lambda parameter names, as the old
    engine counted them; an attribute's name is no name of its own)."""
    out: set[str] = set()
    for n in nodes_of((node,), _NAMING):
        if n.__class__ is ast.Name:
            out.add(n.id)
        elif n.arg:  # type: ignore[attr-defined]
            out.add(n.arg)  # type: ignore[attr-defined]
    return frozenset(out)


_NAMING = frozenset((ast.Name, ast.keyword, ast.arg))  # the nodes that name a name


def _arg_values(call: ast.Call) -> list[ast.expr]:
    """A call's argument expressions, positional then keyword (`*x` as `x`, `**k` as `k`)."""
    out = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
    out += [k.value for k in call.keywords]
    return out

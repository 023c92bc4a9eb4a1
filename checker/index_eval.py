"""Index forms of expressions, and guard facts, for the race walk (barrier_intervals.py).

`FormEval.form(node, state)` reads an index expression as an `index_forms` form
over the thread ids and block-uniform symbols, with the machine flags of
`index_forms.Lin` (exact, exact-or-out-of-bounds, signedness) set by the typer's
promotion rules (int_types.py gives the types of symbols); anything it cannot
read, or cannot bound, is None (unknown).  `facts_of(test, ...)` turns a guard
into facts about the thread id, from exact operands only.
"""

from __future__ import annotations

import ast
from typing import Any

from anodize.language.walk import child_fields
from .index_forms import COMPS, MAX_EXTENT, TX, TY, TZ, Div, Fact, Form, Lin, Mod, Stride, pow2

Named = tuple[Form | None, frozenset[str]]  # a form and the names it reads
_TIDS = {"tid_x": TX, "tid_y": TY, "tid_z": TZ}
_DIMS = {"block_dim_x": 0, "block_dim_y": 1, "block_dim_z": 2}


class FormEval:
    """The forms half of `Intervals` (which sets `m`, `block`, `types` and `_uniform`)."""

    m: Any
    block: Any
    types: Any
    _uniform: dict[ast.expr, Named]

    # ---- forms and facts -------------------------------------------------------------------
    def form(self, node: ast.expr, st: Any) -> Named:
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
            g, names = self.form(node.operand, st)
            if isinstance(g, Lin):
                f = g
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
        # a weak literal (folded by Python) takes a signed type unless an unsigned operand meets it
        return (-_HALF if sg in ("s", "w") else 0) <= r[0] and r[1] < _HALF

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


def _arg_values(call: ast.Call) -> list[ast.expr]:
    """A call's argument expressions, positional then keyword (`*x` as `x`, `**k` as `k`)."""
    out = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
    out += [k.value for k in call.keywords]
    return out

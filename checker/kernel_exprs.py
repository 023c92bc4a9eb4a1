"""The kernel model's abstract interpreter, expressions: names, constants, arithmetic (the
warp-uniform `tid_x() // 32`), comparisons, short-circuit operators, subscripts and
attributes.  `ExprFlow` is a collaborator of the interpreter over its shared state
(`FlowState`, checker/kernel_state.py); calls are `CallFlow`'s (checker/kernel_interp.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ast

from .kernel_state import FlowState
from .kernel_values import NONE, TILE, UNIFORM, UNKNOWN, VARYING, WARP_UNIFORM, Env, Val, _scalar3, join, literal_int

if TYPE_CHECKING:
    from .kernel_interp import CallFlow
    from .kernel_statements import StatementFlow


_SYNTHETIC: dict[tuple[int, int], ast.BoolOp] = {}


def _bool_prefix(node: ast.BoolOp, k: int) -> ast.AST:
    """The operands before operand `k` of `a and b and c`, as the one node libcst's binary
    `BooleanOperation` had for them (`a`, then `a and b`), with their source range."""
    if k == 1:
        return node.values[0]
    key = (id(node), k)
    hit = _SYNTHETIC.get(key)
    if hit is None or hit.values[0] is not node.values[0]:
        first, last = node.values[0], node.values[k - 1]
        hit = ast.BoolOp(op=node.op, values=node.values[:k])
        hit.lineno, hit.col_offset = first.lineno, first.col_offset
        hit.end_lineno, hit.end_col_offset = last.end_lineno, last.end_col_offset
        if len(_SYNTHETIC) > 4096:
            _SYNTHETIC.clear()
        _SYNTHETIC[key] = hit
    return hit


class ExprFlow:
    """The expressions of the kernel model's abstract interpreter."""

    calls: CallFlow  # wired by the interpreter (kernel_interp._Analyzer)
    stmts: StatementFlow

    def __init__(self, st: FlowState):
        self.st = st
        self.m = st.m
        self.fn = st.fn

    # expressions ----------------------------------------------------------------------------
    def ev(self, node: ast.expr, env: Env) -> Val:
        """`node`'s value in `env`, recorded in `model.values` (names and constants here, the
        most common nodes; the others in `_ev`)."""
        cls = node.__class__
        if cls is ast.Name:
            name = node.id  # type: ignore[attr-defined]
            if name in env:
                v = env[name]
            elif name in self.fn.locals:
                v = UNKNOWN  # a local read before any binding on this path
            else:
                v = Val("global", origin=node)
        elif cls is ast.Constant:
            value = node.value  # type: ignore[attr-defined]
            v = NONE if value is None else UNKNOWN if value is Ellipsis else UNIFORM
        else:
            v = self._ev(node, env)
        self.m.values[node] = v
        return v

    def _ev(self, node: ast.expr, env: Env) -> Val:
        m = self.m
        cls = node.__class__
        if cls is ast.BinOp:
            a = self.ev(node.left, env)  # type: ignore[attr-defined]
            b = self.ev(node.right, env)  # type: ignore[attr-defined]
            if a.kind == "tile" or b.kind == "tile":
                return TILE  # element-wise over a tile (checker/tile_model.py)
            if not (a.tdep or b.tdep):
                return UNIFORM
            if a.tid_x and self.st.warp_x and _warp_index_op(node):  # type: ignore[arg-type]
                return WARP_UNIFORM  # `tid_x() // 32` (or `>> 5`): the warp's index in its row
            return _scalar3(True, a.lane or b.lane)
        if cls is ast.Subscript:
            return self.subscript(node, env)  # type: ignore[arg-type]
        if cls is ast.Call:
            return self.calls.call(node, env)  # type: ignore[arg-type]
        if cls is ast.Attribute:
            return self.attribute(node, env)  # type: ignore[arg-type]
        if cls is ast.Compare:
            lv = self.ev(node.left, env)  # type: ignore[attr-defined]
            t, lane = lv.tdep, lv.lane
            tile = lv.kind == "tile"
            for c in node.comparators:  # type: ignore[attr-defined]
                cv = self.ev(c, env)
                t, lane = t or cv.tdep, lane or cv.lane
                tile = tile or cv.kind == "tile"
            m.ctx[node] = self.st.here()
            return TILE if tile else _scalar3(t, lane)
        if cls is ast.UnaryOp:
            a = self.ev(node.operand, env)  # type: ignore[attr-defined]
            return TILE if a.kind == "tile" else _scalar3(a.tdep, a.lane)
        if cls is ast.BoolOp:
            values = node.values  # type: ignore[attr-defined]
            first = self.ev(values[0], env)
            tdep, lane = first.tdep, first.lane
            for k in range(1, len(values)):
                if tdep:
                    self.st.push_cond(_bool_prefix(node, k), lane)  # type: ignore[arg-type]
                b = self.ev(values[k], env)
                if tdep:
                    self.st.pop_cond()
                tdep, lane = tdep or b.tdep, lane or b.lane
            return _scalar3(tdep, lane)
        if cls is ast.IfExp:
            cv = self.ev(node.test, env)  # type: ignore[attr-defined]
            if cv.tdep:
                self.st.push_cond(node.test, cv.lane)  # type: ignore[attr-defined]
            a = self.ev(node.body, env)  # type: ignore[attr-defined]
            b = self.ev(node.orelse, env)  # type: ignore[attr-defined]
            if cv.tdep:
                self.st.pop_cond()
            j = join(a, b) or UNKNOWN
            return j.tainted(cv.lane) if cv.tdep and j.kind == "scalar" else j
        if cls in (ast.Tuple, ast.List, ast.Set):
            parts = [self.ev(e.value if e.__class__ is ast.Starred else e, env) for e in node.elts]  # type: ignore[attr-defined]
            if cls is ast.Tuple and parts and all(p.kind == "scalar" for p in parts):
                # a tuple of scalars (a helper's `return a, b`, the right of `a, b = b, a`)
                return _scalar3(any(p.tdep for p in parts), any(p.lane for p in parts))
            return Val("unknown", tdep=True)
        if cls is ast.NamedExpr:
            v = self.ev(node.value, env)  # type: ignore[attr-defined]
            self.stmts.store(node.target, v, env)  # type: ignore[attr-defined]
            return v
        if cls is ast.JoinedStr:
            return UNIFORM
        if cls is ast.Dict:
            return UNKNOWN
        # anything else (lambda, comprehension, await, ...): evaluate the parts we can see
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.ev(child.value if child.__class__ is ast.Starred else child, env)  # type: ignore[attr-defined]
        return UNKNOWN

    def subscript(self, node: ast.Subscript, env: Env) -> Val:
        m = self.m
        m.ctx[node] = self.st.here()
        m.guards[node] = frozenset(self.st.guards)
        base = self.ev(node.value, env)
        tdep = False
        lane = False
        sliced = False  # a slice `a:b` among the indices (`index_elements` gives None)
        sl = node.slice
        if sl.__class__ is ast.Tuple:
            for e in sl.elts:  # type: ignore[attr-defined]
                if e.__class__ is ast.Slice:
                    self._slice_parts(e, env)  # type: ignore[arg-type]
                    sliced = True
                else:
                    ev = self.ev(e.value if e.__class__ is ast.Starred else e, env)  # type: ignore[attr-defined]
                    tdep, lane = ev.tdep or tdep, ev.lane or lane
        elif sl.__class__ is ast.Slice:
            self._slice_parts(sl, env)  # type: ignore[arg-type]
            sliced = True
        else:
            ev = self.ev(sl, env)
            tdep, lane = ev.tdep, ev.lane
        if sliced:
            return UNKNOWN
        if base.kind == "slice":
            output = record = False
            for name in base.params:
                p = self.fn.params.get(name)
                if p is not None and p.slice_kind is not None and p.slice_kind.output:
                    output = True
                if p is not None and (p.scalar or "").startswith("@"):
                    record = True  # an element of a `Slice[Rec]`: a record (language/typer_records.py)
            if record:
                return Val("record", tdep=True) if output else Val("record", tdep=tdep, wu=tdep and not lane)
            # an input is read-only for the whole launch: equal indices read equal values
            return VARYING if output else _scalar3(tdep, lane)
        if base.kind in ("scalar", "global"):
            return _scalar3(base.tdep or tdep, base.lane or lane)
        return VARYING  # shared memory and anything unknown: assume it differs between threads

    def mark_write(self, target: ast.expr, env: Env) -> None:
        """The slice parameters `target` may be are written by this function."""
        v = self.m.values.get(target) or self.ev(target, env)
        if v.kind == "slice":
            self.fn.writes.update(v.params & set(self.fn.params))

    def _slice_parts(self, sl: ast.Slice, env: Env) -> None:
        for part in (sl.lower, sl.upper, sl.step):
            if part is not None:
                self.ev(part, env)

    def attribute(self, node: ast.Attribute, env: Env) -> Val:
        m = self.m
        m.ctx[node] = self.st.here()
        if self.st.module_path(node.value):
            return Val("global", origin=node)
        base = self.ev(node.value, env)
        attr = node.attr
        if base.kind == "tile_id":  # `pid.row` / `pid.col`: the same on every thread of the program
            return UNIFORM
        if base.kind == "tile":  # `x.T`
            return base
        if base.kind in ("witness", "local_witness"):
            return VARYING
        if base.kind == "slice":
            return UNIFORM if attr == "shape" else UNKNOWN
        if base.kind == "global":
            return Val("global", origin=node)
        if base.kind == "record":  # a field (a scalar, a nested record or an array field): its record's dependence
            return base
        return Val(base.kind if base.kind == "scalar" else "unknown", tdep=True)


def _warp_index_op(node: ast.BinOp) -> bool:
    """`x // (32 * k)` or `x >> s` with `5 <= s < 32`, literal on the right: equal on the 32 lanes
    of a warp when `x` is `tid_x()` (an `i32`) and the block's x extent is a multiple of 32."""
    r = literal_int(node.right)
    if r is None:
        return False
    if isinstance(node.op, ast.FloorDiv):
        return r > 0 and r % 32 == 0
    if isinstance(node.op, ast.RShift):
        return 5 <= r < 32
    return False

"""Pass 1 of the CPU backend's split at barriers (codegen/cpu/split.py): every
synchronisation point brought to statement level.

A helper whose body (transitively) synchronises is inlined (`Scope`/`Leave` stand for
its `return`); a warp operation inside an expression is hoisted into a `WarpX`
statement before the statement that uses it (a `while` whose condition holds one is
rewritten to `while True: ...; if not cond: break`).  A warp operation in an operand
that is evaluated conditionally (the right side of `and`/`or`, a branch of
`x if c else y`) is hoisted out of the condition when nothing in that operand can
fault or write (speculating it is then invisible); otherwise the operator becomes an
`if` (`t = a; if t: t = b`), whose condition the warp-divergence rule makes
warp-uniform.  `Unsplittable` (the kernel then runs on the threaded backend,
codegen/cpu/threads.py) is left for a synchronisation point inside a grid-stride loop
and for statement kinds this module does not know.
"""

from __future__ import annotations

import dataclasses
import itertools
import typing
from anodize.language.records import dataclass

from anodize.language import ir
from anodize.language.ir_walk import children, node_fields
from anodize.language.types import BOOL, ScalarTy, SliceTy, Ty, WitnessTy

EXPR_TYPES = typing.get_args(ir.Expr)
RET = 1  # the leave id of the kernel's own `return`


class Unsplittable(Exception):
    """The kernel has a form the region splitter does not handle (see the module docstring)."""


# ---- statements only this pass makes -----------------------------------------------------


@dataclass(frozen=True)
class WarpX:
    """`dst = op(args)` for a warp operation (a shuffle or a vote), at statement level."""

    dst: str
    op: ir.WarpOp
    span: object = None


@dataclass(frozen=True)
class Scope:
    """An inlined helper's body: `Leave(id)` continues after it."""

    id: int
    body: tuple
    span: object = None


@dataclass(frozen=True)
class Leave:
    id: int
    span: object = None


# ---- generic traversal ----------------------------------------------------------------------


def map_expr(e: object, fn: typing.Callable[[object], object | None]) -> object:
    """Rebuild `e` bottom-up; `fn(node)` may replace a node (None keeps it).  Helper bodies
    (`Call.func`) are not entered."""
    if not dataclasses.is_dataclass(e) or isinstance(e, (ir.FuncIR, ir.KernelIR)):
        return e
    changes = {}
    for f in node_fields(e.__class__):
        v = getattr(e, f)
        if isinstance(v, EXPR_TYPES):
            nv = map_expr(v, fn)
        elif isinstance(v, tuple) and any(isinstance(x, EXPR_TYPES) for x in v):
            nv = tuple(map_expr(x, fn) if isinstance(x, EXPR_TYPES) else x for x in v)
        else:
            continue
        if nv is not v:
            changes[f] = nv
    out = dataclasses.replace(e, **changes) if changes else e
    r = fn(out)
    return out if r is None else r


def exprs_of(s: object) -> list:
    """The expressions a statement evaluates itself (not those of nested statements)."""
    out = []
    for f in node_fields(s.__class__):
        v = getattr(s, f)
        if isinstance(v, EXPR_TYPES):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, EXPR_TYPES))
    return out


def sub_bodies(s: object) -> list:
    if isinstance(s, ir.If):
        return [s.body, s.orelse]
    if isinstance(s, (ir.While, ir.ForRange, ir.GridStride, Scope)):
        return [s.body]
    # a statement this module does not know: its nested statements all the same, so that a
    # synchronisation point inside it is seen (and refused by `Structurer.split`)
    return [v for f in node_fields(s.__class__) if isinstance(v := getattr(s, f), tuple) and v
            and all(dataclasses.is_dataclass(x) and not isinstance(x, EXPR_TYPES) for x in v)]


def walk_expr(e: object) -> typing.Iterator[object]:
    yield e
    if isinstance(e, ir.Call):
        for a in e.args:
            yield from walk_expr(a)
        return
    for c in children(e):
        if isinstance(c, EXPR_TYPES):
            yield from walk_expr(c)


def walk(body: typing.Iterable) -> typing.Iterator[object]:
    """Every statement, nested ones included."""
    for s in body:
        yield s
        for b in sub_bodies(s):
            yield from walk(b)


# ---- pass 1: normalize ------------------------------------------------------------------------


def _func_syncs(f: ir.FuncIR, memo: dict[int, bool]) -> bool:
    if id(f) not in memo:
        memo[id(f)] = False
        memo[id(f)] = any(_stmt_syncs(s, memo) for s in f.body)
    return memo[id(f)]


def _expr_syncs(e: object, memo: dict[int, bool]) -> bool:
    for x in walk_expr(e):
        if isinstance(x, (ir.WarpOp, ir.Collective)):
            return True
        if isinstance(x, ir.Call) and _func_syncs(x.func, memo):
            return True
    return False


def _stmt_syncs(s: object, memo: dict[int, bool]) -> bool:
    if isinstance(s, ir.Barrier) or (isinstance(s, ir.Fence) and s.kind == "warp_sync"):
        return True
    if any(_expr_syncs(e, memo) for e in exprs_of(s)):
        return True
    return any(_stmt_syncs(x, memo) for b in sub_bodies(s) for x in b)


_SPECULABLE = (ir.Const, ir.Local, ir.UnaryOp, ir.Compare, ir.BoolOp, ir.IfExp, ir.Cast, ir.Bitcast, ir.Len, ir.RawId,
               ir.WitnessPart, ir.Contains, ir.MathCall, ir.WarpOp)


def speculable(e: object) -> bool:
    """Evaluating `e` where the program might not: no access, no fault, no write."""
    for x in walk_expr(e):
        if isinstance(x, ir.BinOp):
            if x.site >= 0:
                return False
        elif not isinstance(x, _SPECULABLE):
            return False
    return True


class Normalizer:
    def __init__(self, k: ir.KernelIR):
        self.k = k
        self.memo: dict[int, bool] = {}
        self.new_locals: list[tuple[str, Ty]] = []
        self.ids = itertools.count(RET + 1)
        self.tmp = itertools.count()

    def fresh(self, stem: str, ty: Ty) -> str:
        name = f"$${stem}{next(self.tmp)}"
        self.new_locals.append((name, ty))
        return name

    def body(self, stmts: typing.Iterable, ret: tuple[str | None, int] | None = None) -> tuple:
        out: list = []
        for s in stmts:
            self.stmt(s, out, ret)
        return tuple(out)

    def needs(self, e: object) -> bool:
        return _expr_syncs(e, self.memo)

    def hoist(self, e: object, pre: list, cond: bool = False) -> object:
        """`e` with its warp operations and synchronising helper calls moved into `pre`."""
        if not isinstance(e, EXPR_TYPES) or not self.needs(e):
            return e
        if isinstance(e, ir.WarpOp):
            if cond and not all(speculable(a) for a in e.args):
                raise Unsplittable("a warp operation in a conditional operand")
            args = tuple(self.hoist(a, pre, cond) for a in e.args)
            dst = self.fresh("w", e.ty)
            pre.append(WarpX(dst, dataclasses.replace(e, args=args), e.span))
            return ir.Local(dst, e.ty, e.span)
        if isinstance(e, ir.Call):
            if not _func_syncs(e.func, self.memo):
                return dataclasses.replace(e, args=tuple(self.hoist(a, pre, cond) for a in e.args))
            if cond:
                raise Unsplittable("a synchronising helper in a conditional operand")
            dst = self.inline(e, pre)
            return ir.Local(dst, e.ty, e.span) if dst is not None else ir.Const(0, BOOL, e.span)
        if isinstance(e, ir.BoolOp):
            if all(self.speculate(v) for v in e.values[1:]):
                vals = [self.hoist(e.values[0], pre, cond)] + [self.hoist(v, pre, True) for v in e.values[1:]]
                return dataclasses.replace(e, values=tuple(vals))
            # evaluate the later operands only where the program does: `t = a; if t: t = b`
            tmp = self.fresh("b", BOOL)
            pre.append(ir.Assign(tmp, self.hoist(e.values[0], pre, cond), e.span))
            for v in e.values[1:]:
                inner: list = []
                got = self.hoist(v, inner)
                t: ir.Expr = ir.Local(tmp, BOOL, e.span)
                test = t if e.op == "and" else ir.UnaryOp("not", t, BOOL, e.span)
                pre.append(ir.If(test, (*inner, ir.Assign(tmp, got, e.span)), (), e.span))
            return ir.Local(tmp, BOOL, e.span)
        if isinstance(e, ir.IfExp):
            if self.speculate(e.then) and self.speculate(e.orelse):
                return dataclasses.replace(
                    e, cond=self.hoist(e.cond, pre, cond), then=self.hoist(e.then, pre, True), orelse=self.hoist(e.orelse, pre, True)
                )
            tmp = self.fresh("x", e.ty)
            c = self.hoist(e.cond, pre, cond)
            then: list = []
            orelse: list = []
            a, b = self.hoist(e.then, then), self.hoist(e.orelse, orelse)
            pre.append(ir.If(c, (*then, ir.Assign(tmp, a, e.span)), (*orelse, ir.Assign(tmp, b, e.span)), e.span))
            return ir.Local(tmp, e.ty, e.span)
        changes = {}
        for f in node_fields(e.__class__):
            v = getattr(e, f)
            if isinstance(v, EXPR_TYPES):
                changes[f] = self.hoist(v, pre, cond)
            elif isinstance(v, tuple) and any(isinstance(x, EXPR_TYPES) for x in v):
                changes[f] = tuple(self.hoist(x, pre, cond) for x in v)
        return dataclasses.replace(e, **changes)

    def speculate(self, e: object) -> bool:
        """A conditionally evaluated operand that may be hoisted out of its condition: one with
        nothing to hoist, or whose hoisted parts cannot fault or write."""
        return not self.needs(e) or speculable(e)

    def inline(self, call: ir.Call, pre: list) -> str | None:
        """Append `call`'s body (renamed, its `return`s made `Leave`s) to `pre`; the name of
        the local that holds its result (None for a helper without one)."""
        f = call.func
        prefix = f"$${f.name}{next(self.tmp)}."
        names = {n for n, _ in f.params} | {n for n, _ in f.locals}
        slices: dict[str, ir.SliceRef] = {}
        for (pname, pty), arg in zip(f.params, call.args, strict=True):
            if isinstance(pty, SliceTy):
                assert isinstance(arg, ir.SliceRef)
                slices[pname] = arg
            else:
                self.new_locals.append((prefix + pname, pty))
                pre.append(ir.Assign(prefix + pname, self.hoist(arg, pre), call.span))
        for n, t in f.locals:
            if n not in slices and (prefix + n, t) not in self.new_locals:
                self.new_locals.append((prefix + n, t))

        def rename(x: object) -> object | None:
            if isinstance(x, ir.Local) and x.name in names and x.name not in slices:
                return dataclasses.replace(x, name=prefix + x.name)
            if isinstance(x, ir.SliceRef) and x.name in slices:
                return slices[x.name]
            return None

        body = tuple(_rename_stmt(s, rename, names - set(slices), prefix) for s in f.body)
        dst = self.fresh("r", f.ret) if _has_value(f.ret) else None
        sid = next(self.ids)
        inlined = self.body(body, (dst, sid))
        if inlined and isinstance(inlined[-1], Leave) and inlined[-1].id == sid:
            inlined = inlined[:-1]  # the closing `return`: nothing to skip
        pre.append(Scope(sid, inlined, call.span))
        return dst

    def stmt(self, s: object, out: list, ret: tuple[str | None, int] | None) -> None:
        pre: list = []
        if isinstance(s, ir.Return) and ret is not None:
            dst, sid = ret
            if s.value is not None and dst is not None:
                out.extend(self.body([ir.Assign(dst, s.value, s.span)], ret))
            out.append(Leave(sid, s.span))
            return
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Collective):
            c = s.value
            out_s = dataclasses.replace(s, value=dataclasses.replace(c, value=self.hoist(c.value, pre)))
        elif isinstance(s, ir.ExprStmt) and isinstance(s.value, ir.Call) and _func_syncs(s.value.func, self.memo):
            self.inline(s.value, pre)
            out.extend(pre)
            return
        elif isinstance(s, ir.If):
            out_s = dataclasses.replace(s, cond=self.hoist(s.cond, pre), body=self.body(s.body, ret), orelse=self.body(s.orelse, ret))
        elif isinstance(s, ir.While):
            body = self.body(s.body, ret)
            if self.needs(s.cond):
                cpre: list = []
                c = self.hoist(s.cond, cpre)
                stop = ir.If(ir.UnaryOp("not", c, BOOL, s.span), (ir.Break(s.span),), (), s.span)
                out_s = dataclasses.replace(s, cond=ir.Const(True, BOOL, s.span), body=tuple(cpre) + (stop,) + body)
            else:
                out_s = dataclasses.replace(s, body=body)
        elif isinstance(s, ir.ForRange):
            out_s = dataclasses.replace(
                s, start=self.hoist(s.start, pre), stop=self.hoist(s.stop, pre), step=self.hoist(s.step, pre), body=self.body(s.body, ret)
            )
        elif isinstance(s, ir.GridStride):
            body = self.body(s.body, ret)
            if any(_is_sync_stmt(x) for x in walk(body)):
                raise Unsplittable("a synchronisation point inside a grid-stride loop")
            out_s = dataclasses.replace(s, body=body)
        elif isinstance(s, Scope):
            out_s = dataclasses.replace(s, body=self.body(s.body, ret))
        elif isinstance(s, ir.Write | ir.SharedWrite):
            value = self.hoist(s.value, pre)  # the lowering evaluates the value first
            out_s = dataclasses.replace(s, value=value, index=tuple(self.hoist(i, pre) for i in s.index))
        else:
            if sub_bodies(s) and _stmt_syncs(s, self.memo):
                raise Unsplittable(f"a synchronisation point inside {type(s).__name__}")
            changes = {}
            for f in node_fields(s.__class__):
                v = getattr(s, f)
                if isinstance(v, EXPR_TYPES):
                    changes[f] = self.hoist(v, pre)
                elif isinstance(v, tuple) and any(isinstance(x, EXPR_TYPES) for x in v):
                    changes[f] = tuple(self.hoist(x, pre) if isinstance(x, EXPR_TYPES) else x for x in v)
            out_s = dataclasses.replace(s, **changes) if changes else s
        out.extend(pre)
        out.append(out_s)


def _has_value(t: object) -> bool:
    return isinstance(t, (ScalarTy, WitnessTy))


def _rename_stmt(s: object, rename: typing.Callable, names: set[str], prefix: str) -> object:
    changes: dict[str, object] = {}
    for f in node_fields(s.__class__):
        v = getattr(s, f)
        if isinstance(v, EXPR_TYPES):
            changes[f] = map_expr(v, rename)
        elif isinstance(v, tuple) and v and all(isinstance(x, EXPR_TYPES) or isinstance(x, str) for x in v) and any(isinstance(x, EXPR_TYPES) for x in v):
            changes[f] = tuple(map_expr(x, rename) if isinstance(x, EXPR_TYPES) else x for x in v)
        elif isinstance(v, tuple) and v and all(dataclasses.is_dataclass(x) and not isinstance(x, EXPR_TYPES) for x in v):
            changes[f] = tuple(_rename_stmt(x, rename, names, prefix) for x in v)  # nested statements
        elif f in ("name", "var", "dst", "target") and v in names and not isinstance(s, ir.SharedDecl):
            changes[f] = prefix + v  # the local a statement assigns
    return dataclasses.replace(s, **changes) if changes else s


def _is_sync_stmt(s: object) -> bool:
    return isinstance(s, (ir.Barrier, WarpX)) or (isinstance(s, ir.Fence) and s.kind == "warp_sync") or (
        isinstance(s, ir.Assign) and isinstance(s.value, ir.Collective)
    )


def normalize(k: ir.KernelIR) -> tuple[ir.KernelIR, Normalizer]:
    n = Normalizer(k)
    body = n.body(k.body)
    return dataclasses.replace(k, body=body, locals=k.locals + tuple(n.new_locals)), n

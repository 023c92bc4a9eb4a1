"""The typer's records (`@az.record`, language/record_types.py): a record slice's elements
and fields, record locals and `Rec(...)` values.  `RecordTyper` is the typer's
collaborator for them (`FnTyper.records`, typer_fn.py).

A record value is typed as an `ir.RecordValue`: one expression per scalar leaf.  It is
spread where it goes, so the typed model holds scalars only:

- `p[i].x` (`p: Slice[Rec]`) is one `ir.Read` of `p` at `i` with the field's byte offset;
  `p[i]` reads every leaf (one fault site for all);
- `r = p[i]` binds the locals `r.x`, `r.v.0`, ... (names no user local can have), and `r.x`
  reads one of them;
- `out[i] = Rec(x=..., v=...)` and `out[i] = r` write every leaf at `out[i]`, `out[i].x = v`
  one, through the same ownership rules as a scalar element (the witness of the output);
- an `az.Array[T, n]` field is read and written an element at a time, at a constant index;
- a helper returning a record returns the tuple of its leaves (`ir.FuncIR.ret`), and its call
  is a whole statement's value (`r = f(x)`, `out[i] = f(x)`, `return f(x)`): the call is
  unpacked into the compiler's temporaries first (`value`), so it runs once, where Python
  runs it.  Anywhere else (`f(x).m`, `g(f(x))`) it is `az-unsupported`, asking to bind it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from anodize.language import ir, messages
from anodize.language.record_types import ArrayFieldTy, RecordTy
from anodize.language.symbols import RESERVED_PREFIX
from anodize.language.types import ScalarTy, SliceTy, TupleTy

if TYPE_CHECKING:
    from anodize.language.typer_fn import FnTyper

__all__ = ["record_slice", "rooted", "load_local", "read_element", "member", "array_element", "construct", "assign_local", "store",
           "value", "return_value"]


def _count(ty: Any) -> int:
    if isinstance(ty, RecordTy):
        return len(ty.leaves())
    return ty.n if isinstance(ty, ArrayFieldTy) else 1


def leaf_name(base: str, path: tuple[str, ...]) -> str:
    return base + "." + ".".join(path)


def _size(ty: Any) -> int:
    return ty.size if isinstance(ty, (RecordTy, ArrayFieldTy)) else ty.info.mem_bits // 8


class RecordTyper:
    """Records of one function body (module docstring)."""

    def __init__(self, fn: FnTyper):
        self.fn = fn
        self.st = fn.st

    def record_slice(self, name: str) -> RecordTy | None:
        sty = self.st.slices.get(name)
        return sty.elem if isinstance(sty, SliceTy) and isinstance(sty.elem, RecordTy) else None

    def rooted(self, node: ast.expr) -> bool:
        """Is `node` (an attribute or subscript chain) a part of a record value: rooted at a
        record local, an element of a record slice, or a call (`Rec(...).x`, `f(x).x`)?"""
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and self.record_slice(node.value.id):
                return True
            node = node.value
        if isinstance(node, ast.Name):
            return isinstance(self.st.vars.get(node.id), RecordTy)
        if not isinstance(node, ast.Call):
            return False
        sym = self.fn.names.sym(node.func)  # `Rec(...).x`, or a helper's (`f(x).x`: refused where it is typed)
        return sym.kind == "record" or (sym.kind == "function" and sym.fn_kind == "func")

    def load_local(self, name: str, node: ast.AST) -> ir.RecordValue:
        rec = self.st.vars[name]
        span = self.st.span(node)
        return ir.RecordValue(rec, tuple(ir.Local(leaf_name(name, p), t, span) for p, t, _ in rec.leaves()), span)

    def read_element(self, name: str, node: ast.Subscript) -> ir.RecordValue:
        """`p[i]` of a record slice: every leaf read at `i` (one bounds check site for all)."""
        sty = self.st.slices[name]
        rec: RecordTy = sty.elem
        if sty.kind.atomic:
            self.st.fail(messages.type_error(self.st.span(node), "record-atomic", name=name))
        index, checked = self.fn.exprs.index_of(sty, name, node.slice, disjoint=sty.kind.disjoint)
        span = self.st.span(node)
        site = self.st.k.site(span, "read", name) if checked else -1
        ref = ir.SliceRef(name, sty, self.st.span(node.value))
        return ir.RecordValue(rec, tuple(ir.Read(ref, index, checked, site, t, span, off) for _, t, off in rec.leaves()), span)

    def member(self, base: ir.RecordValue, node: ast.Attribute) -> ir.Expr:
        """`r.x` of a record value: the field's leaf, a nested record or an array field's leaves."""
        rec = base.ty
        if not isinstance(rec, RecordTy):
            self.st.fail(messages.type_error(self.st.span(node), "record-array-whole", expr=ast.unparse(node.value)))
        at = 0
        for f in rec.fields:
            n = _count(f.ty)
            if f.name == node.attr:
                leaves = base.leaves[at : at + n]
                if isinstance(f.ty, ScalarTy):
                    return leaves[0]
                return ir.RecordValue(f.ty, leaves, self.st.span(node))
            at += n
        self.st.fail(messages.type_error(self.st.span(node), "record-no-field", ty=rec, attr=node.attr, fields=", ".join(f"`{f.name}`" for f in rec.fields)))

    def _const_index(self, node: ast.expr, n: int, what: str) -> int:
        k = self.fn.names.const_value(node)
        if not isinstance(k, int) or isinstance(k, bool):
            self.st.fail(messages.unsupported(self.st.span(node), "record-array-index", what=what))
        if not 0 <= k < n:
            self.st.fail(messages.type_error(self.st.span(node), "record-array-bounds", what=what, k=k, n=n))
        return int(k)

    def array_element(self, node: ast.Subscript) -> ir.Expr:
        """`p[i].ids[k]` / `r.ids[k]`: an element of an `az.Array` field, at a constant `k`."""
        base = self.fn.expr(node.value)
        if not (isinstance(base, ir.RecordValue) and isinstance(base.ty, ArrayFieldTy)):
            self.st.fail(messages.type_error(self.st.span(node), "record-index-not-array", expr=ast.unparse(node.value), ty=base.ty))
        return base.leaves[self._const_index(node.slice, base.ty.n, ast.unparse(node.value))]  # type: ignore[no-any-return]

    def construct(self, rec: RecordTy, node: ast.Call) -> ir.RecordValue:
        """`Rec(x=..., v=...)` (or positional, in field order): every field given once; an array
        field takes a tuple of its elements, a nested record a record value."""
        given: dict[str, ast.expr] = {}
        if len(node.args) > len(rec.fields):
            self.st.fail(messages.type_error(self.st.span(node), "record-ctor-arity", name=rec.name, n=len(rec.fields), got=len(node.args)))
        for f, a in zip(rec.fields, node.args):
            given[f.name] = a
        for kw in node.keywords:
            if kw.arg is None or rec.field(kw.arg) is None:
                self.st.fail(messages.type_error(self.st.span(kw), "record-no-field", ty=rec, attr=kw.arg or "**", fields=", ".join(f"`{f.name}`" for f in rec.fields)))
            if kw.arg in given:
                self.st.fail(messages.type_error(self.st.span(kw), "record-ctor-twice", name=rec.name, field=kw.arg))
            given[kw.arg] = kw.value
        leaves: list[ir.Expr] = []
        for f in rec.fields:
            a = given.get(f.name)
            if a is None:
                self.st.fail(messages.type_error(self.st.span(node), "record-ctor-missing", name=rec.name, field=f.name))
            leaves.extend(self._value_leaves(f.ty, a, f"field `{f.name}` of `{rec.name}`"))
        return ir.RecordValue(rec, tuple(leaves), self.st.span(node))

    def _value_leaves(self, ty: Any, node: ast.expr, what: str) -> list[ir.Expr]:
        """The leaves of a value of `ty` given by `node` (coerced as a store into `ty`)."""
        if isinstance(ty, ArrayFieldTy):
            if not isinstance(node, ast.Tuple) or len(node.elts) != ty.n:
                v = self.fn.expr(node)
                if isinstance(v, ir.RecordValue) and v.ty == ty:
                    return list(v.leaves)
                self.st.fail(messages.type_error(self.st.span(node), "record-array-value", what=what, ty=ty, n=ty.n))
            return [self.fn.exprs.coerce(self.fn.expr(e), ty.elem, e, what) for e in node.elts]
        return self._leaves_of(ty, self.fn.expr(node), node, what)

    def _leaves_of(self, ty: Any, v: ir.Expr | ir.RecordValue, node: ast.expr, what: str) -> list[ir.Expr]:
        """The leaves of the typed value `v` stored into `ty`."""
        if isinstance(ty, (RecordTy, ArrayFieldTy)):
            if not (isinstance(v, ir.RecordValue) and v.ty == ty):
                self.st.fail(messages.type_error(self.st.span(node), "expected-found", want=ty, what=what, got=v.ty))
            return list(v.leaves)
        if isinstance(v, ir.RecordValue):
            self.st.fail(messages.type_error(self.st.span(node), "expected-found", want=ty, what=what, got=v.ty))
        return [self.fn.exprs.coerce(v, ty, node, what)]

    def value(self, node: ast.expr) -> tuple[list[ir.Stmt], ir.Expr | ir.RecordValue | None]:
        """A statement's whole value when it is a helper's call: (the statements binding a
        record-returning helper's result to temporaries, the record value of those), or ([],
        the call) for another helper; ([], None), untyped, for any other expression."""
        if not isinstance(node, ast.Call):
            return [], None
        sym = self.fn.names.sym(node.func)
        if not (sym.kind == "function" and sym.fn_kind == "func"):
            return [], None
        saved = self.st.record_call_site
        self.st.record_call_site = node
        try:
            e = self.fn.expr(node)
        finally:
            self.st.record_call_site = saved
        rec = self.st.k.record_returns.get(id(e.func)) if isinstance(e, ir.Call) else None
        if rec is None:
            return [], e
        tmp = f"{RESERVED_PREFIX}rec{self.st.unpack_temps}"
        self.st.unpack_temps += 1
        span = self.st.span(node)
        names = []
        for p, t, _ in rec.leaves():
            names.append(leaf_name(tmp, p))
            self.st.vars[names[-1]] = self.st.locals[names[-1]] = t
        leaves = tuple(ir.Local(n, t, span) for n, (_, t, _) in zip(names, rec.leaves()))
        return [ir.Unpack(tuple(names), e, span)], ir.RecordValue(rec, leaves, span)

    def return_value(self, value: ir.Expr | ir.RecordValue, node: ast.Return) -> list[ir.Stmt]:
        """`return <record>` in a helper: the tuple of its leaves (every return one record type)."""
        assert node.value is not None
        ret = self.st.ret
        if not isinstance(value, ir.RecordValue) or (ret is not None and ret != value.ty):
            want = ret if ret is not None else "a record"
            self.st.fail(messages.type_error(self.st.span(node.value), "expected-found", want=want, what="the return value", got=value.ty))
        if ret is None:
            self.st.ret = value.ty
        tty = TupleTy(tuple(t for _, t, _ in value.ty.leaves()))
        return [ir.Return(ir.MakeTuple(value.leaves, tty, value.span), self.st.span(node))]

    def assign_local(self, name: str, value: ir.RecordValue, node: ast.AST) -> list[ir.Stmt]:
        """`r = <record>`: the record local's leaves assigned (declared on its first binding)."""
        old = self.st.vars.get(name)
        if old is None:
            if name in self.st.slices or name in self.st.shared or name in self.st.arrays:
                self.st.fail(messages.unsupported(self.st.span(node), "rebinding-slice", name=name))
            self.st.vars[name] = value.ty  # the record: its leaves are the locals
            for p, t, _ in value.ty.leaves():
                self.st.vars[leaf_name(name, p)] = self.st.locals[leaf_name(name, p)] = t
        elif old != value.ty:
            self.st.fail(messages.type_error(self.st.span(node), "local-retyped", name=name, old=old, ty=value.ty))
        span = self.st.span(node)
        return [ir.Assign(leaf_name(name, p), v, span) for (p, _, _), v in zip(value.ty.leaves(), value.leaves)]

    def _path(self, node: ast.expr) -> tuple[ast.expr, list[tuple[str, ast.AST]]]:
        """(root, steps) of a store target: the root a record slice's subscript or a record local's
        name, each step an attribute (`("attr", node)`) or an array index (`("index", node)`)."""
        steps: list[tuple[str, ast.AST]] = []
        while True:
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and self.record_slice(node.value.id):
                return node, steps[::-1]
            if isinstance(node, ast.Name) and isinstance(self.st.vars.get(node.id), RecordTy):
                return node, steps[::-1]
            if isinstance(node, ast.Attribute):
                steps.append(("attr", node))
                node = node.value
            elif isinstance(node, ast.Subscript):
                steps.append(("index", node))
                node = node.value
            else:
                self.st.fail(messages.unsupported(self.st.span(node), "assign-to", target=ast.unparse(node)))

    def _walk(self, rec: RecordTy, steps: list[tuple[str, ast.AST]]) -> tuple[Any, int, int]:
        """The type at the end of `steps` from `rec`, its byte offset and its first leaf's number."""
        ty: Any = rec
        off = leaf = 0
        for kind, n in steps:
            if kind == "attr":
                assert isinstance(n, ast.Attribute)
                if not isinstance(ty, RecordTy):
                    self.st.fail(messages.type_error(self.st.span(n), "record-array-whole", expr=ast.unparse(n.value)))
                f = ty.field(n.attr)
                if f is None:
                    self.st.fail(messages.type_error(self.st.span(n), "record-no-field", ty=ty, attr=n.attr, fields=", ".join(f"`{x.name}`" for x in ty.fields)))
                leaf += sum(_count(x.ty) for x in ty.fields[: ty.fields.index(f)])
                off += f.offset
                ty = f.ty
            else:
                assert isinstance(n, ast.Subscript)
                if not isinstance(ty, ArrayFieldTy):
                    self.st.fail(messages.type_error(self.st.span(n), "record-index-not-array", expr=ast.unparse(n.value), ty=ty))
                k = self._const_index(n.slice, ty.n, ast.unparse(n.value))
                off += k * ty.align
                leaf += k
                ty = ty.elem
        return ty, off, leaf

    def store(self, target: ast.expr, value_node: ast.expr | None, node: ast.AST, op: str | None = None,
              typed: ir.Expr | ir.RecordValue | None = None) -> list[ir.Stmt]:
        """`out[i] = <record>`, `out[i].x = v`, `out[i].ids[2] = v`, `r.x = v` (and `op=` forms:
        the current value read first).  A record slice is written only where a scalar output is.
        `typed`: the value, already typed (a helper's record result, bound by `value`)."""
        root, steps = self._path(target)
        span = self.st.span(node)
        if isinstance(root, ast.Name):
            name = root.id
            ty, _, leaf = self._walk(self.st.vars[name], steps)
            leaves = self.st.vars[name].leaves()
            names = [leaf_name(name, p) for p, _, _ in leaves[leaf : leaf + _count(ty)]]
            cur: ir.Expr = self.load_local(name, root)
            for kind, n in steps:
                cur = self.member(cur, n) if kind == "attr" else cur.leaves[self._const_index(n.slice, cur.ty.n, "")]  # type: ignore[arg-type, attr-defined]
            vals = self._store_values(ty, cur, value_node, node, op, f"`{ast.unparse(target)}`", typed)
            return [ir.Assign(nm, v, span) for nm, v in zip(names, vals)]
        assert isinstance(root, ast.Subscript) and isinstance(root.value, ast.Name)
        name = root.value.id
        sty = self.st.slices[name]
        rec: RecordTy = sty.elem
        if sty.kind.atomic:
            self.st.fail(messages.type_error(self.st.span(root), "record-atomic", name=name))
        if not sty.kind.output:
            self.st.fail(messages.shared_write(self.st.span(root), name, sty.kind.name, "how-write-to"))
        ty, off, _ = self._walk(rec, steps)
        index, checked = self.fn.exprs.index_of(sty, name, root.slice, disjoint=True, access="written")
        site = self.st.k.site(self.st.span(root), "write", name) if checked else -1
        ref = ir.SliceRef(name, sty, self.st.span(root.value))
        base_leaves = [(t, o) for _, t, o in rec.leaves() if off <= o < off + _size(ty)]
        cur = None
        if op is not None:
            rsite = self.st.k.site(self.st.span(root), "read", name) if checked else -1
            reads = tuple(ir.Read(ref, index, checked, rsite, t, span, o) for t, o in base_leaves)
            cur = reads[0] if isinstance(ty, ScalarTy) else ir.RecordValue(ty, reads, span)
        vals = self._store_values(ty, cur, value_node, node, op, f"`{ast.unparse(target)}`", typed)
        return [ir.Write(ref, index, v, checked, site, span, o) for (_, o), v in zip(base_leaves, vals)]

    def _store_values(self, ty: Any, cur: ir.Expr | None, value_node: ast.expr | None, node: ast.AST, op: str | None, what: str,
                      typed: ir.Expr | ir.RecordValue | None = None) -> list[ir.Expr]:
        assert value_node is not None
        if typed is not None:  # (a helper's call: never an augmented assignment's operand here)
            return self._leaves_of(ty, typed, value_node, what)
        if op is None:
            return self._value_leaves(ty, value_node, what)
        if not isinstance(ty, ScalarTy) or cur is None:
            self.st.fail(messages.type_error(self.st.span(node), "record-augmented", what=what))
        return [self.fn.exprs.coerce(self.fn.exprs.binop(op, cur, self.fn.expr(value_node), node), ty, node, what)]

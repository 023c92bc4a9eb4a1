"""The typer's local values: per-thread local arrays (`az.local.array(shape, T)`), tuples
returned by helpers and tuple unpacking (`a, b = f(x)`, `a, b = b, a`).  `LocalValueTyper` is
the typer's collaborator for them (`FnTyper.local_values`, typer_fn.py).

A local array is a value of its thread only: it is declared by a plain assignment, indexed
(bounds-checked; a constant index out of range is an error here), and passed to helpers,
which take it by reference (inlined, so the helper's accesses are the caller's).  It is never
bound to another name, returned, put in a tuple or passed where a slice is expected.  Tuples
hold scalars; they exist only as a helper's return value and on the right of an unpacking,
whose whole right side is evaluated before any name is assigned."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from anodize.language import ir
from anodize.language.ranges import ZERO, Lin
from anodize.language.symbols import RESERVED_PREFIX
from anodize.language.types import LocalArrayTy, ScalarTy, TupleTy, implicitly_converts
from anodize.language.vocab import LOCAL_ARRAY_MAX_BYTES, LOCAL_ARRAY_MAX_RANK

if TYPE_CHECKING:
    from anodize.language.typer_fn import FnTyper


class LocalValueTyper:
    """Local arrays, tuple returns and unpacking of one function body."""

    def __init__(self, fn: FnTyper):
        self.fn = fn
        self.st = fn.st

    # ---- local arrays --------------------------------------------------------------------
    def local_decl(self, name: str, call: ast.Call) -> list[ir.Stmt]:
        """`name = az.local.array(shape, T)`."""
        if len(call.args) != 2 or call.keywords:
            self.st.type_error(call, "local-array-takes-shape")
        shape_node, dtype_node = call.args
        shape = self.fn.names.const_value(shape_node)
        dims = (shape,) if isinstance(shape, int) and not isinstance(shape, bool) else shape
        if (
            not isinstance(dims, tuple)
            or not 1 <= len(dims) <= LOCAL_ARRAY_MAX_RANK
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims)
        ):
            self.st.type_error(shape_node, "local-array-shape", expr=ast.unparse(shape_node))
        elem = self.fn.names.resolve_type(dtype_node, "the local array")
        if not isinstance(elem, ScalarTy):
            self.st.type_error(dtype_node, "local-array-dtype", ty=elem)
        ty = LocalArrayTy(elem, tuple(dims))
        nbytes = ty.size * max(1, elem.info.mem_bits // 8)
        if self.st.is_kernel and any(isinstance(n, ast.Name) and n.id in self.st.k.unknown_consts for n in ast.walk(shape_node)):
            # sized by an `az.Constant` checked without a value (1 stands in): what depends on
            # the size is checked when a value is specialised, with the same code and span
            self.st.unsized.add(name)
        elif nbytes > LOCAL_ARRAY_MAX_BYTES:
            self.st.type_error(shape_node, "local-array-too-large", name=name, nbytes=nbytes, limit=LOCAL_ARRAY_MAX_BYTES)
        if name in self.st.vars or name in self.st.slices or name in self.st.shared or name in self.st.arrays:
            self.st.unsupported(call, "local-array-rebind", help="local-array-escape-help", name=name)
        self.st.arrays[name] = ty
        return [ir.LocalArrayDecl(name, ty, self.st.span(call))]

    def local_ref(self, name: str, node: ast.AST) -> ir.LocalArrayRef:
        return ir.LocalArrayRef(name, self.st.arrays[name], self.st.span(node))

    def local_index(self, arr: ir.LocalArrayRef, node: ast.expr) -> tuple[tuple[ir.Expr, ...], bool]:
        """The index expressions of `arr[node]` and whether a run-time check is still needed; a
        constant index out of range is an error here."""
        rank = len(arr.ty.shape)
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        if len(elts) != rank:
            self.st.type_error(node, "local-array-index-rank", help="local-array-index-help", name=arr.name, rank=rank, s="s" if rank > 1 else "")
        index = tuple(self.fn.exprs.as_index(self.fn.expr(e), e) for e in elts)
        if arr.name in self.st.unsized:
            return index, True
        for axis, (e, n) in enumerate(zip(index, arr.ty.shape, strict=True)):
            if isinstance(e, ir.Const) and not 0 <= int(e.value) < n:
                self.st.type_error(elts[axis], "local-array-index-constant", help="local-array-index-help", index=e.value, axis=axis, name=arr.name, length=n)
        return index, not self.fn.ranges.index_in_range(index, [Lin(ZERO, d) for d in arr.ty.shape])

    def local_read(self, v: ast.Name, node: ast.Subscript) -> ir.Expr:
        arr = self.local_ref(v.id, v)
        index, checked = self.local_index(arr, node.slice)
        span = self.st.span(node)
        site = self.st.k.site(span, "read", f"local {v.id}") if checked else -1
        return ir.LocalArrayRead(arr, index, checked, site, arr.ty.elem, span)

    def local_store(self, target: ast.Subscript, value: ir.Expr, node: ast.AST) -> ir.Stmt:
        v = target.value
        assert isinstance(v, ast.Name)
        arr = self.local_ref(v.id, v)
        index, checked = self.local_index(arr, target.slice)
        value = self.fn.exprs.coerce(value, arr.ty.elem, node, f"an element of `{v.id}`")
        site = self.st.k.site(self.st.span(target), "write", f"local {v.id}") if checked else -1
        return ir.LocalArrayWrite(arr, index, value, checked, site, self.st.span(node))

    def local_escape(self, value: ir.Expr, node: ast.AST, returned: bool = False) -> None:
        """A local array where a binding to another name or a return needs one value."""
        if not isinstance(value, ir.LocalArrayRef):
            return
        if returned:
            self.st.type_error(node, "local-array-return", help="local-array-return-help", name=value.name)
        self.st.type_error(node, "local-array-bind", help="local-array-escape-help", name=value.name)

    # ---- tuples --------------------------------------------------------------------------
    def tuple_value(self, node: ast.Tuple) -> ir.MakeTuple:
        """`a, b` as a value: every element a scalar (a 1-D witness reads as its int)."""
        values: list[ir.Expr] = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                self.st.unsupported(e, "argument-unpacking")
            v = self.fn.expr(e)
            if isinstance(v, ir.LocalArrayRef):
                self.st.unsupported(e, "local-array-in-tuple", help="local-array-escape-help", name=v.name)
            if not isinstance(v.ty, ScalarTy):
                self.st.type_error(e, "tuple-element-scalar", help="tuple-scalars-help", ty=v.ty)
            values.append(v)
        return ir.MakeTuple(tuple(values), TupleTy(tuple(v.ty for v in values)), self.st.span(node))  # type: ignore[misc]

    def tuple_return(self, node: ast.Return, value: ir.Expr | None = None) -> list[ir.Stmt]:
        """`return a, b` (or `return f(x)` of a tuple-returning helper) in a helper."""
        assert node.value is not None
        if value is None:
            value = self.tuple_value(node.value) if isinstance(node.value, ast.Tuple) else self.fn.expr(node.value)
        self.local_escape(value, node.value, returned=True)
        if self.st.ret is None:
            if not isinstance(value.ty, TupleTy):
                self.st.type_error(node.value, "helper-return", ty=value.ty)
            self.st.ret = value.ty
            return [ir.Return(value, self.st.span(node))]
        if not isinstance(self.st.ret, TupleTy) or not isinstance(value.ty, TupleTy):
            self.st.type_error(node.value, "tuple-return-kind", ret=self.st.ret, ty=value.ty)
        if len(value.ty.elems) != len(self.st.ret.elems):
            self.st.type_error(node.value, "tuple-return-count", n=len(self.st.ret.elems), got=len(value.ty.elems))
        if not isinstance(value, ir.MakeTuple) and value.ty != self.st.ret:
            self.st.type_error(node.value, "tuple-return-kind", ret=self.st.ret, ty=value.ty)
        return [ir.Return(self.tuple_to(value, self.st.ret, node.value, "the return value"), self.st.span(node))]

    def tuple_to(self, value: ir.Expr, want: TupleTy, node: ast.AST, what: str) -> ir.Expr:
        """A tuple value converted element-wise to `want` (the implicit conversions of `coerce`).
        A display converts here; a call's tuple is checked here and converted element by element
        where it is unpacked (`Unpack`), so its value keeps the helper's type."""
        if value.ty == want:
            return value
        if isinstance(value, ir.MakeTuple):
            elts = tuple(self.fn.exprs.coerce(v, t, node, f"{what} (element {k})") for k, (v, t) in enumerate(zip(value.values, want.elems, strict=True)))
            return ir.MakeTuple(elts, want, value.span)
        assert isinstance(value.ty, TupleTy)
        for k, (got, t) in enumerate(zip(value.ty.elems, want.elems, strict=True)):
            if got != t and not implicitly_converts(got, t):
                self.st.type_error(node, "store-into-type-without", help="convert-explicitly", got=got, what=f"{what} (element {k})", want=t)
        return value

    def unpack(self, target: ast.Tuple, value_node: ast.expr, node: ast.AST) -> list[ir.Stmt]:
        """`a, b = value`: the right side is a tuple display or a tuple-valued call, evaluated
        whole before any target is assigned.  Targets are names, or element stores
        (`w[q], w[q + 1] = w[q + 1], w[q]`: the value goes through the compiler's temporaries,
        then each element is stored left to right, as Python does)."""
        if any(isinstance(t, ast.Subscript) for t in target.elts):
            return self.unpack_into_elements(target, value_node, node)
        names: list[str] = []
        for t in target.elts:
            if not isinstance(t, ast.Name):
                self.st.unsupported(t, "unpack-target", help="unpack-names-help", target=ast.unparse(t))
            names.append(t.id)
        value: ir.Expr = self.tuple_value(value_node) if isinstance(value_node, ast.Tuple) else self.fn.expr(value_node)
        self.local_escape(value, value_node)
        if not isinstance(value.ty, TupleTy):
            self.st.type_error(value_node, "unpack-not-tuple", ty=value.ty)
        if len(value.ty.elems) != len(names):
            self.st.type_error(node, "unpack-count", got=len(value.ty.elems), n=len(names))
        # the type each name takes: its existing type, else the element's (as `x = v` would)
        want: list[ScalarTy] = []
        for name, t, tnode in zip(names, value.ty.elems, target.elts, strict=True):
            if name in self.st.arrays:
                self.st.unsupported(tnode, "local-array-rebind", help="local-array-escape-help", name=name)
            old = self.st.vars.get(name)
            if old is None or name in self.st.slices or name in self.st.shared:
                self.fn.stmts.declare(name, t, tnode)
                old = self.st.vars[name]
            if not isinstance(old, ScalarTy):
                self.st.type_error(tnode, "expected-found", want=old, what=f"`{name}`", got=t)
            want.append(old)
        value = self.tuple_to(value, TupleTy(tuple(want)), value_node, "the unpacked value")
        for name in names:  # no facts survive: `a, b = b, a` relates the old values, not the new
            self.st.facts = {f for f in self.st.facts if f[0] != name}
        self.fn.ranges.kill_facts(set(names))
        return [ir.Unpack(tuple(names), value, self.st.span(node))]


    def unpack_into_elements(self, target: ast.Tuple, value_node: ast.expr, node: ast.AST) -> list[ir.Stmt]:
        for t in target.elts:
            if not isinstance(t, (ast.Name, ast.Subscript)):
                self.st.unsupported(t, "unpack-target", help="unpack-names-help", target=ast.unparse(t))
        value: ir.Expr = self.tuple_value(value_node) if isinstance(value_node, ast.Tuple) else self.fn.expr(value_node)
        self.local_escape(value, value_node)
        if not isinstance(value.ty, TupleTy):
            self.st.type_error(value_node, "unpack-not-tuple", ty=value.ty)
        if len(value.ty.elems) != len(target.elts):
            self.st.type_error(node, "unpack-count", got=len(value.ty.elems), n=len(target.elts))
        n = self.st.unpack_temps
        self.st.unpack_temps = n + len(target.elts)
        temps = [f"{RESERVED_PREFIX}unpack{n + k}" for k in range(len(target.elts))]
        for t, ty in zip(temps, value.ty.elems, strict=True):
            self.st.vars[t] = ty
            self.st.locals[t] = ty
        out: list[ir.Stmt] = [ir.Unpack(tuple(temps), value, self.st.span(node))]
        for t, tnode, ty in zip(temps, target.elts, value.ty.elems, strict=True):
            tmp = ir.Local(t, ty, self.st.span(tnode))
            if isinstance(tnode, ast.Subscript):
                out.append(self.fn.exprs.store(tnode, tmp, tnode))
            else:
                assert isinstance(tnode, ast.Name)
                if tnode.id in self.st.arrays:
                    self.st.unsupported(tnode, "local-array-rebind", help="local-array-escape-help", name=tnode.id)
                out.append(self.fn.stmts.assign_value(tnode.id, tmp, tnode))
        return out

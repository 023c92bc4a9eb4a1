"""The typer's local values: per-thread local arrays (`az.local.array(shape, T)`), tuples
returned by helpers and tuple unpacking (`a, b = f(x)`, `a, b = b, a`).  A mixin of
`_FnCompiler` (typer.py).

A local array is a value of its thread only: it is declared by a plain assignment, indexed
(bounds-checked; a constant index out of range is an error here), and passed to helpers,
which take it by reference (inlined, so the helper's accesses are the caller's).  It is never
bound to another name, returned, put in a tuple or passed where a slice is expected.  Tuples
hold scalars; they exist only as a helper's return value and on the right of an unpacking,
whose whole right side is evaluated before any name is assigned."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from anodize.language import ir, messages
from anodize.language.symbols import RESERVED_PREFIX
from anodize.language.types import I64, LocalArrayTy, ScalarTy, TupleTy, Ty, implicitly_converts
from anodize.language.vocab import LOCAL_ARRAY_MAX_BYTES, LOCAL_ARRAY_MAX_RANK

if TYPE_CHECKING:
    from anodize.language.typer import _FnCompiler as _Base  # type: ignore[attr-defined]
else:
    _Base = object


class LocalsTyping(_Base):
    """Local arrays, tuple returns and unpacking of the typer's function compiler."""

    # ---- local arrays --------------------------------------------------------------------
    def local_decl(self, name: str, call: ast.Call) -> list[ir.Stmt]:
        """`name = az.local.array(shape, T)`."""
        if len(call.args) != 2 or call.keywords:
            self.type_error(call, "local-array-takes-shape")
        shape_node, dtype_node = call.args
        shape = self.const_value(shape_node)
        dims = (shape,) if isinstance(shape, int) and not isinstance(shape, bool) else shape
        if (
            not isinstance(dims, tuple)
            or not 1 <= len(dims) <= LOCAL_ARRAY_MAX_RANK
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims)
        ):
            self.type_error(shape_node, "local-array-shape", expr=ast.unparse(shape_node))
        elem = self.resolve_type(dtype_node, "the local array")
        if not isinstance(elem, ScalarTy):
            self.type_error(dtype_node, "local-array-dtype", ty=elem)
        ty = LocalArrayTy(elem, tuple(dims))
        nbytes = ty.size * max(1, elem.info.mem_bits // 8)
        if self.is_kernel and any(isinstance(n, ast.Name) and n.id in self.k.unknown_consts for n in ast.walk(shape_node)):
            # sized by an `az.Constant` checked without a value (1 stands in): what depends on
            # the size is checked when a value is specialised, with the same code and span
            self.__dict__.setdefault("_unsized", set()).add(name)
        elif nbytes > LOCAL_ARRAY_MAX_BYTES:
            self.type_error(shape_node, "local-array-too-large", name=name, nbytes=nbytes, limit=LOCAL_ARRAY_MAX_BYTES)
        if name in self.vars or name in self.slices or name in self.shared or name in self.arrays:
            self.unsupported(call, "local-array-rebind", help="local-array-escape-help", name=name)
        self.arrays[name] = ty
        return [ir.LocalArrayDecl(name, ty, self.span(call))]

    def local_ref(self, name: str, node: ast.AST) -> ir.LocalArrayRef:
        return ir.LocalArrayRef(name, self.arrays[name], self.span(node))

    def local_index(self, arr: ir.LocalArrayRef, node: ast.expr) -> tuple[tuple[ir.Expr, ...], bool]:
        """The index expressions of `arr[node]` and whether a run-time check is still needed; a
        constant index out of range is an error here."""
        from anodize.language.ranges import ZERO, Lin

        rank = len(arr.ty.shape)
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        if len(elts) != rank:
            self.type_error(node, "local-array-index-rank", help="local-array-index-help", name=arr.name, rank=rank, s="s" if rank > 1 else "")
        index = tuple(self.as_index(self.expr(e), e) for e in elts)
        if arr.name in self.__dict__.get("_unsized", ()):
            return index, True
        for axis, (e, n) in enumerate(zip(index, arr.ty.shape, strict=True)):
            if isinstance(e, ir.Const) and not 0 <= int(e.value) < n:
                self.type_error(elts[axis], "local-array-index-constant", help="local-array-index-help", index=e.value, axis=axis, name=arr.name, length=n)
        return index, not self.index_in_range(index, [Lin(ZERO, d) for d in arr.ty.shape])

    def local_read(self, v: ast.Name, node: ast.Subscript) -> ir.Expr:
        arr = self.local_ref(v.id, v)
        index, checked = self.local_index(arr, node.slice)
        span = self.span(node)
        site = self.k.site(span, "read", f"local {v.id}") if checked else -1
        return ir.LocalArrayRead(arr, index, checked, site, arr.ty.elem, span)

    def local_store(self, target: ast.Subscript, value: ir.Expr, node: ast.AST) -> ir.Stmt:
        v = target.value
        assert isinstance(v, ast.Name)
        arr = self.local_ref(v.id, v)
        index, checked = self.local_index(arr, target.slice)
        value = self.coerce(value, arr.ty.elem, node, f"an element of `{v.id}`")
        site = self.k.site(self.span(target), "write", f"local {v.id}") if checked else -1
        return ir.LocalArrayWrite(arr, index, value, checked, site, self.span(node))

    def local_escape(self, value: ir.Expr, node: ast.AST, returned: bool = False) -> None:
        """A local array where a binding to another name or a return needs one value."""
        if not isinstance(value, ir.LocalArrayRef):
            return
        if returned:
            self.type_error(node, "local-array-return", help="local-array-return-help", name=value.name)
        self.type_error(node, "local-array-bind", help="local-array-escape-help", name=value.name)

    # ---- tuples --------------------------------------------------------------------------
    def resolve_tuple_type(self, node: ast.Subscript) -> TupleTy:
        """`tuple[f32, i32]` (also `typing.Tuple[...]`): a tuple of scalars."""
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        out: list[ScalarTy] = []
        for e in elts:
            if isinstance(e, ast.Constant) and e.value is Ellipsis:
                self.type_error(node, "tuple-annotation", expr=ast.unparse(node))
            t = self.resolve_type(e, "a tuple element")
            if not isinstance(t, ScalarTy):
                self.type_error(e, "tuple-element-scalar", help="tuple-scalars-help", ty=t)
            out.append(t)
        return TupleTy(tuple(out))

    def tuple_value(self, node: ast.Tuple) -> ir.MakeTuple:
        """`a, b` as a value: every element a scalar (a 1-D witness reads as its int)."""
        values: list[ir.Expr] = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                self.unsupported(e, "argument-unpacking")
            v = self.expr(e)
            if isinstance(v, ir.LocalArrayRef):
                self.unsupported(e, "local-array-in-tuple", help="local-array-escape-help", name=v.name)
            if not isinstance(v.ty, ScalarTy):
                self.type_error(e, "tuple-element-scalar", help="tuple-scalars-help", ty=v.ty)
            values.append(v)
        return ir.MakeTuple(tuple(values), TupleTy(tuple(v.ty for v in values)), self.span(node))  # type: ignore[misc]

    def tuple_return(self, node: ast.Return, value: ir.Expr | None = None) -> list[ir.Stmt]:
        """`return a, b` (or `return f(x)` of a tuple-returning helper) in a helper."""
        assert node.value is not None
        if value is None:
            value = self.tuple_value(node.value) if isinstance(node.value, ast.Tuple) else self.expr(node.value)
        self.local_escape(value, node.value, returned=True)
        if self.ret is None:
            if not isinstance(value.ty, TupleTy):
                self.type_error(node.value, "helper-return", ty=value.ty)
            self.ret = value.ty
            return [ir.Return(value, self.span(node))]
        if not isinstance(self.ret, TupleTy) or not isinstance(value.ty, TupleTy):
            self.type_error(node.value, "tuple-return-kind", ret=self.ret, ty=value.ty)
        if len(value.ty.elems) != len(self.ret.elems):
            self.type_error(node.value, "tuple-return-count", n=len(self.ret.elems), got=len(value.ty.elems))
        if not isinstance(value, ir.MakeTuple) and value.ty != self.ret:
            self.type_error(node.value, "tuple-return-kind", ret=self.ret, ty=value.ty)
        return [ir.Return(self.tuple_to(value, self.ret, node.value, "the return value"), self.span(node))]

    def tuple_to(self, value: ir.Expr, want: TupleTy, node: ast.AST, what: str) -> ir.Expr:
        """A tuple value converted element-wise to `want` (the implicit conversions of `coerce`).
        A display converts here; a call's tuple is checked here and converted element by element
        where it is unpacked (`Unpack`), so its value keeps the helper's type."""
        if value.ty == want:
            return value
        if isinstance(value, ir.MakeTuple):
            elts = tuple(self.coerce(v, t, node, f"{what} (element {k})") for k, (v, t) in enumerate(zip(value.values, want.elems, strict=True)))
            return ir.MakeTuple(elts, want, value.span)
        assert isinstance(value.ty, TupleTy)
        for k, (got, t) in enumerate(zip(value.ty.elems, want.elems, strict=True)):
            if got != t and not implicitly_converts(got, t):
                self.type_error(node, "store-into-type-without", help="convert-explicitly", got=got, what=f"{what} (element {k})", want=t)
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
                self.unsupported(t, "unpack-target", help="unpack-names-help", target=ast.unparse(t))
            names.append(t.id)
        value: ir.Expr = self.tuple_value(value_node) if isinstance(value_node, ast.Tuple) else self.expr(value_node)
        self.local_escape(value, value_node)
        if not isinstance(value.ty, TupleTy):
            self.type_error(value_node, "unpack-not-tuple", ty=value.ty)
        if len(value.ty.elems) != len(names):
            self.type_error(node, "unpack-count", got=len(value.ty.elems), n=len(names))
        # the type each name takes: its existing type, else the element's (as `x = v` would)
        want: list[ScalarTy] = []
        for name, t, tnode in zip(names, value.ty.elems, target.elts, strict=True):
            if name in self.arrays:
                self.unsupported(tnode, "local-array-rebind", help="local-array-escape-help", name=name)
            old = self.vars.get(name)
            if old is None or name in self.slices or name in self.shared:
                self.declare(name, t, tnode)
                old = self.vars[name]
            if not isinstance(old, ScalarTy):
                self.type_error(tnode, "expected-found", want=old, what=f"`{name}`", got=t)
            want.append(old)
        value = self.tuple_to(value, TupleTy(tuple(want)), value_node, "the unpacked value")
        for name in names:  # no facts survive: `a, b = b, a` relates the old values, not the new
            self.facts = {f for f in self.facts if f[0] != name}
        self.kill_facts(set(names))
        return [ir.Unpack(tuple(names), value, self.span(node))]


    def unpack_into_elements(self, target: ast.Tuple, value_node: ast.expr, node: ast.AST) -> list[ir.Stmt]:
        for t in target.elts:
            if not isinstance(t, (ast.Name, ast.Subscript)):
                self.unsupported(t, "unpack-target", help="unpack-names-help", target=ast.unparse(t))
        value: ir.Expr = self.tuple_value(value_node) if isinstance(value_node, ast.Tuple) else self.expr(value_node)
        self.local_escape(value, value_node)
        if not isinstance(value.ty, TupleTy):
            self.type_error(value_node, "unpack-not-tuple", ty=value.ty)
        if len(value.ty.elems) != len(target.elts):
            self.type_error(node, "unpack-count", got=len(value.ty.elems), n=len(target.elts))
        n = self.__dict__.get("_unpack_temps", 0)
        self.__dict__["_unpack_temps"] = n + len(target.elts)
        temps = [f"{RESERVED_PREFIX}unpack{n + k}" for k in range(len(target.elts))]
        for t, ty in zip(temps, value.ty.elems, strict=True):
            self.vars[t] = ty
            self.locals[t] = ty
        out: list[ir.Stmt] = [ir.Unpack(tuple(temps), value, self.span(node))]
        for t, tnode, ty in zip(temps, target.elts, value.ty.elems, strict=True):
            tmp = ir.Local(t, ty, self.span(tnode))
            if isinstance(tnode, ast.Subscript):
                out.append(self.store(tnode, tmp, tnode))
            else:
                assert isinstance(tnode, ast.Name)
                if tnode.id in self.arrays:
                    self.unsupported(tnode, "local-array-rebind", help="local-array-escape-help", name=tnode.id)
                out.append(self.assign_value(tnode.id, tmp, tnode))
        return out

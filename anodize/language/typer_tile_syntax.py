"""How a tile kernel's statements, expressions and calls differ from SIMT code: the tile typer's
specialisations of the statement, expression and call typers (typer_stmts.py, typer_exprs.py,
typer_calls.py), which typer_tiles.py's `TileFnTyper` uses in their place.

Element-wise operations reuse the scalar typer: each tile operand is replaced by a placeholder
scalar local of its element type (`TileExprTyper.bind`), the scalar rule types the expression
(promotion, weak literals, half rounding exactly as in scalar code), and the result is a
`TileElem` whose template is that scalar expression (`TileExprTyper.lift`).

The SIMT-only constructs (witnesses, raw ids, shared memory, barriers, warp operations,
atomics, `print`, `unsafe`) are refused here: the compiler owns a tile kernel's threads.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from anodize.language import ir
from anodize.language.intrinsics import WRITE_UNCHECKED, method
from anodize.language.tile_ir import TileElem, TileIdPart, TileTrans, TileTy, TileWitnessTy, is_tile
from anodize.language.tile_vocab import PROGRAM_ID_PARTS
from anodize.language.typer_calls import CallTyper
from anodize.language.typer_exprs import ExprTyper
from anodize.language.typer_stmts import StmtTyper
from anodize.language.types import I64, ScalarTy

if TYPE_CHECKING:
    from anodize.language.typer_tiles import TileFnTyper

__all__ = ["SIMT_KINDS", "TileExprTyper", "TileCallTyper", "TileStmtTyper"]

# intrinsic kinds (symbol tags) that belong to the SIMT model only
SIMT_KINDS = frozenset({"witness", "raw", "warp", "barrier", "fence", "shared_array", "collective", "block_witness",
                        "block_leader", "print", "unsafe", "local_witness", "thread_tile"})


class TileExprTyper(ExprTyper):
    """Expressions of a tile kernel: tile values (`.T`, `x[:, None]`), and every scalar rule
    lifted element-wise over tile operands."""

    fn: TileFnTyper

    def __init__(self, fn: TileFnTyper):
        super().__init__(fn)
        self._ph: dict[int, ir.Expr] = {}  # id(ast node) -> its value already typed (placeholders)
        self._fresh = 0

    # ---- placeholders: a tile operand seen by a scalar rule as a scalar local ------------------
    def expr(self, node: ast.expr) -> ir.Expr:
        hit = self._ph.get(id(node))
        if hit is not None:
            return hit
        return super().expr(node)

    @contextlib.contextmanager
    def bind(self, nodes: list[ast.expr], values: list[ir.Expr]) -> Iterator[None]:
        """While open, `expr` of each of `nodes` is its value given here (already typed)."""
        saved = {id(n): self._ph.get(id(n)) for n in nodes}
        for n, v in zip(nodes, values, strict=True):
            self._ph[id(n)] = v
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    self._ph.pop(k, None)
                else:
                    self._ph[k] = v

    def placeholder(self, ty: ScalarTy, span: Any) -> ir.Local:
        self._fresh += 1
        return ir.Local(f"__az_e{self._fresh}", ty, span)

    def broadcast(self, shapes: list[tuple[int, ...]], node: ast.AST) -> tuple[int, ...]:
        out: tuple[int, ...] = shapes[0]
        for s in shapes[1:]:
            a, b = out, s
            n = max(len(a), len(b))
            pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
            dims = []
            for x, y in zip(pa, pb, strict=True):
                if x != y and 1 not in (x, y):
                    self.st.type_error(node, "tile-broadcast", a=a, b=b)
                dims.append(max(x, y))
            out = tuple(dims)
        return out

    def lift(self, node: ast.AST, children: list[ast.expr], base: Callable[[], ir.Expr], values: list[ir.Expr] | None = None) -> ir.Expr:
        """`base()` (a scalar typing rule reading `children` through `self.expr`), element-wise
        over whichever children are tiles."""
        vals = values if values is not None else [self.expr(c) for c in children]
        for v, c in zip(vals, children, strict=True):
            if isinstance(v.ty, TileWitnessTy):
                self.st.type_error(c, "tile-witness-value")
        tiles = [v for v in vals if is_tile(v)]
        if not tiles:
            with self.bind(children, vals):
                return base()
        shape = self.broadcast([v.ty.shape for v in tiles], node)  # type: ignore[union-attr]
        phs: list[ir.Expr] = []
        inputs: list[tuple[str, ir.Expr]] = []
        for v in vals:
            if is_tile(v):
                ph = self.placeholder(v.ty.elem, v.span)  # type: ignore[union-attr]
                inputs.append((ph.name, v))
                phs.append(ph)
            else:
                phs.append(v)
        with self.bind(children, phs):
            t = base()
        if not isinstance(t.ty, ScalarTy):
            self.st.type_error(node, "tile-value-here")
        return TileElem(t, tuple(inputs), TileTy(t.ty, shape), self.st.span(node))

    # ---- values of the kernel (not module paths) --------------------------------------------
    def is_value(self, node: ast.expr) -> bool:
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            return root.id in self.st.vars or root.id in self.st.slices or id(root) in self._ph or id(node) in self._ph
        return True

    # ---- expressions ----------------------------------------------------------------------
    def binop(self, op: str, a: ir.Expr, b: ir.Expr, node: ast.AST) -> ir.Expr:
        if not (is_tile(a) or is_tile(b)):
            return super().binop(op, a, b, node)
        la, lb = ast.Name(id="__az_l"), ast.Name(id="__az_r")
        return self.lift(node, [la, lb], lambda: super(TileExprTyper, self).binop(op, self.expr(la), self.expr(lb), node), [a, b])

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ir.Expr:
        return self.lift(node, [node.operand], lambda: super(TileExprTyper, self).visit_UnaryOp(node))

    def visit_Compare(self, node: ast.Compare) -> ir.Expr:
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            return super().visit_Compare(node)
        return self.lift(node, [node.left, *node.comparators], lambda: super(TileExprTyper, self).visit_Compare(node))

    def visit_BoolOp(self, node: ast.BoolOp) -> ir.Expr:
        return self.lift(node, list(node.values), lambda: super(TileExprTyper, self).visit_BoolOp(node))

    def visit_IfExp(self, node: ast.IfExp) -> ir.Expr:
        return self.lift(node, [node.test, node.body, node.orelse], lambda: super(TileExprTyper, self).visit_IfExp(node))

    def of_slice(self, node: ast.expr) -> bool:
        """Is `node` a slice parameter or an attribute of one (`a.shape`: the SIMT rules)?"""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.st.slices

    def visit_Subscript(self, node: ast.Subscript) -> ir.Expr:
        if self.is_value(node.value) and not self.of_slice(node.value):
            base = self.expr(node.value)
            if is_tile(base):
                return self.fn.tiles.new_axes(base, node)
            if isinstance(base.ty, TileWitnessTy):
                self.st.unsupported(node, "tile-subscript")
        return super().visit_Subscript(node)

    def visit_Attribute(self, node: ast.Attribute) -> ir.Expr:
        if self.is_value(node.value) and not self.of_slice(node.value):
            base = self.expr(node.value)
            if isinstance(base.ty, TileWitnessTy):
                parts = PROGRAM_ID_PARTS[base.ty.rank]
                if node.attr in parts:
                    return TileIdPart(base.ty.rank, parts.index(node.attr), I64, self.st.span(node))
                self.st.type_error(node, "no-attribute", ty=base.ty, attr=node.attr)
            if is_tile(base):
                if node.attr == "T":
                    if base.ty.rank != 2:  # type: ignore[union-attr]
                        self.st.type_error(node, "tile-transpose-rank", rank=base.ty.rank)  # type: ignore[union-attr]
                    shape = base.ty.shape[::-1]  # type: ignore[union-attr]
                    return TileTrans(base, TileTy(base.ty.elem, shape), self.st.span(node))  # type: ignore[union-attr]
                self.st.type_error(node, "tile-no-attribute", attr=node.attr)
        return super().visit_Attribute(node)

    def store(self, target: ast.Subscript, value: ir.Expr, node: ast.AST) -> ir.Stmt:
        if self.is_value(target.value) and isinstance(target.value, ast.Name) and target.value.id in self.st.vars:
            self.st.unsupported(target, "tile-subscript")
        return super().store(target, value, node)


class TileCallTyper(CallTyper):
    """Calls of a tile kernel: the tile vocabulary (`tile.*`, typer_tiles.py), a tile's methods
    (`.reshape`, `.astype`), math lifted over tiles, and helpers with no SIMT construct."""

    fn: TileFnTyper

    def visit_Call(self, node: ast.Call) -> ir.Expr:
        f = node.func
        if isinstance(f, ast.Attribute) and self.fn.exprs.is_value(f.value) and not (isinstance(f.value, ast.Name) and f.value.id in self.st.slices):
            base = self.fn.expr(f.value)
            if isinstance(base.ty, TileWitnessTy):
                decl = method("tile_id", f.attr)  # `pid.get()`: a 1-D program id's index
                if decl is not None and base.ty.rank == 1 and decl.takes(len(node.args)) and not node.keywords:
                    return TileIdPart(1, 0, I64, self.st.span(node))
                self.st.type_error(node, "no-method-local", ty=base.ty, attr=f.attr)
            if is_tile(base):
                decl = method("tile", f.attr)  # `.reshape(shape)`, `.astype(T)`
                if decl is None:
                    self.st.type_error(node, "tile-no-attribute", attr=f.attr)
                if not decl.takes(len(node.args)) or node.keywords:
                    n = decl.exact_arity
                    self.st.type_error(node, "arity", name=f.attr, n=n, s="s" if n != 1 else "", got=len(node.args))
                if decl.tag[1] == "reshape":
                    return self.fn.tiles.reshape(base, node.args[0])
                ty = self.fn.names.resolve_type(node.args[0], "the tile's element type")
                if not isinstance(ty, ScalarTy):
                    self.st.type_error(node.args[0], "not-kernel-type", expr=ast.unparse(node.args[0]))
                x = ast.Name(id="__az_x")
                return self.fn.exprs.lift(node, [x], lambda: self.fn.exprs.cast(self.fn.expr(x), ty), [base])
        tag = self.fn.names.tag(f) if isinstance(f, (ast.Name, ast.Attribute)) else None
        if tag is not None:
            if tag[0] == "tile":
                return self.fn.tiles.tile_call(tag[1], node)
            if tag[0] in SIMT_KINDS:
                self.st.unsupported(node, "tile-simt", name=ast.unparse(f))
            if tag[0] in ("math", "builtin", "scalar") and not (tag[0] == "builtin" and tag[1] in ("len", "range")):
                return self.fn.exprs.lift(node, list(node.args), lambda: super(TileCallTyper, self).visit_Call(node))
        return super().visit_Call(node)

    def helper_call(self, helper: Any, node: ast.Call) -> ir.Expr:
        """A scalar `@az.func` helper: it may read inputs and compute, but nothing that depends on
        how many threads run a program (SIMT ids, shared memory, barriers, warp operations, writes,
        `print`), since every thread of a program runs it on the GPU and one thread on the CPU."""
        bad = self.simt_in(helper.fn, set())
        if bad is not None:
            self.st.unsupported(node, "tile-simt", name=f"{ast.unparse(node.func)} (which uses `{bad}`)")
        for a in node.args:
            if isinstance(a, ast.Name) and a.id in self.st.slices and self.st.slices[a.id].kind.output:
                self.st.unsupported(a, "tile-simt", name=f"passing the output `{a.id}` to a helper")
        return super().helper_call(helper, node)

    def simt_in(self, fdef: ast.FunctionDef | None, seen: set[int]) -> str | None:
        """The first SIMT-only construct a helper (or a helper it calls) uses, else None."""
        if fdef is None or id(fdef) in seen:
            return None
        seen.add(id(fdef))
        for n in ast.walk(fdef):
            if isinstance(n, ast.With):
                return "with"
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if any(isinstance(t, ast.Subscript) for t in targets):
                    return "an element write"
            if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute)):
                if isinstance(n.func, ast.Attribute) and method("slice", n.func.attr) is WRITE_UNCHECKED:
                    return "write_unchecked"
                sym = self.st.symbols.resolve(n.func)
                if sym.kind == "intrinsic" and sym.tag and sym.tag[0] in SIMT_KINDS | {"tile"}:
                    return ast.unparse(n.func)
                if sym.kind == "function" and sym.fn_kind == "func":
                    inner = self.simt_in(sym.fn, seen)
                    if inner is not None:
                        return inner
        return None


class TileStmtTyper(StmtTyper):
    """Statements of a tile kernel: `tile.store`, and no SIMT statement."""

    fn: TileFnTyper

    # ---- statements -------------------------------------------------------------------------
    def statement_call(self, call: ast.Call) -> list[ir.Stmt] | None:
        tag = self.fn.names.tag(call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
        if tag == ("tile", "store"):
            return [self.fn.tiles.tile_store(call)]
        if tag is not None and tag[0] in SIMT_KINDS:
            self.st.unsupported(call, "tile-simt", name=ast.unparse(call.func))
        if isinstance(call.func, ast.Attribute) and method("slice", call.func.attr) is WRITE_UNCHECKED:
            self.st.unsupported(call, "tile-simt", name="write_unchecked")
        return super().statement_call(call)

    def visit_With(self, node: ast.With) -> list[ir.Stmt]:
        self.st.unsupported(node, "tile-simt", name="with az.unsafe()")

    def shared_decl(self, name: str, call: ast.Call) -> list[ir.Stmt]:
        # `b = az.shared.array(...)` (also dynamic and atomic ones) is a declaration statement, typed
        # before any call is: refused here like the other SIMT constructs (each of the program's
        # threads would hold its own slots and atomics' results, which the one-program model
        # does not have)
        self.st.unsupported(call, "tile-simt", name=ast.unparse(call.func))

    def visit_For(self, node: ast.For) -> list[ir.Stmt]:
        it = node.iter
        tag = self.fn.names.tag(it.func) if isinstance(it, ast.Call) and isinstance(it.func, (ast.Name, ast.Attribute)) else None
        if tag is not None and tag[0] == "witness":
            self.st.unsupported(it, "tile-simt", name=ast.unparse(it.func))  # type: ignore[attr-defined]
        return super().visit_For(node)

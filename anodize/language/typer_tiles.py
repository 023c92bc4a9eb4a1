"""Typing of tile kernels (`@az.tile_kernel`): the Tile model's front end.

`TileCompiler` is the typer's function compiler with the tile vocabulary added (`az.tile`,
tile values, `.T`, `.astype`, element-wise arithmetic and math on tiles) and the SIMT-only
constructs taken away (witnesses, raw ids, shared memory, barriers, warp operations,
atomics, `print`, `unsafe`): the compiler owns a tile kernel's threads.

Element-wise operations reuse the scalar typer: each tile operand is replaced by a
placeholder scalar local of its element type (`_bind`), the scalar rule types the
expression (promotion, weak literals, half rounding exactly as in scalar code), and the
result is a `TileElem` whose template is that scalar expression.

Ownership (partition ownership, `az-disjoint-index`): `tile.store(dst, pid, value)` takes the
program's id, which only `tile.program_id_1d/2d()` makes; a load from an output must be at
the program's own tile; and every store and load of one output uses one tile shape.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from anodize.language import ir, messages
from anodize.language.tile_ir import (
    TileArange,
    TileElem,
    TileFull,
    TileId,
    TileIdPart,
    TileLoad,
    TileMatmul,
    TileReduce,
    TileReshape,
    TileStore,
    TileTrans,
    TileTy,
    TileWitnessTy,
    is_tile,
)
from anodize.language.tile_vocab import (
    DEFAULT_NUM_WARPS,
    MATMUL_INPUTS,
    NUM_WARPS_CHOICES,
    PROGRAM_ID_PARTS,
    PROGRAM_IDS,
    TILE_FUNCS,
    TILE_KEYWORDS,
    TILE_MAX_ELEMS,
    TILE_MAX_RANK,
)
from anodize.language.typer import _FnCompiler
from anodize.language.typer_base import _BINOPS
from anodize.language.types import BOOL, F32, I32, I64, ScalarTy, SliceTy, implicitly_converts

__all__ = ["TileCompiler", "num_warps", "check_tile_params"]

# intrinsic kinds (symbol tags) that belong to the SIMT model only
_SIMT_KINDS = {"witness", "raw", "warp", "barrier", "fence", "shared_array", "collective", "block_witness",
               "block_leader", "print", "unsafe", "local_witness", "thread_tile"}


def num_warps(front: Any, fdef: ast.FunctionDef) -> tuple[int, list[Any]]:
    """The `num_warps=` of a tile kernel's decorator (default 4), and diagnostics."""
    deco = front.symbols.tile_decorator(fdef)
    if not isinstance(deco, ast.Call):
        return DEFAULT_NUM_WARPS, []
    diags = []
    n = DEFAULT_NUM_WARPS
    for a in deco.args:
        diags.append(messages.type_error(front.src.span(a), "tile-decorator-args"))
    for kw in deco.keywords:
        if kw.arg != "num_warps":
            diags.append(messages.type_error(front.src.span(kw.value), "tile-decorator-args"))
            continue
        v = front.symbols.constant(kw.value)
        if v is None or type(v[0]) is not int or v[0] not in NUM_WARPS_CHOICES:
            diags.append(messages.type_error(front.src.span(kw.value), "tile-num-warps", choices=NUM_WARPS_CHOICES))
        else:
            n = v[0]
    return n, diags


def check_tile_params(front: Any, fdef: ast.FunctionDef, ptypes: dict[str, Any]) -> list[Any]:
    """A tile kernel's slices are 1-D, 2-D or 3-D, and none is atomic."""
    out = []
    for p in fdef.args.args:
        ty = ptypes.get(p.arg)
        if isinstance(ty, SliceTy) and (ty.kind.atomic or ty.rank > TILE_MAX_RANK):
            out.append(messages.unsupported(front.src.span(p), "tile-simt", name=ty.kind.name))
    return out


class TileCompiler(_FnCompiler):
    """The function compiler of a tile kernel's body."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._ph: dict[int, ir.Expr] = {}  # id(ast node) -> its value already typed (placeholders)
        self._fresh = 0
        self._shapes: dict[str, tuple[tuple[int, ...], int]] = {}  # output -> (tile shape, line)

    # ---- placeholders -------------------------------------------------------------------
    def expr(self, node: ast.expr) -> ir.Expr:
        hit = self._ph.get(id(node))
        if hit is not None:
            return hit
        return super().expr(node)

    @contextlib.contextmanager
    def _bind(self, nodes: list[ast.expr], values: list[ir.Expr]) -> Iterator[None]:
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
                    self.type_error(node, "tile-broadcast", a=a, b=b)
                dims.append(max(x, y))
            out = tuple(dims)
        return out

    def lift(self, node: ast.AST, children: list[ast.expr], base: Callable[[], ir.Expr], values: list[ir.Expr] | None = None) -> ir.Expr:
        """`base()` (a scalar typing rule reading `children` through `self.expr`), element-wise
        over whichever children are tiles."""
        vals = values if values is not None else [self.expr(c) for c in children]
        for v, c in zip(vals, children, strict=True):
            if isinstance(v.ty, TileWitnessTy):
                self.type_error(c, "tile-witness-value")
        tiles = [v for v in vals if is_tile(v)]
        if not tiles:
            with self._bind(children, vals):
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
        with self._bind(children, phs):
            t = base()
        if not isinstance(t.ty, ScalarTy):
            self.type_error(node, "tile-value-here")
        return TileElem(t, tuple(inputs), TileTy(t.ty, shape), self.span(node))

    # ---- values of the kernel (not module paths) --------------------------------------------
    def _is_value(self, node: ast.expr) -> bool:
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            return root.id in self.vars or root.id in self.slices or id(root) in self._ph or id(node) in self._ph
        return True

    # ---- expressions ----------------------------------------------------------------------
    def binop(self, op: str, a: ir.Expr, b: ir.Expr, node: ast.AST) -> ir.Expr:
        if not (is_tile(a) or is_tile(b)):
            return super().binop(op, a, b, node)
        la, lb = ast.Name(id="__az_l"), ast.Name(id="__az_r")
        return self.lift(node, [la, lb], lambda: super(TileCompiler, self).binop(op, self.expr(la), self.expr(lb), node), [a, b])

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ir.Expr:
        return self.lift(node, [node.operand], lambda: super(TileCompiler, self).visit_UnaryOp(node))

    def visit_Compare(self, node: ast.Compare) -> ir.Expr:
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            return super().visit_Compare(node)
        return self.lift(node, [node.left, *node.comparators], lambda: super(TileCompiler, self).visit_Compare(node))

    def visit_BoolOp(self, node: ast.BoolOp) -> ir.Expr:
        return self.lift(node, list(node.values), lambda: super(TileCompiler, self).visit_BoolOp(node))

    def visit_IfExp(self, node: ast.IfExp) -> ir.Expr:
        return self.lift(node, [node.test, node.body, node.orelse], lambda: super(TileCompiler, self).visit_IfExp(node))

    def _of_slice(self, node: ast.expr) -> bool:
        """Is `node` a slice parameter or an attribute of one (`a.shape`: the SIMT rules)?"""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.slices

    def visit_Subscript(self, node: ast.Subscript) -> ir.Expr:
        if self._is_value(node.value) and not self._of_slice(node.value):
            base = self.expr(node.value)
            if is_tile(base):
                return self.new_axes(base, node)
            if isinstance(base.ty, TileWitnessTy):
                self.unsupported(node, "tile-subscript")
        return super().visit_Subscript(node)

    def new_axes(self, base: ir.Expr, node: ast.Subscript) -> ir.Expr:
        """`x[:, None]`, `x[None, :]`, `x[None]`: `x` with axes of extent 1 inserted where the
        index says `None` (every other item a bare `:`, one per axis of `x`, trailing ones
        optional, as in NumPy)."""
        items = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        shape = base.ty.shape  # type: ignore[union-attr]
        out: list[int] = []
        axis = 0
        for it in items:
            if isinstance(it, ast.Constant) and it.value is None:
                out.append(1)
            elif isinstance(it, ast.Slice) and it.lower is None and it.upper is None and it.step is None and axis < len(shape):
                out.append(shape[axis])
                axis += 1
            else:
                self.unsupported(node, "tile-index", expr=ast.unparse(node))
        out += shape[axis:]
        return self.reshaped(base, tuple(out), node)

    def reshaped(self, base: ir.Expr, shape: tuple[int, ...], node: ast.AST) -> ir.Expr:
        """`base` as a tile of `shape` (its elements in row-major order; `base` itself when the
        shape is the same)."""
        bty: TileTy = base.ty  # type: ignore[assignment]
        if len(shape) > TILE_MAX_RANK:
            self.type_error(node, "tile-reshape-rank", most=TILE_MAX_RANK, rank=len(shape))
        if shape == bty.shape:
            return base
        return TileReshape(base, TileTy(bty.elem, shape), self.span(node))

    def visit_Attribute(self, node: ast.Attribute) -> ir.Expr:
        if self._is_value(node.value) and not self._of_slice(node.value):
            base = self.expr(node.value)
            if isinstance(base.ty, TileWitnessTy):
                parts = PROGRAM_ID_PARTS[base.ty.rank]
                if node.attr in parts:
                    return TileIdPart(base.ty.rank, parts.index(node.attr), I64, self.span(node))
                self.type_error(node, "no-attribute", ty=base.ty, attr=node.attr)
            if is_tile(base):
                if node.attr == "T":
                    if base.ty.rank != 2:  # type: ignore[union-attr]
                        self.type_error(node, "tile-transpose-rank", rank=base.ty.rank)  # type: ignore[union-attr]
                    shape = base.ty.shape[::-1]  # type: ignore[union-attr]
                    return TileTrans(base, TileTy(base.ty.elem, shape), self.span(node))  # type: ignore[union-attr]
                self.type_error(node, "tile-no-attribute", attr=node.attr)
        return super().visit_Attribute(node)

    def visit_Call(self, node: ast.Call) -> ir.Expr:
        f = node.func
        if isinstance(f, ast.Attribute) and self._is_value(f.value) and not (isinstance(f.value, ast.Name) and f.value.id in self.slices):
            base = self.expr(f.value)
            if isinstance(base.ty, TileWitnessTy):
                if f.attr == "get" and base.ty.rank == 1 and not node.args and not node.keywords:
                    return TileIdPart(1, 0, I64, self.span(node))
                self.type_error(node, "no-method-local", ty=base.ty, attr=f.attr)
            if is_tile(base):
                if f.attr == "reshape":
                    if len(node.args) != 1 or node.keywords:
                        self.type_error(node, "arity", name="reshape", n=1, s="", got=len(node.args))
                    return self.reshape(base, node.args[0])
                if f.attr != "astype":
                    self.type_error(node, "tile-no-attribute", attr=f.attr)
                if len(node.args) != 1 or node.keywords:
                    self.type_error(node, "arity", name="astype", n=1, s="", got=len(node.args))
                ty = self.resolve_type(node.args[0], "the tile's element type")
                if not isinstance(ty, ScalarTy):
                    self.type_error(node.args[0], "not-kernel-type", expr=ast.unparse(node.args[0]))
                x = ast.Name(id="__az_x")
                return self.lift(node, [x], lambda: self.cast(self.expr(x), ty), [base])
        tag = self.tag(f) if isinstance(f, (ast.Name, ast.Attribute)) else None
        if tag is not None:
            if tag[0] == "tile":
                return self.tile_call(tag[1], node)
            if tag[0] in _SIMT_KINDS:
                self.unsupported(node, "tile-simt", name=ast.unparse(f))
            if tag[0] in ("math", "builtin", "scalar") and not (tag[0] == "builtin" and tag[1] in ("len", "range")):
                return self.lift(node, list(node.args), lambda: super(TileCompiler, self).visit_Call(node))
        return super().visit_Call(node)

    def helper_call(self, helper: Any, node: ast.Call) -> ir.Expr:
        """A scalar `@az.func` helper: it may read inputs and compute, but nothing that depends on
        how many threads run a program (SIMT ids, shared memory, barriers, warp operations, writes,
        `print`), since every thread of a program runs it on the GPU and one thread on the CPU."""
        bad = self._simt_in(helper.fn, set())
        if bad is not None:
            self.unsupported(node, "tile-simt", name=f"{ast.unparse(node.func)} (which uses `{bad}`)")
        for a in node.args:
            if isinstance(a, ast.Name) and a.id in self.slices and self.slices[a.id].kind.output:
                self.unsupported(a, "tile-simt", name=f"passing the output `{a.id}` to a helper")
        return super().helper_call(helper, node)

    def _simt_in(self, fdef: ast.FunctionDef | None, seen: set[int]) -> str | None:
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
                if isinstance(n.func, ast.Attribute) and n.func.attr == "write_unchecked":
                    return "write_unchecked"
                sym = self.symbols.resolve(n.func)
                if sym.kind == "intrinsic" and sym.tag and sym.tag[0] in _SIMT_KINDS | {"tile"}:
                    return ast.unparse(n.func)
                if sym.kind == "function" and sym.fn_kind == "func":
                    inner = self._simt_in(sym.fn, seen)
                    if inner is not None:
                        return inner
        return None

    # ---- statements -------------------------------------------------------------------------
    def statement_call(self, call: ast.Call) -> list[ir.Stmt] | None:
        tag = self.tag(call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
        if tag == ("tile", "store"):
            return [self.tile_store(call)]
        if tag is not None and tag[0] in _SIMT_KINDS:
            self.unsupported(call, "tile-simt", name=ast.unparse(call.func))
        if isinstance(call.func, ast.Attribute) and call.func.attr == "write_unchecked":
            self.unsupported(call, "tile-simt", name="write_unchecked")
        return super().statement_call(call)

    def visit_With(self, node: ast.With) -> list[ir.Stmt]:
        self.unsupported(node, "tile-simt", name="with az.unsafe()")

    def shared_decl(self, name: str, call: ast.Call) -> list[ir.Stmt]:
        # `b = az.shared.array(...)` (also dynamic and atomic ones) is a declaration statement, typed
        # before any call is: refused here like the other SIMT constructs (each of the program's
        # threads would hold its own slots and atomics' results, which the one-program model
        # does not have)
        self.unsupported(call, "tile-simt", name=ast.unparse(call.func))

    def visit_For(self, node: ast.For) -> list[ir.Stmt]:
        it = node.iter
        tag = self.tag(it.func) if isinstance(it, ast.Call) and isinstance(it.func, (ast.Name, ast.Attribute)) else None
        if tag is not None and tag[0] == "witness":
            self.unsupported(it, "tile-simt", name=ast.unparse(it.func))  # type: ignore[attr-defined]
        return super().visit_For(node)

    def store(self, target: ast.Subscript, value: ir.Expr, node: ast.AST) -> ir.Stmt:
        if self._is_value(target.value) and isinstance(target.value, ast.Name) and target.value.id in self.vars:
            self.unsupported(target, "tile-subscript")
        return super().store(target, value, node)

    # ---- the tile vocabulary ----------------------------------------------------------------
    def tile_call(self, name: str, node: ast.Call) -> ir.Expr:
        lo, hi = TILE_FUNCS[name]
        if not lo <= len(node.args) <= hi:
            self.type_error(node, "tile-arity", name=name, want=str(lo) if lo == hi else f"{lo} to {hi}", got=len(node.args))
        allowed = TILE_KEYWORDS.get(name, frozenset())
        kws: dict[str, ast.expr] = {}
        for kw in node.keywords:
            if kw.arg is None or kw.arg not in allowed:
                self.unsupported(kw.value if kw.arg is None else kw, "tile-keyword", kw=kw.arg or "**", name=name)
            kws[kw.arg] = kw.value  # type: ignore[index]
        span = self.span(node)
        if name in PROGRAM_IDS:
            return self.program_id(PROGRAM_IDS[name], node)
        if name == "load":
            return self.tile_load(node, kws.get("other"))
        if name == "store":
            self.unsupported(node, "statement-call-value", help="statement-call-own", call="tile.store")
        if name == "arange":
            n = self.const_int(node.args[0])
            if type(n) is not int or not 1 <= n <= TILE_MAX_ELEMS:
                self.type_error(node.args[0], "tile-arange", most=TILE_MAX_ELEMS, expr=ast.unparse(node.args[0]))
            return TileArange(TileTy(I32, (n,)), span)
        if name == "expand_dims":
            x = self.tile_arg(node.args[0], "tile.expand_dims")
            xs: tuple[int, ...] = x.ty.shape  # type: ignore[union-attr]
            a = self.axis_value(node.args[1], len(xs) + 1)
            return self.reshaped(x, xs[:a] + (1,) + xs[a:], node)
        if name in ("zeros", "full"):
            shape = self.tile_shape(node.args[0])
            ty = self.resolve_type(node.args[-1], "the tile's element type")
            if not isinstance(ty, ScalarTy):
                self.type_error(node.args[-1], "not-kernel-type", expr=ast.unparse(node.args[-1]))
            v: ir.Expr = ir.Const(0, ty, span) if name == "zeros" else self.coerce(self.numeric(self.expr(node.args[1]), node.args[1]), ty, node.args[1], "the tile's value")
            return TileFull(v, TileTy(ty, shape), span)
        if name in ("sum", "max", "min"):
            return self.tile_reduce(name, node, kws.get("axis"), kws.get("keepdims"))
        if name == "where":
            c, x, y = node.args
            syn = ast.copy_location(ast.IfExp(test=c, body=x, orelse=y), node)
            return self.lift(node, [c, x, y], lambda: super(TileCompiler, self).visit_IfExp(syn))
        assert name == "matmul"
        return self.tile_matmul(node, kws.get("allow_tf32"))

    def program_id(self, rank: int, node: ast.Call) -> ir.Expr:
        c = self.k.contract
        if c is not None and c.domain != rank:
            maker = f"tile.program_id_{rank}d()"
            self.fail(messages.index_domain(self.span(node), maker, rank, c.domain, None))
        first = getattr(self.k, "tile_id_site", None)
        if first is not None and first[0] != rank:  # 1-D and 2-D ids in one kernel: one could own nothing
            self.fail(messages.index_domain_mixed(self.span(node), first[1]))
        if first is None:
            self.k.tile_id_site = (rank, self.span(node))  # type: ignore[attr-defined]
        self.k.ranks.add(rank)
        return TileId(rank, TileWitnessTy(rank), self.span(node))

    def tile_shape(self, node: ast.expr, least: int = 1) -> tuple[int, ...]:
        """A compile-time shape of 1 to 3 axes (`least` 0: `()` too, for `.reshape`)."""
        parts = node.elts if isinstance(node, ast.Tuple) else [node]
        vals = [self.const_int(p) for p in parts]
        v = tuple(vals) if isinstance(node, ast.Tuple) else vals[0]
        dims = (v,) if isinstance(v, int) and not isinstance(v, bool) else v
        if (
            not isinstance(dims, tuple)
            or not least <= len(dims) <= TILE_MAX_RANK
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims)
        ):
            self.type_error(node, "tile-shape", expr=ast.unparse(node))
        n = 1
        for d in dims:
            n *= d
        if n > TILE_MAX_ELEMS:
            self.type_error(node, "tile-too-big", shape=dims, n=n, limit=TILE_MAX_ELEMS)
        return dims  # type: ignore[return-value]

    def const_int(self, node: ast.expr) -> Any:
        """A compile-time int: a literal, a module constant, an `az.Constant` parameter, or
        arithmetic over literals and module constants; None otherwise."""
        try:
            return self.const_value(node)
        except Exception:  # noqa: BLE001 - not one of the simple forms: try the module's folding
            pass
        c = self.symbols.constant(node)
        return c[0] if c is not None else None

    def tile_arg(self, node: ast.expr, what: str) -> ir.Expr:
        e = self.expr(node)
        if not is_tile(e):
            self.type_error(node, "tile-needs-tile", what=what, ty=e.ty)
        return e

    def slice_arg(self, node: ast.expr, name: str) -> tuple[str, SliceTy]:
        if not (isinstance(node, ast.Name) and node.id in self.slices) or self.slices[node.id].rank > TILE_MAX_RANK:
            self.type_error(node, "tile-src", name=name, expr=ast.unparse(node))
        return node.id, self.slices[node.id]  # type: ignore[union-attr]

    def note_shape(self, name: str, shape: tuple[int, ...], node: ast.AST) -> None:
        """One tile shape per output (over every store and load of it in the kernel)."""
        line = self.span(node).line
        first = self._shapes.setdefault(name, (shape, line))
        if first[0] != shape:
            self.fail(messages.tile_ownership(self.span(node), "tile-shape-mixed", help="tile-one-shape",
                                              name=name, shape=shape, first=first[0], line=first[1]))

    def own_offset(self, pid: ir.Expr, shape: tuple[int, ...], span: Any) -> tuple[ir.Expr, ...]:
        rank = pid.ty.rank  # type: ignore[union-attr]
        return tuple(ir.BinOp("*", TileIdPart(rank, a, I64, span), ir.Const(shape[a], I64, span), I64, span) for a in range(rank))

    def tile_load(self, node: ast.Call, other_node: ast.expr | None) -> ir.Expr:
        src, off_node, shape_node = node.args
        name, sty = self.slice_arg(src, "load")
        shape = self.tile_shape(shape_node)
        span = self.span(node)
        if len(shape) != sty.rank:
            self.type_error(shape_node, "tile-rank", name=name, rank=sty.rank, trank=len(shape))
        off = self.expr(off_node) if not isinstance(off_node, ast.Tuple) else None
        own = off is not None and isinstance(off.ty, TileWitnessTy)
        if sty.kind.disjoint:
            if not own:
                self.fail(messages.tile_ownership(self.span(off_node), "tile-load-foreign", help="tile-store-own",
                                                  name=name, index=ast.unparse(off_node), rank=sty.rank))
            self.note_shape(name, shape, node)
        if own:
            assert off is not None
            if off.ty.rank != sty.rank:  # type: ignore[union-attr]
                self.type_error(off_node, "tile-rank", name=name, rank=sty.rank, trank=off.ty.rank)  # type: ignore[union-attr]
            offset = self.own_offset(off, shape, span)
        else:
            parts = list(off_node.elts) if isinstance(off_node, ast.Tuple) else [off_node]
            if len(parts) != sty.rank:
                self.type_error(off_node, "tile-offset", expr=ast.unparse(off_node))
            offset = tuple(self.offset_part(p) for p in parts)
        elem = sty.elem
        if other_node is None:
            other: ir.Expr = ir.Const(0, elem, span)
        else:
            other = self.coerce(self.numeric(self.expr(other_node), other_node), elem, other_node, "`other=`")
        return TileLoad(ir.SliceRef(name, sty, self.span(src)), offset, other, own, TileTy(elem, shape), span)

    def offset_part(self, node: ast.expr) -> ir.Expr:
        e = self.expr(node)
        if not isinstance(e.ty, ScalarTy) or not (e.ty.is_int or e.ty.is_bool):
            self.type_error(node, "tile-offset", expr=ast.unparse(node))
        return self.cast(e, I64)

    def reshape(self, base: ir.Expr, shape_node: ast.expr) -> ir.Expr:
        """`x.reshape(shape)`: one axis may be -1 (what the others leave, as in NumPy)."""
        bty: TileTy = base.ty  # type: ignore[assignment]
        parts = shape_node.elts if isinstance(shape_node, ast.Tuple) else [shape_node]
        vals = [self.const_int(p) for p in parts]
        free = [i for i, v in enumerate(vals) if v == -1 and type(v) is int]
        if len(free) == 1:
            rest = 1
            for i, v in enumerate(vals):
                if i != free[0] and type(v) is int and v > 0:
                    rest *= v
            vals[free[0]] = bty.size // rest if rest and bty.size % rest == 0 else 0
        if isinstance(shape_node, ast.Tuple):
            if not all(type(v) is int and v >= 1 for v in vals) or len(vals) > TILE_MAX_RANK:
                self.type_error(shape_node, "tile-shape", expr=ast.unparse(shape_node))
            shape = tuple(vals)
        else:
            shape = self.tile_shape(shape_node) if not free else (vals[0],)
            if not all(type(v) is int and v >= 1 for v in shape):
                self.type_error(shape_node, "tile-shape", expr=ast.unparse(shape_node))
        n = 1
        for d in shape:
            n *= d
        if n != bty.size:
            self.type_error(shape_node, "tile-reshape-size", shape=bty.shape, n=bty.size, want=shape)
        return self.reshaped(base, shape, shape_node)

    def axis_value(self, node: ast.expr, rank: int) -> int:
        """A compile-time axis of a `rank`-D tile (negative counts from the end)."""
        v = self.symbols.constant(node) if not isinstance(node, ast.Constant) else (node.value, None)
        if v is None or type(v[0]) is not int:
            self.type_error(node, "tile-axis-literal")
        a = int(v[0])  # type: ignore[index]
        if not -rank <= a < rank:
            self.type_error(node, "tile-axis", axis=a, rank=rank)
        return a % rank

    def tile_store(self, call: ast.Call) -> ir.Stmt:
        if len(call.args) != 3:
            self.type_error(call, "tile-arity", name="store", want="3", got=len(call.args))
        if call.keywords:
            self.unsupported(call.keywords[0], "tile-keyword", kw=call.keywords[0].arg or "**", name="store")
        dst, pid_node, val_node = call.args
        if not (isinstance(dst, ast.Name) and dst.id in self.slices and self.slices[dst.id].kind.disjoint
                and self.slices[dst.id].rank <= TILE_MAX_RANK):
            self.type_error(dst, "tile-store-dst", expr=ast.unparse(dst))
        name = dst.id  # type: ignore[union-attr]
        sty = self.slices[name]
        pid = self.expr(pid_node)
        if not isinstance(pid.ty, TileWitnessTy) or pid.ty.rank != sty.rank:
            self.fail(messages.tile_ownership(self.span(pid_node), "tile-store-not-own", help="tile-store-own",
                                              name=name, index=ast.unparse(pid_node), rank=sty.rank))
        value = self.tile_arg(val_node, "tile.store")
        vty: TileTy = value.ty  # type: ignore[assignment]
        if vty.rank != sty.rank:
            self.type_error(val_node, "tile-rank", name=name, rank=sty.rank, trank=vty.rank)
        if vty.elem != sty.elem:
            if not implicitly_converts(vty.elem, sty.elem):
                self.type_error(val_node, "tile-store-dtype", help="tile-use-astype", got=vty.elem, name=name, want=sty.elem)
            x = ast.Name(id="__az_x")
            value = self.lift(val_node, [x], lambda: self.cast(self.expr(x), sty.elem), [value])
        self.note_shape(name, vty.shape, call)
        return TileStore(ir.SliceRef(name, sty, self.span(dst)), value, self.span(call))

    def tile_reduce(self, op: str, node: ast.Call, axis_node: ast.expr | None, keep_node: ast.expr | None) -> ir.Expr:
        """`tile.sum/max/min(x, axis=None, keepdims=False)`: NumPy's shapes (the reduced axes
        dropped, or kept with extent 1 under `keepdims=True`); the node itself always keeps
        them (tile_ir.TileReduce) and a `TileReshape` drops them."""
        x = self.tile_arg(node.args[0], f"tile.{op}")
        xty: TileTy = x.ty  # type: ignore[assignment]
        axes = tuple(range(xty.rank)) if axis_node is None else (self.axis_value(axis_node, xty.rank),)
        keep = False
        if keep_node is not None:
            if not (isinstance(keep_node, ast.Constant) and isinstance(keep_node.value, bool)):
                self.type_error(keep_node, "tile-keepdims-literal")
            keep = bool(keep_node.value)  # type: ignore[union-attr]
        elem = xty.elem
        if op == "sum" and (elem.is_half or elem.is_bool):
            elem = F32 if elem.is_half else I64
        shape = tuple(1 if i in axes else d for i, d in enumerate(xty.shape))
        red = TileReduce(op, x, axes, TileTy(elem, shape), self.span(node))
        if keep:
            return red
        return self.reshaped(red, tuple(d for i, d in enumerate(xty.shape) if i not in axes), node)

    def tile_matmul(self, node: ast.Call, tf32_node: ast.expr | None) -> ir.Expr:
        x = self.tile_arg(node.args[0], "tile.matmul")
        y = self.tile_arg(node.args[1], "tile.matmul")
        acc = self.tile_arg(node.args[2], "tile.matmul") if len(node.args) == 3 else None
        xt: TileTy = x.ty  # type: ignore[assignment]
        yt: TileTy = y.ty  # type: ignore[assignment]
        at = acc.ty if acc is not None else None
        acc_text = f" + {at.shape}" if at is not None else ""  # type: ignore[union-attr]
        if xt.elem != yt.elem or xt.elem.name not in MATMUL_INPUTS or (at is not None and at.elem != F32):  # type: ignore[union-attr]
            self.type_error(node, "tile-matmul-dtype", x=xt.elem, y=yt.elem, acc=f" with a `{at.elem}` accumulator" if at is not None else "")  # type: ignore[union-attr]
        if xt.rank != 2 or yt.rank != 2 or xt.shape[1] != yt.shape[0] or (at is not None and at.shape != (xt.shape[0], yt.shape[1])):  # type: ignore[union-attr]
            self.type_error(node, "tile-matmul-shape", x=xt.shape, y=yt.shape, acc=acc_text)
        tf32 = False
        if tf32_node is not None:
            if not (isinstance(tf32_node, ast.Constant) and isinstance(tf32_node.value, bool)):
                self.type_error(tf32_node, "tile-tf32-literal")
            tf32 = bool(tf32_node.value)  # type: ignore[union-attr]
        return TileMatmul(x, y, acc, tf32, TileTy(F32, (xt.shape[0], yt.shape[1])), self.span(node))


def is_bool(ty: Any) -> bool:
    return ty == BOOL


_ = _BINOPS  # (the binary operators are the scalar typer's)

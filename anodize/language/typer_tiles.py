"""Typing of tile kernels (`@az.tile_kernel`): the Tile model's front end.

`TileFnTyper` is the typer of a tile kernel's body (typer_fn.py's `FnTyper`, specialised): its
statement, expression and call typers are typer_tile_syntax.py's (tile values, `.T`,
`.astype`, element-wise arithmetic and math on tiles; the SIMT-only constructs -- witnesses,
raw ids, shared memory, barriers, warp operations, atomics, `print`, `unsafe` -- taken away:
the compiler owns a tile kernel's threads), and `TileTyper` here types the tile vocabulary
(`tile.load`, `tile.store`, `tile.sum`, `tile.matmul`, ...).

Ownership (partition ownership, `az-disjoint-index`): `tile.store(dst, pid, value)` takes the
program's id, which only `tile.program_id_1d/2d()` makes; a load from an output must be at
the program's own tile; and every store and load of one output uses one tile shape.
"""

from __future__ import annotations

import ast
from typing import Any

from anodize.language import ir, messages
from anodize.language.tile_ir import (
    TileArange,
    TileFull,
    TileId,
    TileIdPart,
    TileLoad,
    TileMatmul,
    TileReduce,
    TileReshape,
    TileStore,
    TileTy,
    TileWitnessTy,
    is_tile,
)
from anodize.language.tile_ops import TILE_OPS
from anodize.language.tile_vocab import (
    DEFAULT_NUM_WARPS,
    MATMUL_INPUTS,
    NUM_WARPS_CHOICES,
    TILE_MAX_ELEMS,
    TILE_MAX_RANK,
)
from anodize.language.typer_exprs import ExprTyper
from anodize.language.typer_fn import FnTyper
from anodize.language.typer_state import KernelCtx
from anodize.language.typer_tile_syntax import TileCallTyper, TileExprTyper, TileStmtTyper
from anodize.language.types import F32, I32, I64, ScalarTy, SliceTy, Ty, implicitly_converts

__all__ = ["TileFnTyper", "TileTyper", "num_warps", "check_tile_params"]


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


class TileFnTyper(FnTyper):
    """The typer of a tile kernel's body: the tile statement, expression and call typers, and
    the tile vocabulary."""

    stmt_typer = TileStmtTyper
    expr_typer = TileExprTyper
    call_typer = TileCallTyper
    stmts: TileStmtTyper
    exprs: TileExprTyper
    calls: TileCallTyper

    def __init__(self, kctx: KernelCtx, fdef: ast.FunctionDef, params: dict[str, Ty], *, is_kernel: bool, ret: Ty | None = None):
        super().__init__(kctx, fdef, params, is_kernel=is_kernel, ret=ret)
        self.tiles = TileTyper(self)


class TileTyper:
    """The tile vocabulary (`tile.*`) of one tile kernel's body."""

    def __init__(self, fn: TileFnTyper):
        self.fn = fn
        self.st = fn.st
        self._shapes: dict[str, tuple[tuple[int, ...], int]] = {}  # output -> (tile shape, line)
        self._noted: set[str] = set()  # outputs whose shape was noted

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
                self.st.unsupported(node, "tile-index", expr=ast.unparse(node))
        out += shape[axis:]
        return self.reshaped(base, tuple(out), node)

    def reshaped(self, base: ir.Expr, shape: tuple[int, ...], node: ast.AST) -> ir.Expr:
        """`base` as a tile of `shape` (its elements in row-major order; `base` itself when the
        shape is the same)."""
        bty: TileTy = base.ty  # type: ignore[assignment]
        if len(shape) > TILE_MAX_RANK:
            self.st.type_error(node, "tile-reshape-rank", most=TILE_MAX_RANK, rank=len(shape))
        if shape == bty.shape:
            return base
        return TileReshape(base, TileTy(bty.elem, shape), self.st.span(node))

    # ---- the tile vocabulary ----------------------------------------------------------------
    def tile_call(self, name: str, node: ast.Call) -> ir.Expr:
        op = TILE_OPS[name]  # its row, declared with its typing (tile_ops.py)
        lo, hi = op.arity
        if not lo <= len(node.args) <= hi:
            self.st.type_error(node, "tile-arity", name=name, want=str(lo) if lo == hi else f"{lo} to {hi}", got=len(node.args))
        allowed = op.keywords
        kws: dict[str, ast.expr] = {}
        for kw in node.keywords:
            if kw.arg is None or kw.arg not in allowed:
                self.st.unsupported(kw.value if kw.arg is None else kw, "tile-keyword", kw=kw.arg or "**", name=name)
            kws[kw.arg] = kw.value  # type: ignore[index]
        return op.typing(self, node, *node.args, **kws)

    def tile_full(self, node: ast.Call, shape_node: ast.expr, value: ast.expr | None, dtype: ast.expr) -> ir.Expr:
        """`tile.zeros(shape, T)` (`value` None) and `tile.full(shape, value, T)`."""
        shape = self.tile_shape(shape_node)
        ty = self.fn.names.resolve_type(dtype, "the tile's element type")
        if not isinstance(ty, ScalarTy):
            self.st.type_error(dtype, "not-kernel-type", expr=ast.unparse(dtype))
        span = self.st.span(node)
        v = ir.Const(0, ty, span) if value is None else self.fn.exprs.coerce(self.fn.exprs.numeric(self.fn.expr(value), value), ty, value, "the tile's value")
        return TileFull(v, TileTy(ty, shape), span)

    def tile_where(self, node: ast.Call, cond: ast.expr, x: ast.expr, y: ast.expr) -> ir.Expr:
        """`tile.where(cond, x, y)`: the conditional expression's typing, lifted to tiles."""
        syn = ast.copy_location(ast.IfExp(test=cond, body=x, orelse=y), node)
        return self.fn.exprs.lift(node, [cond, x, y], lambda: ExprTyper.visit_IfExp(self.fn.exprs, syn))

    def tile_arange(self, node: ast.Call, n_node: ast.expr) -> ir.Expr:
        n = self.const_int(n_node)
        if type(n) is not int or not 1 <= n <= TILE_MAX_ELEMS:
            self.st.type_error(n_node, "tile-arange", most=TILE_MAX_ELEMS, expr=ast.unparse(n_node))
        return TileArange(TileTy(I32, (n,)), self.st.span(node))

    def program_id(self, rank: int, node: ast.Call) -> ir.Expr:
        c = self.st.k.contract
        if c is not None and c.domain != rank:
            maker = f"tile.program_id_{rank}d()"
            self.st.fail(messages.index_domain(self.st.span(node), maker, rank, c.domain, None))
        first = self.st.k.tile_id_site
        if first is not None and first[0] != rank:  # 1-D and 2-D ids in one kernel: one could own nothing
            self.st.fail(messages.index_domain_mixed(self.st.span(node), first[1]))
        if first is None:
            self.st.k.tile_id_site = (rank, self.st.span(node))
        self.st.k.ranks.add(rank)
        return TileId(rank, TileWitnessTy(rank), self.st.span(node))

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
            self.st.type_error(node, "tile-shape", expr=ast.unparse(node))
        n = 1
        for d in dims:
            n *= d
        if n > TILE_MAX_ELEMS:
            self.st.type_error(node, "tile-too-big", shape=dims, n=n, limit=TILE_MAX_ELEMS)
        return dims  # type: ignore[return-value]

    def const_int(self, node: ast.expr) -> Any:
        """A compile-time int: a literal, a module constant, an `az.Constant` parameter, or
        arithmetic over literals and module constants; None otherwise."""
        try:
            return self.fn.names.const_value(node)
        except Exception:  # noqa: BLE001 - not one of the simple forms: try the module's folding
            pass
        c = self.st.symbols.constant(node)
        return c[0] if c is not None else None

    def tile_arg(self, node: ast.expr, what: str) -> ir.Expr:
        e = self.fn.expr(node)
        if not is_tile(e):
            self.st.type_error(node, "tile-needs-tile", what=what, ty=e.ty)
        return e

    def slice_arg(self, node: ast.expr, name: str) -> tuple[str, SliceTy]:
        if not (isinstance(node, ast.Name) and node.id in self.st.slices) or self.st.slices[node.id].rank > TILE_MAX_RANK:
            self.st.type_error(node, "tile-src", name=name, expr=ast.unparse(node))
        return node.id, self.st.slices[node.id]  # type: ignore[union-attr]

    def note_shape(self, name: str, shape: tuple[int, ...], node: ast.AST) -> None:
        """One tile shape per output (over every store and load of it in the kernel)."""
        line = self.st.span(node).line
        first = self._shapes.setdefault(name, (shape, line))
        if name in self._noted:  # (the shape probe retypes a kernel only then: typer.py)
            self.st.k.shape_noted_twice = True
        self._noted.add(name)
        if first[0] != shape:
            k = self.st.k
            names = {v: n for n, v in k.unknown_values.items()}  # the shape probe's values, by name

            def show(sh: tuple[int, ...]) -> str:
                return "(" + ", ".join(names.get(d, str(d)) for d in sh) + ("," if len(sh) == 1 else "") + ")"

            diag = messages.tile_ownership(self.st.span(node), "tile-shape-mixed", help="tile-one-shape",
                                           name=name, shape=show(shape), first=show(first[0]), line=first[1])
            if k.shape_mixed is not None:
                k.shape_mixed.append(diag)
            self.st.fail(diag)

    def own_offset(self, pid: ir.Expr, shape: tuple[int, ...], span: Any) -> tuple[ir.Expr, ...]:
        rank = pid.ty.rank  # type: ignore[union-attr]
        return tuple(ir.BinOp("*", TileIdPart(rank, a, I64, span), ir.Const(shape[a], I64, span), I64, span) for a in range(rank))

    def tile_load(self, node: ast.Call, other_node: ast.expr | None) -> ir.Expr:
        src, off_node, shape_node = node.args
        name, sty = self.slice_arg(src, "load")
        shape = self.tile_shape(shape_node)
        span = self.st.span(node)
        if len(shape) != sty.rank:
            self.st.type_error(shape_node, "tile-rank", name=name, rank=sty.rank, trank=len(shape))
        off = self.fn.expr(off_node) if not isinstance(off_node, ast.Tuple) else None
        own = off is not None and isinstance(off.ty, TileWitnessTy)
        if sty.kind.disjoint:
            if not own:
                self.st.fail(messages.tile_ownership(self.st.span(off_node), "tile-load-foreign", help="tile-store-own",
                                                  name=name, index=ast.unparse(off_node), rank=sty.rank))
            self.note_shape(name, shape, node)
        if own:
            assert off is not None
            if off.ty.rank != sty.rank:  # type: ignore[union-attr]
                self.st.type_error(off_node, "tile-rank", name=name, rank=sty.rank, trank=off.ty.rank)  # type: ignore[union-attr]
            offset = self.own_offset(off, shape, span)
        else:
            parts = list(off_node.elts) if isinstance(off_node, ast.Tuple) else [off_node]
            if len(parts) != sty.rank:
                self.st.type_error(off_node, "tile-offset", expr=ast.unparse(off_node))
            offset = tuple(self.offset_part(p) for p in parts)
        elem = sty.elem
        if other_node is None:
            other: ir.Expr = ir.Const(0, elem, span)
        else:
            other = self.fn.exprs.coerce(self.fn.exprs.numeric(self.fn.expr(other_node), other_node), elem, other_node, "`other=`")
        return TileLoad(ir.SliceRef(name, sty, self.st.span(src)), offset, other, own, TileTy(elem, shape), span)

    def offset_part(self, node: ast.expr) -> ir.Expr:
        e = self.fn.expr(node)
        if not isinstance(e.ty, ScalarTy) or not (e.ty.is_int or e.ty.is_bool):
            self.st.type_error(node, "tile-offset", expr=ast.unparse(node))
        return self.fn.exprs.cast(e, I64)

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
                self.st.type_error(shape_node, "tile-shape", expr=ast.unparse(shape_node))
            shape = tuple(vals)
        else:
            shape = self.tile_shape(shape_node) if not free else (vals[0],)
            if not all(type(v) is int and v >= 1 for v in shape):
                self.st.type_error(shape_node, "tile-shape", expr=ast.unparse(shape_node))
        n = 1
        for d in shape:
            n *= d
        if n != bty.size:
            self.st.type_error(shape_node, "tile-reshape-size", shape=bty.shape, n=bty.size, want=shape)
        return self.reshaped(base, shape, shape_node)

    def axis_value(self, node: ast.expr, rank: int) -> int:
        """A compile-time axis of a `rank`-D tile (negative counts from the end)."""
        v = self.st.symbols.constant(node) if not isinstance(node, ast.Constant) else (node.value, None)
        if v is None or type(v[0]) is not int:
            self.st.type_error(node, "tile-axis-literal")
        a = int(v[0])  # type: ignore[index]
        if not -rank <= a < rank:
            self.st.type_error(node, "tile-axis", axis=a, rank=rank)
        return a % rank

    def tile_store(self, call: ast.Call) -> ir.Stmt:
        if len(call.args) != 3:
            self.st.type_error(call, "tile-arity", name="store", want="3", got=len(call.args))
        if call.keywords:
            self.st.unsupported(call.keywords[0], "tile-keyword", kw=call.keywords[0].arg or "**", name="store")
        dst, pid_node, val_node = call.args
        if not (isinstance(dst, ast.Name) and dst.id in self.st.slices and self.st.slices[dst.id].kind.disjoint
                and self.st.slices[dst.id].rank <= TILE_MAX_RANK):
            self.st.type_error(dst, "tile-store-dst", expr=ast.unparse(dst))
        name = dst.id  # type: ignore[union-attr]
        sty = self.st.slices[name]
        pid = self.fn.expr(pid_node)
        if not isinstance(pid.ty, TileWitnessTy) or pid.ty.rank != sty.rank:
            self.st.fail(messages.tile_ownership(self.st.span(pid_node), "tile-store-not-own", help="tile-store-own",
                                              name=name, index=ast.unparse(pid_node), rank=sty.rank))
        value = self.tile_arg(val_node, "tile.store")
        vty: TileTy = value.ty  # type: ignore[assignment]
        if vty.rank != sty.rank:
            self.st.type_error(val_node, "tile-rank", name=name, rank=sty.rank, trank=vty.rank)
        if vty.elem != sty.elem:
            if not implicitly_converts(vty.elem, sty.elem):
                self.st.type_error(val_node, "tile-store-dtype", help="tile-use-astype", got=vty.elem, name=name, want=sty.elem)
            x = ast.Name(id="__az_x")
            value = self.fn.exprs.lift(val_node, [x], lambda: self.fn.exprs.cast(self.fn.expr(x), sty.elem), [value])
        self.note_shape(name, vty.shape, call)
        return TileStore(ir.SliceRef(name, sty, self.st.span(dst)), value, self.st.span(call))

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
                self.st.type_error(keep_node, "tile-keepdims-literal")
            keep = bool(keep_node.value)  # type: ignore[union-attr]
        elem = xty.elem
        if op == "sum" and (elem.is_half or elem.is_bool):
            elem = F32 if elem.is_half else I64
        shape = tuple(1 if i in axes else d for i, d in enumerate(xty.shape))
        red = TileReduce(op, x, axes, TileTy(elem, shape), self.st.span(node))
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
            self.st.type_error(node, "tile-matmul-dtype", x=xt.elem, y=yt.elem, acc=f" with a `{at.elem}` accumulator" if at is not None else "")  # type: ignore[union-attr]
        if xt.rank != 2 or yt.rank != 2 or xt.shape[1] != yt.shape[0] or (at is not None and at.shape != (xt.shape[0], yt.shape[1])):  # type: ignore[union-attr]
            self.st.type_error(node, "tile-matmul-shape", x=xt.shape, y=yt.shape, acc=acc_text)
        tf32 = False
        if tf32_node is not None:
            if not (isinstance(tf32_node, ast.Constant) and isinstance(tf32_node.value, bool)):
                self.st.type_error(tf32_node, "tile-tf32-literal")
            tf32 = bool(tf32_node.value)  # type: ignore[union-attr]
        return TileMatmul(x, y, acc, tf32, TileTy(F32, (xt.shape[0], yt.shape[1])), self.st.span(node))

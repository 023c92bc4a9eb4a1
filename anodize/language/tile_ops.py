"""The tile vocabulary's operations (`tile.<name>`), declared once each: its typing function,
whose `@declare` records the op's row -- its positional arity (min, max) from the parameters
after `(t, node)` and its keywords from the keyword-only ones.  tile_vocab's `TILE_FUNCS` and
`TILE_KEYWORDS` (the symbol table's and the checker's vocabulary, language/intrinsics.py) are
read from these rows; the tile typer (typer_tiles.py's `TileTyper.tile_call`) checks a call's
arity and keywords against the row and calls the function with the call's arguments (AST
nodes, a keyword absent: None).

The public stub users and mypy see stays in `anodize/tile.py`: its signature names the facade's
slice types (anodize/types.py), which the language may not import (tests/language/
test_layering.py); tests/language/test_tile_ops.py holds the two to one arity and keywords.

Adding an op: its stub in anodize/tile.py and its declared typing here (2 files, and its
test).  An element-wise op with an IR node of its own declares the node here too, beside its
row (a frozen dataclass: its operands, `ty: TileTy`, `span`), and registers the node's element
lowering in codegen/tile/ops.py (`@elementwise(Node)`: element e of the node from element e
of each operand), which the GPU, the CPU backend and the debug device all run: 3 files and
its test (docs/architecture.md, "How to add X"; the dry run: tests/codegen/
test_tile_new_node_op.py).  An op whose node has a loop of its own (element e reads other
elements: a scan, an index of the maximum) declares the node here the same way plus a method
`temporaries(threads) -> tuple[TileTy, ...]` (the tiles its loop allocates, its result first;
language/tile_storage.py counts them against the on-chip bound), and registers its loop in
codegen/tile/ops.py (`@computes(Node)`, which the tile compiler's `prep` calls with the arrays
of those tiles): again 3 files and its test (the dry run: tests/codegen/
test_tile_new_loop_op.py).  This module stays light (no IR import at load: tile_vocab reads it).
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from anodize.language.records import dataclass

if TYPE_CHECKING:
    from anodize.language import ir
    from anodize.language.typer_tiles import TileTyper


@dataclass(frozen=True)
class TileOp:
    name: str  # `tile.<name>`
    arity: tuple[int, int]  # positional arguments (min, max)
    keywords: frozenset[str]  # the keywords it takes (the only keywords of a tile kernel's calls)
    typing: Callable[..., Any]  # (TileTyper, the call, *its positional arguments, **its keywords) -> ir.Expr
    writes: int | None = None  # the argument it writes through (`tile.store`'s destination), if any


TILE_OPS: dict[str, TileOp] = {}  # filled by `declare`, in this module's order

_F = TypeVar("_F", bound=Callable[..., Any])


def declare(*, name: str = "", writes: int | None = None) -> Callable[[_F], _F]:
    """Record the decorated typing function as the row of `tile.<name>` (default: the
    function's name, less a trailing `_`) and return it unchanged."""

    def record(fn: _F) -> _F:
        params = list(inspect.signature(fn).parameters.values())[2:]  # after (t, node)
        pos = [p for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        kws = frozenset(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)
        lo = sum(1 for p in pos if p.default is inspect.Parameter.empty)
        op = name or fn.__name__.rstrip("_")
        TILE_OPS[op] = TileOp(op, (lo, len(pos)), kws, fn, writes)
        return fn

    return record


# ---- program ids -------------------------------------------------------------------------------
@declare()
def program_id_1d(t: TileTyper, node: ast.Call) -> ir.Expr:
    return t.program_id(1, node)


@declare()
def program_id_2d(t: TileTyper, node: ast.Call) -> ir.Expr:
    return t.program_id(2, node)


@declare()
def program_id_3d(t: TileTyper, node: ast.Call) -> ir.Expr:
    return t.program_id(3, node)


# ---- memory ------------------------------------------------------------------------------------
@declare()
def load(t: TileTyper, node: ast.Call, src: ast.expr, offset: ast.expr, shape: ast.expr, *, other: ast.expr | None = None) -> ir.Expr:
    return t.tile_load(node, other)


@declare(writes=0)
def store(t: TileTyper, node: ast.Call, dst: ast.expr, pid: ast.expr, value: ast.expr) -> ir.Expr:
    t.st.unsupported(node, "statement-call-value", help="statement-call-own", call="tile.store")  # (a statement: stmt typer)


# ---- making tiles ------------------------------------------------------------------------------
@declare()
def zeros(t: TileTyper, node: ast.Call, shape: ast.expr, dtype: ast.expr) -> ir.Expr:
    return t.tile_full(node, shape, None, dtype)


@declare()
def full(t: TileTyper, node: ast.Call, shape: ast.expr, value: ast.expr, dtype: ast.expr) -> ir.Expr:
    return t.tile_full(node, shape, value, dtype)


# ---- reductions --------------------------------------------------------------------------------
@declare(name="sum")
def sum_(t: TileTyper, node: ast.Call, x: ast.expr, *, axis: ast.expr | None = None, keepdims: ast.expr | None = None) -> ir.Expr:
    return t.tile_reduce("sum", node, axis, keepdims)


@declare(name="max")
def max_(t: TileTyper, node: ast.Call, x: ast.expr, *, axis: ast.expr | None = None, keepdims: ast.expr | None = None) -> ir.Expr:
    return t.tile_reduce("max", node, axis, keepdims)


@declare(name="min")
def min_(t: TileTyper, node: ast.Call, x: ast.expr, *, axis: ast.expr | None = None, keepdims: ast.expr | None = None) -> ir.Expr:
    return t.tile_reduce("min", node, axis, keepdims)


# ---- element-wise and matmul -------------------------------------------------------------------
@declare()
def where(t: TileTyper, node: ast.Call, cond: ast.expr, x: ast.expr, y: ast.expr) -> ir.Expr:
    return t.tile_where(node, cond, x, y)


@declare()
def matmul(t: TileTyper, node: ast.Call, x: ast.expr, y: ast.expr, acc: ast.expr | None = None, *, allow_tf32: ast.expr | None = None) -> ir.Expr:
    return t.tile_matmul(node, allow_tf32)


# ---- shapes (after the rest: the vocabulary keeps its order) -----------------------------------
@declare()
def arange(t: TileTyper, node: ast.Call, n: ast.expr) -> ir.Expr:
    return t.tile_arange(node, n)


@declare()
def expand_dims(t: TileTyper, node: ast.Call, x: ast.expr, axis: ast.expr) -> ir.Expr:
    xt = t.tile_arg(x, "tile.expand_dims")
    xs: tuple[int, ...] = xt.ty.shape  # type: ignore[union-attr]
    a = t.axis_value(axis, len(xs) + 1)
    return t.reshaped(xt, xs[:a] + (1,) + xs[a:], node)

"""The element lowerings of the tile ops that have an IR node of their own (declared beside
their row in language/tile_ops.py), registered by node class:

    @elementwise(Clamp01)
    def clamp01(node: Clamp01, args: list[ir.Expr]) -> ir.Expr:
        ...

`args` are the node's children in field order (anodize/language/ir_walk.py `children`): for a
tile operand, element `e` of it (broadcast NumPy-style to the node's shape; a local the
lowering may read more than once), for a scalar operand, its plain-IR expression.  The
function returns element `e` of the node, an ordinary scalar expression.

That is the whole contract of such a node: element `e` of it reads element `e` of each tile
operand and nothing else of them (the tile compiler's barrier, hazard and in-bounds analyses
in plain.py, and language/tile_storage.py's count, read it as they read `TileElem`).  The
register layouts leave the node to the generic lowering (rows_plan.py: not a row node;
language/tile_plan.py: no register tile is read through it), and the CPU backend and the
debug device run the plain IR this makes for one thread (codegen/driver.py `_tiles(k, 1)`),
so this one function lowers the op for every backend.

An op whose element needs other elements of its operands (a scan, an index of the maximum
along an axis) is computed whole, by a loop of its own, before the statement that reads it:

    @computes(Cumsum)
    def cumsum(low: Any, node: Cumsum, args: list[Any], temps: list[Any], out: list[ir.Stmt]) -> Any:
        ...

`args` are the node's children as above, prepared (a tile operand: a tile tree `low.ev` reads
at any coordinates; a scalar: its plain-IR expression); `temps` are the shared arrays of the
tiles its node declares (`node.temporaries(threads)`, language/tile_storage.py counts the same
tiles, so `anodize check`'s on-chip bound holds what the lowering allocates), its result first.
The function appends its loops to `out` through the lowering's builders (`low.loop(ty, body)`:
one element per thread, the barrier before it placed from what it notes; `low.ev`,
`low.local`, `low.note`) and returns the tile tree of its result, normally `temps[0]`.  The
same plain IR runs on the GPU, the CPU backend and the debug device.  The reductions and
matmuls, with lowerings of their own per layout (rows.py, mma.py), stay in compute.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from anodize.language import ir
from anodize.language.tile_ir import TileTy

__all__ = ["COMPUTES", "ELEMENTWISE", "computes", "elementwise", "Op"]

ElementFn = Callable[[Any, list[ir.Expr]], ir.Expr]
ComputeFn = Callable[[Any, Any, list[Any], list[Any], list[ir.Stmt]], Any]
_F = TypeVar("_F", bound=ElementFn)
_G = TypeVar("_G", bound=ComputeFn)

ELEMENTWISE: dict[type, ElementFn] = {}
COMPUTES: dict[type, ComputeFn] = {}


def elementwise(cls: type) -> Callable[[_F], _F]:
    """Register the decorated function as the element lowering of tile node class `cls`."""

    def record(fn: _F) -> _F:
        if cls in ELEMENTWISE or cls in COMPUTES:
            raise ValueError(f"tile node {cls.__name__} already has a lowering")
        ELEMENTWISE[cls] = fn
        return fn

    return record


def computes(cls: type) -> Callable[[_G], _G]:
    """Register the decorated function as the loop lowering of tile node class `cls`, which
    declares the tiles that loop allocates (`temporaries(threads) -> tuple[TileTy, ...]`)."""
    if not callable(getattr(cls, "temporaries", None)):
        raise TypeError(f"tile node {cls.__name__} computed by a loop must declare its `temporaries(threads)`")

    def record(fn: _G) -> _G:
        if cls in COMPUTES or cls in ELEMENTWISE:
            raise ValueError(f"tile node {cls.__name__} already has a lowering")
        COMPUTES[cls] = fn
        return fn

    return record


class Op:
    """A registered node in a tile tree being lowered (plain.py `prep`): the node and its
    children, each a prepared tile tree or a plain-IR scalar."""

    __slots__ = ("node", "kids", "ty")

    def __init__(self, node: Any, kids: list[Any]):
        self.node = node
        self.kids = kids
        self.ty = node.ty

    def tiles(self) -> list[Any]:
        """Its tile operands (prepared)."""
        return [c for c in self.kids if isinstance(getattr(c, "ty", None), TileTy)]

    def lower(self, args: list[ir.Expr]) -> ir.Expr:
        return ELEMENTWISE[type(self.node)](self.node, args)

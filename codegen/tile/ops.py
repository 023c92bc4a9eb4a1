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
so this one function lowers the op for every backend.  An op whose element needs other
elements (a scan, a gather) is not this kind: it gets its own loop in compute.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from anodize.language import ir
from anodize.language.tile_ir import TileTy

__all__ = ["ELEMENTWISE", "elementwise", "Op"]

ElementFn = Callable[[Any, list[ir.Expr]], ir.Expr]
_F = TypeVar("_F", bound=ElementFn)

ELEMENTWISE: dict[type, ElementFn] = {}


def elementwise(cls: type) -> Callable[[_F], _F]:
    """Register the decorated function as the element lowering of tile node class `cls`."""

    def record(fn: _F) -> _F:
        if cls in ELEMENTWISE:
            raise ValueError(f"tile node {cls.__name__} already has an element lowering")
        ELEMENTWISE[cls] = fn
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

"""The LLVM lowering's handlers, keyed by IR node type.

Every statement and expression node of the typed IR (anodize/language/ir.py), and the
codegen-only nodes other passes make (the tile compiler's `TileMma`, `TileVecLoad`, ...), has
one lowering registered here: a function `(lw, node)` registered with `@lowers(NodeType)` by the
module that knows how to lower it, or a method of one of the `Lowerer`'s collaborators
(`StmtLowering`, `ExprLowering`, ...) marked `@handles(NodeType)` and registered with its class
(`@part("statements")`: the collaborator is `lw.statements`).  The `Lowerer` dispatches by
`type(node)`; it imports none of the plug-ins, which import it (for types) and register
themselves: codegen/lowerings.py is the one list that imports them all.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .lower import Lowerer

Handler = Callable[[Any, Any], Any]  # (lw: a Lowerer or a subclass, node)

LOWERINGS: dict[type, Handler] = {}

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)


def _add(node_type: type, handler: Handler) -> None:
    if node_type in LOWERINGS:
        raise RuntimeError(f"two lowerings registered for {node_type.__name__}")
    LOWERINGS[node_type] = handler


def lowers(*node_types: type) -> Callable[[F], F]:
    """Register a function `(lw, node)` as the lowering of each of `node_types`."""

    def register(fn: F) -> F:
        for t in node_types:
            _add(t, fn)
        return fn

    return register


def handles(*node_types: type) -> Callable[[F], F]:
    """Mark a collaborator's method `(self, node)` as the lowering of `node_types`; `part`
    registers it with its class."""

    def mark(fn: F) -> F:
        fn._lowers = node_types  # type: ignore[attr-defined]
        return fn

    return mark


def part(attribute: str) -> Callable[[C], C]:
    """Register the `@handles` methods of a collaborator class of the `Lowerer`, which holds its
    instance as `lw.<attribute>`."""
    get = attrgetter(attribute)

    def register(cls: C) -> C:
        for fn in vars(cls).values():
            for t in getattr(fn, "_lowers", ()):
                _add(t, _through(get, fn))
        return cls

    return register


def _through(get: Callable[[Any], Any], fn: Callable[[Any, Any], Any]) -> Handler:
    return lambda lw, node: fn(get(lw), node)


def missing(node: Any) -> RuntimeError:
    """The internal error for a node no module registered a lowering for."""
    return RuntimeError(f"internal error: no LLVM lowering is registered for {type(node).__name__} "
                        "(codegen/lowerings.py imports the modules that register them)")

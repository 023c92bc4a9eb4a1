"""The one walk over the typed IR (and the tile trees built of the same dataclasses).

    node_fields(cls)  the fields of a node class that may hold child nodes (all but `ty`, `span`)
    children(node)    the nodes directly inside `node`, in field order, a tuple field's items flattened
    walk(node)        `node` and every node under it, depth first, in field order

A node is a dataclass instance (not a class); a field holds a node, a tuple of nodes, or a
plain value (a name, a number), which is not a child.  A call's `func` (its helper's
`FuncIR`) is a child like any other: a walk that must not enter helper bodies skips
`ir.FuncIR` itself.  Field names are read once per node class.  No other module iterates a
node's dataclass fields to find its children (tests/test_walks.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["node_fields", "children", "walk"]

_SKIP = ("ty", "span")
_FIELDS: dict[type, tuple[str, ...]] = {}


def node_fields(cls: type) -> tuple[str, ...]:
    """The fields of node class `cls` that may hold child nodes, in declaration order (none
    for a non-dataclass)."""
    f = _FIELDS.get(cls)
    if f is None:
        own = getattr(cls, "__dataclass_fields__", None)
        f = _FIELDS[cls] = tuple(n for n in own if n not in _SKIP) if own else ()
    return f


def _is_node(v: Any) -> bool:
    return hasattr(v.__class__, "__dataclass_fields__") and not isinstance(v, type)


def _items(v: tuple[Any, ...] | list[Any], out: list[Any]) -> None:
    for x in v:
        if isinstance(x, (tuple, list)):  # nested tuples (a `TileElem`'s (placeholder, tile) pairs)
            _items(x, out)
        elif _is_node(x):
            out.append(x)


def children(node: Any) -> list[Any]:
    """The nodes directly inside `node` (the items of a tuple or list `node` too)."""
    out: list[Any] = []
    if isinstance(node, (tuple, list)):
        _items(node, out)
        return out
    if isinstance(node, type):
        return out
    for name in node_fields(node.__class__):
        v = getattr(node, name)
        if isinstance(v, (tuple, list)):
            _items(v, out)
        elif _is_node(v):
            out.append(v)
    return out


def walk(node: Any) -> Iterator[Any]:
    """`node` (unless a tuple or list) and every node under it, depth first, in field order."""
    if _is_node(node):
        yield node
    for c in children(node):
        yield from walk(c)

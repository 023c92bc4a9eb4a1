"""The one walk over the typed IR (and the tile trees built of the same dataclasses).

    node_fields(cls)  the fields of a node class that may hold child nodes (all but `ty`, `span`)
    children(node)    the nodes directly inside `node`, in field order, a tuple field's items flattened
    walk(node, stop)  `node` and every node under it, depth first, in field order (a node of a
                      class in `stop` is yielded but not entered)
    map_children(node, fn)  `node` rebuilt with each child `c` as `fn(c)` (itself when none changed)
    same(a, b, eq)    are `a` and `b` one tree (the same classes, fields and plain values)?

A node is a dataclass instance (not a class); a field holds a node, a tuple of nodes, or a
plain value (a name, a number), which is not a child.  A call's `func` (its helper's
`FuncIR`) is a child like any other: a walk that must not enter helper bodies skips
`ir.FuncIR` (`stop=(ir.FuncIR,)`).  Field names are read once per node class.  No other
module iterates a node's dataclass fields, to find, rebuild or compare its children
(tests/test_walks.py): a rewrite is a function of a node that calls `map_children(node,
itself)` where it goes on down, a comparison is `same` with an `eq` for the fields it reads
its own way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

__all__ = ["node_fields", "children", "walk", "map_children", "same"]

_T = TypeVar("_T")

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


def walk(node: Any, stop: tuple[type, ...] = ()) -> Iterator[Any]:
    """`node` (unless a tuple or list) and every node under it, depth first, in field order;
    a node of a class in `stop` is yielded, not entered (`(ir.FuncIR,)`: not a helper's body)."""
    if _is_node(node):
        yield node
        if isinstance(node, stop):
            return
    for c in children(node):
        yield from walk(c, stop)


def _map_items(v: _T, fn: Callable[[Any], Any]) -> _T:
    out: list[Any] = []
    changed = False
    for x in v:  # type: ignore[attr-defined]
        nx = _map_items(x, fn) if isinstance(x, (tuple, list)) else fn(x) if _is_node(x) else x
        changed = changed or nx is not x
        out.append(nx)
    if not changed:
        return v
    return list(out) if isinstance(v, list) else tuple(out)  # type: ignore[return-value]


def map_children(node: _T, fn: Callable[[Any], Any]) -> _T:
    """`node` with each child `c` (a node in a field, or in a tuple or list there, nested
    tuples too) replaced by `fn(c)` (`dataclasses.replace`); `node` itself when every `fn(c)`
    is `c`, so an unchanged tree keeps its identity.  A tuple or list `node`: its items mapped
    (plain items kept).  A plain value: itself."""
    if isinstance(node, (tuple, list)):
        return _map_items(node, fn)
    if not _is_node(node):
        return node
    changes: dict[str, Any] = {}
    for name in node_fields(node.__class__):
        v = getattr(node, name)
        if isinstance(v, (tuple, list)):
            nv = _map_items(v, fn)
        elif _is_node(v):
            nv = fn(v)
        else:
            continue
        if nv is not v:
            changes[name] = nv
    return replace(node, **changes) if changes else node  # type: ignore[type-var]


_COMPARED: dict[type, tuple[str, ...]] = {}


def _compared(cls: type) -> tuple[str, ...]:
    f = _COMPARED.get(cls)
    if f is None:
        f = _COMPARED[cls] = tuple(n for n in cls.__dataclass_fields__ if n != "span")  # type: ignore[attr-defined]
    return f


def same(a: Any, b: Any, eq: Callable[[Any, str, Any, Any], bool | None] | None = None) -> bool:
    """Are `a` and `b` one tree: nodes of one class whose fields (`ty` too, not `span`) are the
    same, tuples and lists of the same items, plain values of one class and equal?  `eq(node,
    field, x, y)`, if given, is asked first for each field pair `x`, `y` of two nodes (`node`
    the first): True or False decides it, None compares as above."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y, eq) for x, y in zip(a, b))
    if not _is_node(a):
        return bool(a == b)
    for name in _compared(a.__class__):
        x, y = getattr(a, name), getattr(b, name)
        got = None if eq is None else eq(a, name, x, y)
        if got is None:
            got = same(x, y, eq)
        if not got:
            return False
    return True

"""A read-only libcst traversal that does not rebuild the tree, and the wrapper that uses it.

libcst's own `CSTNode.visit` rebuilds every node it passes (a dataclass constructor and
its validation per node) even for a read-only `CSTVisitor`, and the visitor's result is
then thrown away.  For the checker that rebuilding was most of the time of each pass.

    walk_batched(module, visitors)    # the rules' one batched pass
    Wrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)

`walk_batched` calls the same `visit_<Node>` / `leave_<Node>` methods in the same order
as `libcst.visit_batched`: each node's children in the order libcst's own
`_visit_and_replace_children` visits them, which is recorded once per node class (by
running that method with a recorder that does not descend).  `Wrapper` is a
`MetadataWrapper` whose `visit_batched` uses it; providers whose whole work is in
`visit_Module` (ExpressionContextProvider, ScopeProvider) run without the empty
whole-tree pass that would follow.  `QualifiedNames` is libcst's
`QualifiedNameProvider` with its per-node pass run by this walker: the same mapping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from typing import Any

import libcst as cst
from libcst import BatchableCSTVisitor, CSTNode, MaybeSentinel
from libcst.metadata import MetadataWrapper, QualifiedNameProvider
from libcst.metadata.name_provider import QualifiedNameVisitor

__all__ = ["QualifiedNames", "Wrapper", "child_fields", "walk", "walk_batched"]

# node class -> the fields libcst visits, in its order; None: the order depends on the node
_FIELDS: dict[type, tuple[str, ...] | None] = {}
_SEQUENCES = (tuple, list)


class _FieldRecorder(cst.CSTVisitor):
    """Records which fields of one node `_visit_and_replace_children` visits, in order."""

    def __init__(self, node: CSTNode) -> None:
        super().__init__()
        self.node = node
        self.fields: list[str] = []

    def on_visit(self, node: CSTNode) -> bool:
        return False  # one level only

    def on_visit_attribute(self, node: CSTNode, attribute: str) -> None:
        if node is self.node:
            self.fields.append(attribute)

    def on_leave_attribute(self, original_node: CSTNode, attribute: str) -> None:
        pass


def _record(node: CSTNode) -> tuple[str, ...]:
    rec = _FieldRecorder(node)
    node._visit_and_replace_children(rec)
    return tuple(dict.fromkeys(rec.fields))


def child_fields(node: CSTNode) -> tuple[str, ...]:
    """The fields of `node` that hold children, in libcst's visiting order."""
    cls = node.__class__
    try:
        fields = _FIELDS[cls]
    except KeyError:
        fields = _record(node)
        # A field libcst skipped while it held None may be visited when it holds a node
        # (`FormattedStringExpression.format_spec`): such classes are recorded per node.
        unstable = any(
            f.name not in fields and getattr(node, f.name, None) is None for f in dataclasses.fields(node)
        )
        _FIELDS[cls] = None if unstable else fields
        return fields
    return fields if fields is not None else _record(node)


_Plan = tuple[tuple[str, ...] | None, tuple[Callable[[CSTNode], Any], ...], tuple[Callable[[CSTNode], Any], ...]]


def walk_batched(root: CSTNode, visitors: Iterable[BatchableCSTVisitor]) -> bool:
    """Visit `root` with every visitor's `visit_<Node>`/`leave_<Node>` methods, as
    `libcst.visit_batched` does.  Returns False (having called nothing) when a visitor
    has attribute callbacks (`visit_<Node>_<field>`), which this walker does not call."""
    methods: dict[str, list[Callable[[CSTNode], Any]]] = {}
    for v in visitors:
        for name, fn in v.get_visitors().items():
            methods.setdefault(name, []).append(fn)
    for name in methods:
        kind, _, rest = name.partition("_")
        if "_" in rest or not hasattr(cst, rest):
            return False
    if all(name in ("visit_Module", "leave_Module") for name in methods) and isinstance(root, cst.Module):
        # nothing below the module has a callback: the traversal itself would be empty
        for fn in methods.get("visit_Module", ()):
            fn(root)
        for fn in methods.get("leave_Module", ()):
            fn(root)
        return True
    plans: dict[type, _Plan] = {}

    def plan(cls: type, node: CSTNode) -> _Plan:
        name = cls.__name__
        child_fields(node)
        p = (_FIELDS[cls], tuple(methods.get("visit_" + name, ())), tuple(methods.get("leave_" + name, ())))
        plans[cls] = p
        return p

    def go(node: CSTNode) -> None:
        cls = node.__class__
        p = plans.get(cls) or plan(cls, node)
        fields, visits, leaves = p
        for fn in visits:
            fn(node)
        for name in fields if fields is not None else _record(node):
            v = getattr(node, name)
            if v is None or v is MaybeSentinel.DEFAULT:
                continue
            if v.__class__ in _SEQUENCES:
                for c in v:
                    go(c)
            else:
                go(v)
        for fn in leaves:
            fn(node)

    go(root)
    return True


def walk(root: CSTNode, visitor: cst.CSTVisitor) -> None:
    """`root.visit(visitor)` for a read-only `CSTVisitor` whose callbacks do not depend on
    attribute callbacks: `on_visit` (children only when it returns true), then `on_leave`."""
    on_visit, on_leave = visitor.on_visit, visitor.on_leave

    def go(node: CSTNode) -> None:
        if on_visit(node):
            for name in child_fields(node):
                v = getattr(node, name)
                if v is None or v is MaybeSentinel.DEFAULT:
                    continue
                if v.__class__ in _SEQUENCES:
                    for c in v:
                        go(c)
                else:
                    go(v)
        on_leave(node)

    go(root)


class Wrapper(MetadataWrapper):
    """A `MetadataWrapper` whose batched visits (the rules', and batchable providers')
    use `walk_batched` instead of libcst's rebuilding traversal."""

    def visit_batched(
        self,
        visitors: Iterable[BatchableCSTVisitor],
        before_visit: Callable[[CSTNode], None] | None = None,
        after_leave: Callable[[CSTNode], None] | None = None,
    ) -> CSTNode:
        visitors = list(visitors)
        if before_visit is not None or after_leave is not None:
            return super().visit_batched(visitors, before_visit, after_leave)
        with ExitStack() as stack:
            for v in visitors:
                stack.enter_context(v.resolve(self))
            if not walk_batched(self.module, visitors):
                cst.visit_batched(self.module, visitors)
        return self.module


class QualifiedNames(QualifiedNameProvider):
    """libcst's `QualifiedNameProvider`, its per-node pass run by `walk` (same metadata)."""

    def visit_Module(self, node: cst.Module) -> bool | None:
        walk(node, QualifiedNameVisitor(self))
        return None


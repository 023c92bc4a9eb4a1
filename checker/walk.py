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
`QualifiedNameProvider`, recording the same mapping without a rebuilding visit.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from functools import partial
from typing import Any, cast

import libcst as cst
from libcst import BatchableCSTVisitor, CSTNode, MaybeSentinel
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, ScopeProvider
from libcst._metadata_dependent import LazyValue  # what QualifiedNameVisitor records
from libcst.metadata.scope_provider import Scope

__all__ = ["QualifiedNames", "Wrapper", "child_fields", "nodes", "walk_batched"]

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


def _may_hold_node(tp: object) -> bool:
    """Whether a field annotated `tp` can hold a node (`Optional[str]` cannot)."""
    if isinstance(tp, type):
        return issubclass(tp, CSTNode)
    if typing.get_origin(tp) is typing.Literal:
        return False
    args = typing.get_args(tp)
    return any(_may_hold_node(a) for a in args) if args else True  # unknown: assume it can


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
            f.name not in fields and getattr(node, f.name, None) is None and _may_hold_node(f.type)
            for f in dataclasses.fields(node)
        )
        _FIELDS[cls] = None if unstable else fields
        return fields
    return fields if fields is not None else _record(node)


_VISITOR_NAMES: dict[type, tuple[str, ...]] = {}


def _visitors_of(v: BatchableCSTVisitor) -> Mapping[str, Callable[[CSTNode], Any]]:
    """`v.get_visitors()`.  libcst's default runs `inspect.getmembers` over the ~1,600
    visitor stubs on every call; for a visitor that keeps that default (and binds no
    `visit_*`/`leave_*` on the instance) the names are found once per class."""
    cls = type(v)
    if cls.get_visitors is not BatchableCSTVisitor.get_visitors or any(
        k.startswith(("visit_", "leave_")) for k in getattr(v, "__dict__", ())
    ):
        return v.get_visitors()
    names = _VISITOR_NAMES.get(cls)
    if names is None:
        names = _VISITOR_NAMES[cls] = tuple(v.get_visitors())
    return {name: getattr(v, name) for name in names}


_Plan = tuple[tuple[str, ...] | None, tuple[Callable[[CSTNode], Any], ...], tuple[Callable[[CSTNode], Any], ...]]


def walk_batched(
    root: CSTNode, visitors: Iterable[BatchableCSTVisitor], on_statement: Callable[[int], None] | None = None
) -> bool:
    """Visit `root` with every visitor's `visit_<Node>`/`leave_<Node>` methods, as
    `libcst.visit_batched` does.  Returns False (having called nothing) when a visitor
    has attribute callbacks (`visit_<Node>_<field>`), which this walker does not call.
    `on_statement(i)`, if given, is called before the walk enters a module's `body[i]`."""
    methods: dict[str, list[Callable[[CSTNode], Any]]] = {}
    for v in visitors:
        for name, fn in _visitors_of(v).items():
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

    if on_statement is None or not isinstance(root, cst.Module):
        go(root)
        return True
    fields, visits, leaves = plans.get(cst.Module) or plan(cst.Module, root)
    for fn in visits:
        fn(root)
    for name in fields if fields is not None else _record(root):
        v = getattr(root, name)
        if name == "body":
            for i, stmt in enumerate(v):
                on_statement(i)
                go(stmt)
        elif v.__class__ in _SEQUENCES:
            for c in v:
                go(c)
        elif v is not None and v is not MaybeSentinel.DEFAULT:
            go(v)
    for fn in leaves:
        fn(root)
    return True


class Wrapper(MetadataWrapper):
    """A `MetadataWrapper` whose batched visits (the rules', and batchable providers')
    use `walk_batched` instead of libcst's rebuilding traversal.  `on_statement`, when
    set, is told which top-level statement the walk enters."""

    on_statement: Callable[[int], None] | None = None

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
            if not walk_batched(self.module, visitors, self.on_statement):
                cst.visit_batched(self.module, visitors)
        return self.module


def nodes(root: CSTNode) -> list[CSTNode]:
    """`root` and every node below it (in no particular order)."""
    out: list[CSTNode] = []
    stack = [root]
    pop, push, extend, add = stack.pop, stack.append, stack.extend, out.append
    while stack:
        n = pop()
        add(n)
        for name in child_fields(n):
            v = getattr(n, name)
            if v is None or v is MaybeSentinel.DEFAULT:
                continue
            if v.__class__ in _SEQUENCES:
                extend(v)
            else:
                push(v)
    return out


class QualifiedNames(QualifiedNameProvider):
    """libcst's `QualifiedNameProvider`: the same metadata for every node (a lazy
    `scope.get_qualified_names_for(node)` where ScopeProvider gives the node a scope, else
    an empty set, as `libcst.metadata.name_provider.QualifiedNameVisitor` records it),
    recorded in one loop over the nodes instead of a rebuilding visit."""

    def visit_Module(self, node: cst.Module) -> bool | None:
        scopes = cast(Mapping[CSTNode, Scope | None], self.metadata[ScopeProvider])
        computed = self._computed
        for n in nodes(node):
            scope = scopes.get(n)
            if scope:
                computed[n] = LazyValue(partial(scope.get_qualified_names_for, n))
            else:
                computed[n] = set()
        return None


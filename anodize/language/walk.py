"""The walks over a module's `ast`: the rules' one batched pass, in source order, and the
small walks the front end and the checker share (`walk_no_scopes`, `sub_blocks`,
`statements`, `child_fields`, `nodes`, `nodes_of`).  No other module iterates an `ast` node's `_fields`
(tests/test_walks.py).

    walk_batched(tree, visitors, on_statement=None)

Every visitor's `visit_<Node>(node)` runs when the walk enters a node of class
`ast.<Node>` (`AsyncFunctionDef`, `AsyncFor`, `AsyncWith` count as `FunctionDef`, `For`,
`With`, as in libcst), and `leave_<Node>(node)` when it leaves it, for all visitors in one
traversal (as libcst's `visit_batched` and Fixit do).  Children are visited in
source order: a `def`'s or `class`'s decorators first, then its parameters (or
bases), its return annotation, then its body.  Around a function's body the walk
also calls `visit_FunctionBody(fn)` / `leave_FunctionBody(fn)`, so a rule can tell
a kernel's body from its signature.  `on_statement(i)`, if given, is called before
the walk enters the module's i-th top-level statement.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from types import CodeType, FunctionType
from typing import Any

__all__ = ["walk_batched", "child_fields", "child_nodes", "visitor_methods", "walk_no_scopes", "nodes", "nodes_of", "sub_blocks",
           "statements"]

_Fn = Callable[[ast.AST], Any]

# node class -> the fields that hold children, in source order
_FIELDS: dict[type, tuple[str, ...]] = {}
_SOURCE_ORDER: dict[str, tuple[str, ...]] = {
    "FunctionDef": ("decorator_list", "args", "returns", "body"),
    "AsyncFunctionDef": ("decorator_list", "args", "returns", "body"),
    "ClassDef": ("decorator_list", "bases", "keywords", "body"),
    "IfExp": ("body", "test", "orelse"),
    "DictComp": ("key", "value", "generators"),
    "arguments": ("posonlyargs", "args", "vararg", "kwonlyargs", "kw_defaults", "kwarg", "defaults"),
    # fields that are lists of plain strings hold no nodes
    "Global": (),
    "Nonlocal": (),
    "MatchClass": ("cls", "patterns", "kwd_patterns"),
}
# fields that never hold a node (identifiers, flags, a constant's value, contexts; `name` and
# `rest` are strings except `TypeAlias.name`, so a walk checks what it finds there)
_SKIP_FIELDS = frozenset((
    "ctx", "type_comment", "type_ignores", "type_params", "id", "attr", "arg", "asname",
    "module", "level", "kind", "conversion", "is_async",
))
# operator fields: their nodes are shared singletons, walked only when a visitor asks for one
_OP_FIELDS = frozenset(("op", "ops"))
_OP_CLASSES = frozenset(
    c.__name__ for base in (ast.operator, ast.unaryop, ast.cmpop, ast.boolop) for c in base.__subclasses__()
)
# node classes without children: the walk calls nothing for them unless a visitor asks
_LEAVES = (ast.Name, ast.Constant, ast.alias, ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal)


def _fields(cls: type, ops: bool = True) -> tuple[str, ...]:
    key = cls if ops else (cls, False)
    f = _FIELDS.get(key)  # type: ignore[call-overload]
    if f is None:
        order = _SOURCE_ORDER.get(cls.__name__)
        if order is None:
            own = getattr(cls, "_fields", ())  # () for a non-node (a string in a field)
            order = tuple(x for x in own if x not in _SKIP_FIELDS and not (cls is ast.Constant and x == "value"))
        f = order if ops else tuple(x for x in order if x not in _OP_FIELDS)
        _FIELDS[key] = f  # type: ignore[index]
    return f


def child_fields(cls: type) -> tuple[str, ...]:
    """The fields of a node class that may hold nodes, operators left out, in source order
    (none for a constant or a non-node); for walks of their own (names.py, barrier_intervals.py)."""
    return _fields(cls, ops=False)


_SCOPES = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def nodes(root: ast.AST) -> list[ast.AST]:
    """`root` and every node under it, as `ast.walk` finds them but operators and contexts left
    out, and in another order (breadth first over `child_fields`): for a search whose order does
    not matter, at about half `ast.walk`'s cost."""
    out = [root]
    append, extend = out.append, out.extend
    node_cls = ast.AST
    i = 0
    while i < len(out):
        n = out[i]
        i += 1
        cls = n.__class__
        fields = _FIELDS.get((cls, False))  # type: ignore[call-overload]
        if fields is None:
            fields = _fields(cls, ops=False)
        for f in fields:
            v = getattr(n, f)
            if v.__class__ is list:
                extend([c for c in v if isinstance(c, node_cls)])
            elif isinstance(v, node_cls):
                append(v)
    return out


_CHILDREN: dict[type, tuple[str, ...]] = {}  # class -> `child_fields` (none for None or a string)


def nodes_of(roots: Iterable[object], classes: frozenset[type]) -> list[ast.AST]:
    """The nodes of `classes` in and below `roots` (nodes, or the items of a node's list field:
    None and strings are passed over; operators and contexts are not walked), in no promised
    order: the one walk of the searches over every node (a stack, each class's fields found
    once), for the front end's and the checker's name and lambda searches."""
    out: list[ast.AST] = []
    todo = list(roots)
    pop, push, extend, append = todo.pop, todo.append, todo.extend, out.append
    known = _CHILDREN
    while todo:
        n = pop()
        cls = n.__class__
        if cls in classes:
            append(n)  # type: ignore[arg-type]
        try:
            fields = known[cls]
        except KeyError:  # a class seen for the first time (None and str: no fields)
            fields = known[cls] = child_fields(cls)
        for f in fields:
            v = getattr(n, f)
            if v.__class__ is list:
                extend(v)
            elif v is not None:
                push(v)
    return out


# node class -> its `_fields` (the order `ast.iter_child_nodes` uses, not source order) less
# the contexts and operators
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """The nodes `ast.iter_child_nodes(node)` gives, in its order, less the expression contexts
    and operators (leaf singletons): for an iterative walk over every node (syntax.py's nesting
    check), without the two generators per node `iter_child_nodes` runs."""
    cls = node.__class__
    names = _CHILD_FIELDS.get(cls)
    if names is None:
        names = _CHILD_FIELDS[cls] = tuple(f for f in getattr(cls, "_fields", ()) if f not in ("ctx", "op", "ops"))
    out: list[ast.AST] = []
    node_cls = ast.AST
    for name in names:
        v = getattr(node, name, None)
        if v.__class__ is list:
            out.extend([c for c in v if isinstance(c, node_cls)])
        elif isinstance(v, node_cls):
            out.append(v)
    return out


def walk_no_scopes(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and every node under it, not entering a nested `lambda`, `def` or `class` (the
    scope node itself is yielded)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, _SCOPES):
            continue
        stack.extend(ast.iter_child_nodes(n))


# statement class -> (its fields that are blocks of statements, its fields of handlers or cases)
_BLOCK_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def sub_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The blocks of statements nested in a statement: `body`, `orelse`, `finalbody`, and
    each `except` handler's or `match` case's body."""
    cls = stmt.__class__
    fields = _BLOCK_FIELDS.get(cls)
    if fields is None:
        own = getattr(cls, "_fields", ())
        fields = _BLOCK_FIELDS[cls] = (
            tuple(a for a in ("body", "orelse", "finalbody") if a in own),
            tuple(a for a in ("handlers", "cases") if a in own),
        )
    blocks, nested = fields
    out = [getattr(stmt, a) for a in blocks]
    for attr in nested:  # `except` handlers, `match` cases: each has a body
        out += [h.body for h in getattr(stmt, attr)]
    return out


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body and of its nested blocks, in source order (not those of
    nested functions or classes)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, _SCOPES):
            continue
        for block in sub_blocks(stmt):
            yield from statements(block)


_NAMES: dict[type, tuple[str, ...]] = {}


def visitor_methods(v: object) -> dict[str, _Fn]:
    """`visit_*`/`leave_*` methods of a visitor, found once per class."""
    cls = type(v)
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(
            n for n in dir(cls) if n.startswith(("visit_", "leave_")) and callable(getattr(cls, n))
        )
    return {n: getattr(v, n) for n in names}




def walk_batched(
    root: ast.AST, visitors: Iterable[object], on_statement: Callable[[int], None] | None = None
) -> None:
    methods: dict[str, list[_Fn]] = {}
    for v in visitors:
        for name, fn in visitor_methods(v).items():
            methods.setdefault(name, []).append(fn)
    body_in = tuple(methods.get("visit_FunctionBody", ()))
    body_out = tuple(methods.get("leave_FunctionBody", ()))
    ops = any(name.partition("_")[2] in _OP_CLASSES for name in methods)
    # classes not entered: leaf classes no visitor asks about, and the values of fields that
    # hold no node (None, a name's string, `AnnAssign.simple`, `MatchSingleton.value`)
    skip = frozenset(
        [c for c in _LEAVES if f"visit_{c.__name__}" not in methods and f"leave_{c.__name__}" not in methods]
        + [type(None), str, int, bool]
    )
    # node class -> its walk (`_walker`: the class's visits, fields and leaves written out)
    table: dict[type, Callable[[ast.AST], None]] = {}

    def make(cls: type) -> Callable[[ast.AST], None]:
        name = cls.__name__
        if name.startswith("Async"):  # `async def/for/with` reach the plain node's methods, as in libcst
            name = name[5:]
        is_fn = name == "FunctionDef"
        fields = _fields(cls, ops)
        if is_fn:  # its body is walked last, between `visit_FunctionBody` and `leave_FunctionBody`
            assert fields[-1] == "body", fields
            fields = fields[:-1]
        visits, leaves = tuple(methods.get("visit_" + name, ())), tuple(methods.get("leave_" + name, ()))
        factory = _walker(fields, len(visits), len(leaves), is_fn)
        go = table[cls] = factory(table, make, skip, body_in, body_out, *visits, *leaves)
        return go

    def go(node: ast.AST) -> None:
        (table.get(node.__class__) or make(node.__class__))(node)

    if on_statement is None or not isinstance(root, ast.Module):
        go(root)
        return
    visits = methods.get("visit_Module", ())
    leaves = methods.get("leave_Module", ())
    for fn in visits:
        fn(root)
    for i, stmt in enumerate(root.body):
        on_statement(i)
        go(stmt)
    for fn in leaves:
        fn(root)


# (fields, visits, leaves, is a def) -> the factory of a node class's walk in `walk_batched`
_WALKERS: dict[tuple[tuple[str, ...], int, int, bool], Callable[..., Callable[[ast.AST], None]]] = {}
# (number of fields, visits, leaves, is a def) -> the factory's code, its fields named `_az_f0_`...
_SHAPES: dict[tuple[int, int, int, bool], CodeType] = {}


def _walker(fields: tuple[str, ...], n_visits: int, n_leaves: int, is_fn: bool) -> Callable[..., Callable[[ast.AST], None]]:
    """The walk of one node class, written out: its visitors' calls, then each child field
    (a list's items, or the node), then a def's body between the body events, then its
    leaves -- the order of the generic loop it replaced, without the loop over the class's
    fields, a `getattr` a field and the empty loops, at every node of a module.  Its code is
    compiled once per shape (how many fields, visitors, leaves) for the process, the fields'
    names then put into the code object; the walk itself is made per `walk_batched`."""
    key = (fields, n_visits, n_leaves, is_fn)
    hit = _WALKERS.get(key)
    if hit is not None:
        return hit
    shape = (len(fields), n_visits, n_leaves, is_fn)
    code = _SHAPES.get(shape)
    if code is None:
        code = _SHAPES[shape] = _walker_code(*shape)
    inner = next(c for c in code.co_consts if isinstance(c, CodeType))
    names = tuple(fields[int(n[5:-1])] if n.startswith("_az_f") else n for n in inner.co_names)
    inner = inner.replace(co_names=names, co_name=f"walk_{'_'.join(fields) or 'leaf'}")
    code = code.replace(co_consts=tuple(inner if isinstance(c, CodeType) else c for c in code.co_consts))
    hit = _WALKERS[key] = FunctionType(code, {"list": list})
    return hit


def _walker_code(n_fields: int, n_visits: int, n_leaves: int, is_fn: bool) -> CodeType:
    vs = [f"v{i}" for i in range(n_visits)]
    ls = [f"l{i}" for i in range(n_leaves)]
    lines = [f"def factory(table, make, skip, body_in, body_out{''.join(', ' + a for a in vs + ls)}):", "    get = table.get",
             "    def go(node):"]
    body = [f"{v}(node)" for v in vs]
    for i in range(n_fields):
        body += [
            f"c = node._az_f{i}_",
            "if c.__class__ is list:",
            "    for c in c:",
            "        if c.__class__ not in skip:",
            "            (get(c.__class__) or make(c.__class__))(c)",
            "elif c.__class__ not in skip:",
            "    (get(c.__class__) or make(c.__class__))(c)",
        ]
    if is_fn:
        body += [
            "for f in body_in:",
            "    f(node)",
            "for c in node.body:",
            "    (get(c.__class__) or make(c.__class__))(c)",
            "for f in body_out:",
            "    f(node)",
        ]
    body += [f"{v}(node)" for v in ls]
    lines += ["        " + b for b in body or ["pass"]]
    lines.append("    return go")
    module = compile("\n".join(lines), "<anodize walk>", "exec")
    return next(c for c in module.co_consts if isinstance(c, CodeType))

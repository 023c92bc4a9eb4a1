"""Qualified names for the names and attribute chains of one module, scope by scope.

    names = Names(tree)
    names.qualnames(node)        # ("anodize.thread.index_1d",) for `az.thread.index_1d`
    names.function_locals(fn)    # the names a function binds (its parameters included)

The rules ask what a name or a dotted chain refers to, whatever its spelling:
`import anodize as az`, `from anodize import DisjointSlice as DS`,
`from anodize import thread`, `import anodize.thread as t`.  This resolver follows
Python's scoping: a name bound anywhere in a function (parameters, assignments,
loop and `with` targets, imports, nested `def`/`class`, `:=`) is local to it unless
declared `global`/`nonlocal`; class bodies do not enclose their methods;
comprehensions and lambdas have their own scopes; whatever no scope binds is a
builtin or unknown.  What a name may be is every binding of it in the scope that
owns it, as qualified names:

- an import: the imported module or object (`anodize.types.Slice`, `.sibling.k`
  for relative imports);
- a module-level `def`, `class` or assignment: the bare name (`vecadd`);
- a local of function `f`: `f.<locals>.x`;
- a builtin: `builtins.range`.

A chain `a.b.c` is `a`'s names with `.b.c` appended; `f().x` and `f[i].x` are named like `f.x`
(both as libcst's QualifiedNameProvider names them: tests/checker/test_syntax_names.py
holds the two to the same answers over every fixture and example).  Resolution is computed for a
scope on first use, so a module whose rules never ask costs one walk of its
statements.
"""

from __future__ import annotations

import ast
import bisect
import builtins
from collections.abc import Iterable, Iterator

__all__ = ["Names"]

_BUILTINS = frozenset(dir(builtins))
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Scope:
    __slots__ = ("node", "kind", "parent", "prefix", "bindings", "globals", "nonlocals")

    def __init__(self, node: ast.AST, kind: str, parent: _Scope | None, prefix: str) -> None:
        self.node = node
        self.kind = kind  # module | function | class | comprehension
        self.parent = parent
        self.prefix = prefix
        self.bindings: dict[str, list[str]] = {}  # name -> qualified names it may be
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()

    def bind(self, name: str, qual: str) -> None:
        quals = self.bindings.setdefault(name, [])
        if qual not in quals:
            quals.append(qual)


class Names:
    def __init__(self, tree: ast.Module, source: str | None = None) -> None:
        self.tree = tree
        # without `:=` in the source no expression binds a name (skips a walk of every expression)
        self.walrus = source is None or ":=" in source
        self.module = _Scope(tree, "module", None, "")
        self._scope_of: dict[int, _Scope] = {}  # id(scope node) -> its scope (built on demand)
        self._owner: dict[int, _Scope] = {}  # id(name node) -> the scope it is read in
        self._bind_scope(self.module, tree.body)
        self._indexed: set[int] = set()
        # where each top-level statement starts (its first decorator's line), to find the
        # statement that holds a node and index only that one
        self._starts = [_first_line(s) for s in tree.body]

    # -- queries ----------------------------------------------------------------------------
    def qualnames(self, node: ast.AST) -> tuple[str, ...]:
        """Every qualified name a `Name` or a chain of attributes over one may have."""
        if isinstance(node, ast.Attribute):
            value = node.value
            while isinstance(value, (ast.Call, ast.Subscript)):  # `f().x`, `f[i].x`: named after `f`, as libcst does
                value = value.func if isinstance(value, ast.Call) else value.value
            base = self.qualnames(value)
            return tuple(f"{b}.{node.attr}" for b in base)
        if not isinstance(node, ast.Name):
            return ()
        scope = self._owner.get(id(node))
        if scope is None:
            i = bisect.bisect_right(self._starts, getattr(node, "lineno", 0)) - 1
            if i < 0:
                return ()
            self.index(self.tree.body[i])
            scope = self._owner.get(id(node))
            if scope is None:
                return ()
        return self._lookup(node.id, scope)

    def function_locals(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
        scope = self._scope_of.get(id(fn))
        if scope is None:
            i = bisect.bisect_right(self._starts, fn.lineno) - 1
            if i >= 0:
                self.index(self.tree.body[i])
            scope = self._scope(fn)
        return frozenset(n for n in scope.bindings if n not in scope.globals and n not in scope.nonlocals)

    def index(self, root: ast.AST) -> None:
        """Record the scope every name below `root` (a module-level statement) is read in."""
        if id(root) in self._indexed:
            return
        self._indexed.add(id(root))
        self._index(root, self.module)

    # -- scopes -----------------------------------------------------------------------------
    def _lookup(self, name: str, scope: _Scope) -> tuple[str, ...]:
        s: _Scope | None = scope
        first = True
        while s is not None:
            if s.kind == "class" and not first:
                s = s.parent  # a class body does not enclose what is nested in it
                continue
            if name in s.globals:
                s = self.module
                first = False
                continue
            if name in s.bindings and name not in s.nonlocals:
                return tuple(s.bindings[name])
            s = s.parent
            first = False
        return (f"builtins.{name}",) if name in _BUILTINS else ()

    def _scope(self, node: ast.AST) -> _Scope:
        hit = self._scope_of.get(id(node))
        if hit is None:
            raise KeyError(node)
        return hit

    def _new_scope(self, node: ast.AST, parent: _Scope) -> _Scope:
        if isinstance(node, ast.ClassDef):
            scope = _Scope(node, "class", parent, f"{parent.prefix}{node.name}.")
            self._scope_of[id(node)] = scope
            self._bind_scope(scope, node.body)
            return scope
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = _Scope(node, "function", parent, f"{parent.prefix}{node.name}.<locals>.")
            self._scope_of[id(node)] = scope
            for a in _params(node.args):
                scope.bind(a.arg, scope.prefix + a.arg)
            self._bind_scope(scope, node.body)
            return scope
        if isinstance(node, ast.Lambda):
            scope = _Scope(node, "function", parent, f"{parent.prefix}<locals>.")
            self._scope_of[id(node)] = scope
            for a in _params(node.args):
                scope.bind(a.arg, scope.prefix + a.arg)
            self._bind_expr(scope, node.body)
            return scope
        # a comprehension
        scope = _Scope(node, "comprehension", parent, f"{parent.prefix}<comprehension>.")
        self._scope_of[id(node)] = scope
        for gen in node.generators:  # type: ignore[attr-defined]
            for name in _target_names(gen.target):
                scope.bind(name, scope.prefix + name)
        return scope

    def _bind_scope(self, scope: _Scope, body: Iterable[ast.stmt]) -> None:
        """Record what the statements of one scope bind (not descending into nested scopes)."""
        for stmt in body:
            self._bind_stmt(scope, stmt)

    def _bind_stmt(self, scope: _Scope, stmt: ast.stmt) -> None:
        q = scope.prefix
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope.bind(stmt.name, q + stmt.name)
            return
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    scope.bind(a.asname, a.name)
                else:
                    top = a.name.split(".")[0]
                    scope.bind(top, top)
            return
        if isinstance(stmt, ast.ImportFrom):
            mod = "." * (stmt.level or 0) + (stmt.module or "")
            for a in stmt.names:
                if a.name == "*":
                    continue
                full = f"{mod}.{a.name}" if mod and not mod.endswith(".") else f"{mod}{a.name}"
                scope.bind(a.asname or a.name, full)
            return
        if isinstance(stmt, ast.Global):
            scope.globals.update(stmt.names)
            return
        if isinstance(stmt, ast.Nonlocal):
            scope.nonlocals.update(stmt.names)
            return
        for node in _stmt_targets(stmt):
            for name in _target_names(node):
                scope.bind(name, q + name)
        if self.walrus:
            # `:=` targets anywhere in this statement's expressions (not in nested scopes) bind here
            for sub in _own_exprs(stmt):
                for n in _walk_no_scopes(sub):
                    if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                        scope.bind(n.target.id, q + n.target.id)
        for block in _sub_blocks(stmt):
            self._bind_scope(scope, block)

    def _bind_expr(self, scope: _Scope, expr: ast.expr) -> None:
        if not self.walrus:
            return
        for n in _walk_no_scopes(expr):
            if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                scope.bind(n.target.id, scope.prefix + n.target.id)

    def _index(self, root: ast.AST, scope: _Scope) -> None:
        owner = self._owner
        fields = _CHILD_FIELDS
        Name, Constant = ast.Name, ast.Constant

        def go(n: ast.AST, s: _Scope) -> None:
            cls = n.__class__
            if cls is Name:
                owner[id(n)] = s
                return
            if cls is Constant:
                return
            if cls in _SCOPE_CLASSES:
                self._enter(n, s, go)
                return
            f = fields.get(cls)
            if f is None:
                f = fields[cls] = tuple(x for x in cls._fields if x not in ("ctx", "type_comment"))  # type: ignore[attr-defined]
            for name in f:
                v = getattr(n, name, None)
                if v is None:
                    continue
                if v.__class__ is list:
                    for c in v:
                        if c is not None and not isinstance(c, str):
                            go(c, s)
                elif isinstance(v, ast.AST):
                    go(v, s)

        go(root, scope)

    def _enter(self, n: ast.AST, s: _Scope, go: object) -> None:
        """Index a nested scope: what it reads in the enclosing scope, then its own body."""
        visit = go  # type: ignore[assignment]
        inner = self._scope_of.get(id(n)) or self._new_scope(n, s)
        if isinstance(n, ast.Lambda):
            for x in (*n.args.defaults, *(d for d in n.args.kw_defaults if d)):
                visit(x, s)  # type: ignore[operator]
            visit(n.body, inner)  # type: ignore[operator]
            return
        if isinstance(n, ast.ClassDef):
            for x in (*n.decorator_list, *n.bases, *n.keywords):
                visit(x, s)  # type: ignore[operator]
            for x in n.body:
                visit(x, inner)  # type: ignore[operator]
            return
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args
            outer: list[ast.AST] = [*n.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d)]
            outer += [p.annotation for p in _params(a) if p.annotation is not None]
            if n.returns is not None:
                outer.append(n.returns)
            for x in outer:
                visit(x, s)  # type: ignore[operator]
            for x in n.body:
                visit(x, inner)  # type: ignore[operator]
            return
        gens = n.generators  # type: ignore[attr-defined]
        visit(gens[0].iter, s)  # type: ignore[operator]  # the first iterable is evaluated outside
        for i, g in enumerate(gens):
            visit(g.target, inner)  # type: ignore[operator]
            if i:
                visit(g.iter, inner)  # type: ignore[operator]
            for c in g.ifs:
                visit(c, inner)  # type: ignore[operator]
        if isinstance(n, ast.DictComp):
            visit(n.key, inner)  # type: ignore[operator]
            visit(n.value, inner)  # type: ignore[operator]
        else:
            visit(n.elt, inner)  # type: ignore[operator]


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_SCOPE_CLASSES = frozenset((ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, *_COMPS))


def _first_line(stmt: ast.stmt) -> int:
    decos = getattr(stmt, "decorator_list", None)
    return min([stmt.lineno, *(d.lineno for d in decos)]) if decos else stmt.lineno


def _params(a: ast.arguments) -> list[ast.arg]:
    out = [*a.posonlyargs, *a.args]
    if a.vararg:
        out.append(a.vararg)
    out += a.kwonlyargs
    if a.kwarg:
        out.append(a.kwarg)
    return out


def _target_names(t: ast.AST) -> Iterator[str]:
    if isinstance(t, ast.Name):
        yield t.id
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _target_names(e)
    elif isinstance(t, ast.Starred):
        yield from _target_names(t.value)


def _stmt_targets(stmt: ast.stmt) -> list[ast.AST]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        # `x: int` with no value still makes `x` local
        return [stmt.target]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.target]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    if isinstance(stmt, ast.Delete):
        return list(stmt.targets)
    if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
        return [ast.Name(id=h.name) for h in stmt.handlers if h.name]  # type: ignore[attr-defined]
    if type(stmt).__name__ == "Match":
        out: list[ast.AST] = []
        for case in stmt.cases:  # type: ignore[attr-defined]
            for p in ast.walk(case.pattern):
                name = getattr(p, "name", None) or getattr(p, "rest", None)
                if isinstance(name, str):
                    out.append(ast.Name(id=name))
        return out
    return []


def _sub_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    out = []
    for attr in ("body", "orelse", "finalbody"):
        b = getattr(stmt, attr, None)
        if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
            out.append(b)
    for h in getattr(stmt, "handlers", ()) or ():
        out.append(h.body)
    for case in getattr(stmt, "cases", ()) or ():
        out.append(case.body)
    return out


def _own_exprs(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions of a statement itself (not of its nested blocks)."""
    out: list[ast.AST] = []
    for name, value in ast.iter_fields(stmt):
        if name in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        if isinstance(value, ast.AST):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, ast.AST))
    return out


def _walk_no_scopes(node: ast.AST) -> Iterator[ast.AST]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(n))

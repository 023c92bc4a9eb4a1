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
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from anodize.language.syntax import line_offsets
from anodize.language.walk import child_fields, nodes_of, sub_blocks, walk_no_scopes

__all__ = ["Names"]

_BUILTINS = frozenset(dir(builtins))
_UNSEEN: Any = object()  # "not computed yet" in a cache whose answers may be None
# the keywords that may start a scope, as whole words: a keyword may follow a number (`1for`,
# `1jfor`), never another ASCII letter or `_`; any other neighbour is taken for a keyword's
# (too careful at worst)
_SCOPE_WORDS = re.compile(r"(?<![A-IK-Za-ik-z_])(?:lambda|for|class|def)(?![A-Za-z0-9_])")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Scope:
    __slots__ = ("node", "kind", "parent", "prefix", "bindings", "globals", "nonlocals", "resolved")

    def __init__(self, node: ast.AST, kind: str, parent: _Scope | None, prefix: str) -> None:
        self.node = node
        self.kind = kind  # module | function | class | comprehension
        self.parent = parent
        self.prefix = prefix
        self.bindings: dict[str, list[str]] = {}  # name -> qualified names it may be
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.resolved: dict[str, tuple[str, ...]] = {}  # name -> what `Names._lookup` found for it here

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
        self._starts = [first_line(s) for s in tree.body]
        self.source = source
        self._line_starts: list[int] | None = None  # offset of each line in `source` (on demand)
        # id(top-level statement) -> None, or (`_flat_lambdas`, its body's start, its body's end)
        self._flat: dict[int, tuple[tuple[ast.Lambda, ...], tuple[int, int], tuple[int, int]] | None] = {}

    # -- queries ----------------------------------------------------------------------------
    def qualnames(self, node: ast.AST) -> tuple[str, ...]:
        """Every qualified name a `Name` or a chain of attributes over one may have."""
        cls = node.__class__
        if cls is ast.Attribute:
            value = node.value  # type: ignore[attr-defined]
            while isinstance(value, (ast.Call, ast.Subscript)):  # `f().x`, `f[i].x`: named after `f`, as libcst does
                value = value.func if isinstance(value, ast.Call) else value.value
            base = self.qualnames(value)
            attr = "." + node.attr  # type: ignore[attr-defined]
            if len(base) == 1:  # (the common case, without a comprehension's frame)
                return (base[0] + attr,)
            return tuple([b + attr for b in base])
        if cls is not ast.Name:
            return ()
        scope = self._owner.get(id(node))
        if scope is None:
            i = bisect.bisect_right(self._starts, getattr(node, "lineno", 0)) - 1
            if i < 0:
                return ()
            top = self.tree.body[i]
            scope = self._scope_by_position(node, top)
            if scope is not None:
                self._owner[id(node)] = scope  # (a chain's base is asked again for the chain)
            else:
                self.index(top)
                scope = self._owner.get(id(node))
                if scope is None:
                    return ()
        name = node.id  # type: ignore[attr-defined]
        hit = scope.resolved.get(name)
        return self._lookup(name, scope) if hit is None else hit

    def function_locals(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
        scope = self._scope_of.get(id(fn))
        if scope is None:
            i = bisect.bisect_right(self._starts, fn.lineno) - 1
            if i >= 0 and self.tree.body[i] is fn and self._is_flat(fn):
                scope = self._new_scope(fn, self.module)  # its bindings, without an index
            else:
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

    # -- flat functions ---------------------------------------------------------------------
    def _scope_by_position(self, node: ast.AST, top: ast.stmt) -> _Scope | None:
        """The scope of a name in a "flat" top-level function (see `_flat_lambdas`), found from
        its position without indexing the function, as `_enter` would index it: the function's
        own scope in its body, a decorator lambda's in that lambda's body, the module's in the
        rest of its decorators and signature.  None for any other statement, or a position past
        the function's end."""
        flat = self._flat.get(id(top), _UNSEEN)
        if flat is _UNSEEN:
            self._flat_lambdas(top)
            flat = self._flat[id(top)]
        if flat is None:
            return None
        lambdas, body_start, body_end = flat
        pos = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
        if pos >= body_end:
            return None
        if pos >= body_start:
            return self._scope_of.get(id(top)) or self._new_scope(top, self.module)
        for lam in lambdas:
            b = lam.body
            if (b.lineno, b.col_offset) <= pos < (b.end_lineno, b.end_col_offset):
                return self._scope_of.get(id(lam)) or self._new_scope(lam, self.module)
        return self.module

    def _is_flat(self, top: ast.stmt) -> bool:
        return self._flat_lambdas(top) is not None

    def _flat_lambdas(self, top: ast.stmt) -> tuple[ast.Lambda, ...] | None:
        """For a top-level `def` whose only nested scopes are lambdas in its decorators (none
        nested in another), those lambdas; None for any other statement.  Its text (decorators
        to end, whole lines: a superset of its source, so this is only ever too careful) has no
        `class` nor a second `def`, even in a string or a comment, no `lambda` but those of the
        decorators, and no `for` but the keywords of its `for` statements: no comprehension."""
        known = self._flat.get(id(top), _UNSEEN)
        if known is not _UNSEEN:
            return None if known is None else known[0]  # type: ignore[no-any-return]
        flat: tuple[ast.Lambda, ...] | None = None
        if (
            self.source is not None
            and top.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef)
            and not getattr(top, "type_params", None)
            and top.body  # type: ignore[attr-defined]
        ):
            starts = self._line_starts
            if starts is None:
                starts = self._line_starts = line_offsets(self.source)
            first, end = first_line(top), top.end_lineno or top.lineno
            if 0 < first and end < len(starts):  # whole lines, by the parser's own line breaks
                text = self.source[starts[first - 1] : starts[end]]
                words = None
                if text.count("def") == 1 and "class" not in text:
                    # a quicker test for what the word search below would find: a word's count
                    # is at most its count as a substring, and the keyword of each `for`
                    # statement and each decorator lambda is a word, so where the substrings
                    # already add up, the words do
                    n_for, n_lambda = text.count("for"), text.count("lambda")
                    if not n_for or n_for == _for_statements(top.body):  # type: ignore[attr-defined]
                        lambdas = _lambdas(top.decorator_list) if n_lambda else ()  # type: ignore[attr-defined]
                        if n_lambda == len(lambdas) and not _nested(lambdas):
                            flat = lambdas
                if flat is None:
                    words = _SCOPE_WORDS.findall(text)
                if (
                    words is not None
                    and words.count("def") == 1  # its own
                    and "class" not in words
                    # every `for` the keyword of a `for` statement
                    and ("for" not in words or words.count("for") == _for_statements(top.body))  # type: ignore[attr-defined]
                ):
                    lambdas = _lambdas(top.decorator_list) if "lambda" in words else ()  # type: ignore[attr-defined]
                    if words.count("lambda") == len(lambdas) and not _nested(lambdas):
                        flat = lambdas
        if flat is None:
            self._flat[id(top)] = None
        else:
            first_stmt, last_stmt = top.body[0], top.body[-1]  # type: ignore[attr-defined]
            self._flat[id(top)] = (
                flat,
                (first_stmt.lineno, first_stmt.col_offset),  # where its body starts
                (last_stmt.end_lineno, last_stmt.end_col_offset),  # and ends
            )
        return flat

    # -- scopes -----------------------------------------------------------------------------
    def _lookup(self, name: str, scope: _Scope) -> tuple[str, ...]:
        # a scope's bindings are complete once it exists, so its answers are kept
        hit = scope.resolved.get(name)
        if hit is None:
            hit = scope.resolved[name] = self._resolve(name, scope)
        return hit

    def _resolve(self, name: str, scope: _Scope) -> tuple[str, ...]:
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
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            owner = "" if isinstance(node, ast.Lambda) else f"{node.name}."  # `<locals>.x` / `f.<locals>.x`
            scope = _Scope(node, "function", parent, f"{parent.prefix}{owner}<locals>.")
            self._scope_of[id(node)] = scope
            for a in _params(node.args):
                scope.bind(a.arg, scope.prefix + a.arg)
            if isinstance(node, ast.Lambda):
                if self.walrus:
                    self._bind_walrus(scope, [node.body])
            else:
                self._bind_scope(scope, node.body)
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
        q = scope.prefix
        for stmt in body:
            cls = stmt.__class__
            if cls is ast.Assign:  # the most common statement: its targets here
                for t in stmt.targets:  # type: ignore[attr-defined]
                    if t.__class__ is ast.Name:
                        scope.bind(t.id, q + t.id)
                    else:
                        _bind_target(scope, t)
            elif cls not in _NO_TARGETS:
                self._bind_stmt(scope, stmt)
                continue
            if self.walrus:  # an assignment, or a statement with neither targets nor blocks
                self._bind_walrus(scope, _own_exprs(stmt))

    def _bind_stmt(self, scope: _Scope, stmt: ast.stmt) -> None:
        if stmt.__class__ in _DECLARING:
            self._bind_declaration(scope, stmt)
            return
        for node in _stmt_targets(stmt):
            _bind_target(scope, node)
        if self.walrus:
            self._bind_walrus(scope, _own_exprs(stmt))
        for block in sub_blocks(stmt):
            self._bind_scope(scope, block)

    def _bind_walrus(self, scope: _Scope, exprs: Iterable[ast.AST]) -> None:
        """`:=` targets anywhere in these expressions (not in nested scopes) bind here."""
        q = scope.prefix
        for sub in exprs:
            for n in walk_no_scopes(sub):
                if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                    scope.bind(n.target.id, q + n.target.id)

    def _bind_declaration(self, scope: _Scope, stmt: ast.stmt) -> None:
        """A `def`, `class`, `import`, `global` or `nonlocal` statement."""
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

    def _index(self, root: ast.AST, scope: _Scope) -> None:
        owner = self._owner
        fields = _CHILD_FIELDS
        Name, NoneType = ast.Name, type(None)
        enter = self._enter

        def go(todo: list[ast.AST | None], s: _Scope) -> None:
            """Record `s` as the scope of every name in the nodes of `todo` (a list it uses up),
            down to the nested scopes, which `_enter` indexes.  A loop with a stack, not a call
            per node: this walk visits every node of every statement a rule asks about."""
            pop, push, extend = todo.pop, todo.append, todo.extend
            while todo:
                n = pop()
                cls = n.__class__
                if cls is Name:
                    owner[id(n)] = s
                    continue
                f = fields.get(cls)
                if f is None:  # a nested scope, or a class seen for the first time
                    if cls in _SCOPE_CLASSES:
                        enter(n, s, go)  # type: ignore[arg-type]
                        continue
                    f = fields[cls] = child_fields(cls)
                for name in f:
                    v = getattr(n, name)
                    c = v.__class__
                    if c is Name:
                        owner[id(v)] = s
                    elif c is list:
                        extend(v)  # `None` and `str` items have no fields: popped, then dropped
                    elif c is not NoneType:
                        push(v)

        go([root], scope)

    def _enter(self, n: ast.AST, s: _Scope, go: Callable[[list[ast.AST | None], _Scope], None]) -> None:
        """Index a nested scope: what it reads in the enclosing scope, then its own body."""
        inner = self._scope_of.get(id(n)) or self._new_scope(n, s)
        if isinstance(n, ast.Lambda):
            go([*n.args.defaults, *n.args.kw_defaults], s)
            go([n.body], inner)
            return
        if isinstance(n, ast.ClassDef):
            go([*n.decorator_list, *n.bases, *n.keywords], s)
            go(list(n.body), inner)
            return
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args
            outer: list[ast.AST | None] = [*n.decorator_list, *a.defaults, *a.kw_defaults]
            outer += [p.annotation for p in _params(a) if p.annotation is not None]
            if n.returns is not None:
                outer.append(n.returns)
            go(outer, s)
            go(list(n.body), inner)
            return
        gens = n.generators  # type: ignore[attr-defined]
        go([gens[0].iter], s)  # the first iterable is evaluated outside
        own: list[ast.AST | None] = []
        for i, g in enumerate(gens):
            own.append(g.target)
            if i:
                own.append(g.iter)
            own += g.ifs
        if isinstance(n, ast.DictComp):
            own += (n.key, n.value)
        else:
            own.append(n.elt)  # type: ignore[attr-defined]
        go(own, inner)


_SCOPE_CLASSES = frozenset((ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, *_COMPS))
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}  # node class -> `child_fields`, never a scope class


def _lambdas(exprs: list[ast.expr]) -> tuple[ast.Lambda, ...]:
    """Every lambda in the expressions (also in other lambdas)."""
    return tuple(n for n in nodes_of(exprs, _LAMBDA) if isinstance(n, ast.Lambda))


_LAMBDA = frozenset((ast.Lambda,))


def _nested(lambdas: tuple[ast.Lambda, ...]) -> bool:
    """Whether one of the lambdas lies in another (by their source ranges)."""
    spans = [((x.lineno, x.col_offset), (x.end_lineno or 0, x.end_col_offset or 0)) for x in lambdas]
    return any(a[0] <= b[0] and b[1] <= a[1] for i, a in enumerate(spans) for j, b in enumerate(spans) if i != j)


def _for_statements(body: list[ast.stmt]) -> int:
    """How many `for` statements a body holds, in all its blocks."""
    n = 0
    todo = list(body)
    while todo:
        stmt = todo.pop()
        if stmt.__class__ is ast.For or stmt.__class__ is ast.AsyncFor:
            n += 1
        for block in sub_blocks(stmt):
            todo += block
    return n


def first_line(stmt: ast.stmt) -> int:
    """A statement's first line: its first decorator's, where it has one."""
    decos = getattr(stmt, "decorator_list", None)
    line: int = stmt.lineno
    if decos:
        for d in decos:
            if d.lineno < line:
                line = d.lineno
    return line


def _params(a: ast.arguments) -> list[ast.arg]:
    out = [*a.posonlyargs, *a.args]
    if a.vararg:
        out.append(a.vararg)
    out += a.kwonlyargs
    if a.kwarg:
        out.append(a.kwarg)
    return out


def _bind_target(scope: _Scope, t: ast.AST) -> None:
    """Bind the names an assignment target assigns (as `_target_names` lists them)."""
    if t.__class__ is ast.Name:
        scope.bind(t.id, scope.prefix + t.id)  # type: ignore[attr-defined]
    else:
        for name in _target_names(t):
            scope.bind(name, scope.prefix + name)


def _target_names(t: ast.AST) -> Iterator[str]:
    if isinstance(t, ast.Name):
        yield t.id
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _target_names(e)
    elif isinstance(t, ast.Starred):
        yield from _target_names(t.value)


def _stmt_targets(stmt: ast.stmt) -> list[ast.AST]:
    cls = stmt.__class__
    if cls is ast.Assign or cls is ast.Delete:
        return stmt.targets  # type: ignore[attr-defined,no-any-return]
    if cls in _ONE_TARGET:
        # `x: int` with no value still makes `x` local
        return [stmt.target]  # type: ignore[attr-defined]
    if cls is ast.With or cls is ast.AsyncWith:
        return [i.optional_vars for i in stmt.items if i.optional_vars is not None]  # type: ignore[attr-defined]
    if cls is ast.Try or cls.__name__ == "TryStar":
        return [ast.Name(id=h.name) for h in stmt.handlers if h.name]  # type: ignore[attr-defined]
    if cls.__name__ == "Match":
        out: list[ast.AST] = []
        for case in stmt.cases:  # type: ignore[attr-defined]
            for p in ast.walk(case.pattern):
                name = getattr(p, "name", None) or getattr(p, "rest", None)
                if isinstance(name, str):
                    out.append(ast.Name(id=name))
        return out
    return []


# statements that bind (or declare) names without targets, and have no sub-blocks to bind in
_DECLARING = frozenset((
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal,
))
# statements that bind no name and hold no block (only a `:=` in them may bind)
_NO_TARGETS = frozenset((ast.Expr, ast.Return, ast.Pass, ast.Break, ast.Continue, ast.Raise, ast.Assert))
_ONE_TARGET = frozenset((ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor))




def _own_exprs(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions of a statement itself (not of its nested blocks)."""
    out: list[ast.AST] = []
    for name in child_fields(stmt.__class__):
        if name in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        value = getattr(stmt, name, None)
        if isinstance(value, ast.AST):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, ast.AST))
    return out

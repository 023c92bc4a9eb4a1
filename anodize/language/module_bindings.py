"""Which statements bind a module-level name, and to what value (read by `symbols.py`'s
`ModuleSymbols`): every binding form Python has at module level, control flow included, and the
expression a plain, annotated, chained or element-by-element unpacking assignment gives a name."""

from __future__ import annotations

import ast
from collections.abc import Iterator

__all__ = ["_bound_value", "_global_writes", "_module_bindings"]


def _targets(t: ast.AST) -> Iterator[ast.Name]:
    if isinstance(t, ast.Name):
        yield t
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _targets(e)
    elif isinstance(t, ast.Starred):
        yield from _targets(t.value)


def _module_bindings(body: list[ast.stmt]) -> Iterator[tuple[str, ast.stmt]]:
    """(name, statement) for every binding of a module-level name, control flow included."""
    for s in body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield s.name, s
            continue
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            for a in s.names:
                if a.name != "*":
                    yield (a.asname or a.name.split(".")[0]), s
            continue
        if isinstance(s, ast.Assign):
            for t in s.targets:
                for n in _targets(t):
                    yield n.id, s
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            for n in _targets(s.target):
                yield n.id, s
        elif isinstance(s, ast.AugAssign):
            for n in _targets(s.target):
                yield n.id, s
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                for n in _targets(t):
                    yield n.id, s
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            for n in _targets(s.target):
                yield n.id, s
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                if item.optional_vars is not None:
                    for n in _targets(item.optional_vars):
                        yield n.id, s
        if isinstance(s, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
            for block in ("body", "orelse", "finalbody"):
                yield from _module_bindings(getattr(s, block, []))
            for h in getattr(s, "handlers", []):
                if h.name:
                    yield h.name, h  # type: ignore[misc]
                yield from _module_bindings(h.body)
        for sub in ast.walk(s) if not isinstance(s, (ast.If, ast.For, ast.While, ast.With, ast.Try)) else ():
            if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                yield sub.target.id, s


def _global_writes(tree: ast.Module) -> Iterator[tuple[str, ast.stmt]]:
    """Names a function declares `global` (it may rebind them whenever it runs)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            for n in node.names:
                yield n, node


def _bound_value(s: ast.Assign | ast.AnnAssign, name: str) -> ast.expr | None:
    """The expression a module-level assignment binds `name` to: `N = 8`, `N: Final = 8`,
    `N: int = 8`, `M = N = 8` (each target), `BM, BN = 64, 32` (element by element); None
    when it binds `name` to a part of a value (`BM, BN = dims`)."""
    if isinstance(s, ast.AnnAssign):
        return s.value if isinstance(s.target, ast.Name) and s.target.id == name else None
    for t in s.targets:
        got = _match_target(t, s.value, name)
        if got is not None:
            return got
    return None


def _match_target(t: ast.expr, v: ast.expr, name: str) -> ast.expr | None:
    if isinstance(t, ast.Name):
        return v if t.id == name else None
    if isinstance(t, (ast.Tuple, ast.List)) and isinstance(v, (ast.Tuple, ast.List)) and len(t.elts) == len(v.elts):
        if any(isinstance(e, ast.Starred) for e in (*t.elts, *v.elts)):
            return None
        for te, ve in zip(t.elts, v.elts):
            got = _match_target(te, ve, name)
            if got is not None:
                return got
    return None

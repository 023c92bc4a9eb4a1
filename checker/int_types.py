"""Which expressions of a device function are integers, and of which signedness.

The shared-memory race check (barrier_intervals.py) keys block-uniform values by
their text and does integer arithmetic on them; it may only do that for
integers (a float added to a thread id rounds), and it needs the signedness of
their types to know when an index may wrap to a small value (an unsigned one may;
a signed one wraps to a negative index, out of bounds).  This is a syntactic
reading of the typer's rules (anodize/language/types.py `promote`, docs/language.md
"Types and arithmetic"), conservative where it cannot tell:

    "s"  a signed int (i32, i64: raw thread and block ids are i32)
    "u"  an unsigned int (u32, u64)
    "?"  an int of unknown signedness (weak literals, module int constants, bools)
    "f"  anything else: a float, or a value this reading cannot type (never an int symbol)

A local has the type of its first binding (in source order), as in the typer;
`rebound` names locals bound more than once or annotated, whose later values are
converted (wrapping) to that type.
"""

from __future__ import annotations

import ast

from .kernel_model import FunctionInfo, ModuleModel

_SIGNED = {"i32": "s", "i64": "s", "int": "s", "u32": "u", "u64": "u", "bool_": "?", "bool": "?"}


def combine(a: str, b: str) -> str:
    """The kind of `a op b` (promote: signed with unsigned is signed or an error; weak adopts)."""
    if a == "f" or b == "f":
        return "f"
    if a == "s" or b == "s":
        return "s"
    if a == "u" or b == "u":
        return "u"
    return "?"


class IntTypes:
    def __init__(self, model: ModuleModel, fn: FunctionInfo) -> None:
        self.m = model
        self.fn = fn
        self._locals: dict[str, str] | None = None
        self._rebound: set[str] = set()
        self._cache: dict[ast.expr, str] = {}

    # ---- locals ----------------------------------------------------------------------------
    def _bindings(self) -> dict[str, str]:
        if self._locals is not None:
            return self._locals
        self._locals = {}
        sites: list[tuple[int, int, str, ast.AST | None, str | None]] = []  # line, col, name, value, annotation kind
        for node in ast.walk(self.fn.node):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    for n in _names(t):
                        sites.append((node.lineno, node.col_offset, n, node.value if isinstance(t, ast.Name) else None, None))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                ann = self.m.qualname(node.annotation) or ""
                sites.append((node.lineno, node.col_offset, node.target.id, None, _SIGNED.get(ann.split(".")[-1], "f")))
                self._rebound.add(node.target.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                sites.append((node.lineno, node.col_offset, node.target.id, None, "f"))
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                rng = isinstance(node.iter, ast.Call) and (self.m.qualname(node.iter.func) or "") == "builtins.range"
                for n in _names(node.target):
                    sites.append((node.lineno, node.col_offset, n, None, "?" if rng else "f"))
            elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                sites.append((node.lineno, node.col_offset, node.target.id, node.value, None))
        seen: dict[str, int] = {}
        for line, col, name, value, kind in sorted(sites, key=lambda s: (s[0], s[1])):
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                self._rebound.add(name)
                continue
            if name in self.fn.params:
                self._rebound.add(name)
                continue
            self._locals[name] = kind if kind is not None else (self.kind(value) if isinstance(value, ast.expr) else "f")
        return self._locals

    def rebound(self, name: str) -> bool:
        self._bindings()
        return name in self._rebound

    # ---- expressions -----------------------------------------------------------------------
    def kind(self, node: ast.expr) -> str:
        hit = self._cache.get(node)
        if hit is None:
            hit = self._cache[node] = self._kind(node)
        return hit

    def _kind(self, node: ast.expr) -> str:
        if isinstance(node, ast.Constant):
            return "?" if isinstance(node.value, int) else "f"  # bools are ints too
        if isinstance(node, ast.Name):
            p = self.fn.params.get(node.id)
            if p is not None:
                return _SIGNED.get(p.scalar or "", "f") if p.kind == "scalar" else "f"
            if node.id in self.fn.locals:
                return self._bindings().get(node.id, "f")
            v = _module_value(self.m, node.id)
            return "?" if isinstance(v, int) else "f"
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Div):
                return "f"
            if isinstance(node.op, (ast.LShift, ast.RShift)):
                return combine(self.kind(node.left), "?")
            return combine(self.kind(node.left), self.kind(node.right))
        if isinstance(node, ast.UnaryOp):
            return "?" if isinstance(node.op, ast.Not) else self.kind(node.operand)
        if isinstance(node, (ast.Compare, ast.BoolOp)):
            return "?"
        if isinstance(node, ast.IfExp):
            return combine(self.kind(node.body), self.kind(node.orelse))
        if isinstance(node, ast.Subscript):
            base = node.value
            if isinstance(base, ast.Attribute) and base.attr == "shape":
                return "s"
            if isinstance(base, ast.Name):
                p = self.fn.params.get(base.id)
                if p is not None and p.kind == "slice":
                    return _SIGNED.get(p.scalar or "", "f")
            return "f"
        if isinstance(node, ast.Attribute):
            v = self.m.values.get(node.value)
            return "s" if v is not None and v.kind == "witness" and node.attr in ("row", "col") else "f"
        if isinstance(node, ast.Call):
            c = self.m.callees.get(node)
            if c is None:
                return "f"
            short = c.name.split(".")[-1]
            if c.kind == "cast":
                return _SIGNED.get(short, "f")
            if c.kind == "rawid":
                return "s"
            if c.kind == "witness_get":
                return "s"
            if c.kind == "builtin":
                if short == "len":
                    return "s"
                out = "?"
                for a in node.args:
                    out = combine(out, self.kind(a.value if isinstance(a, ast.Starred) else a))
                return out if not node.keywords else "f"
            if c.kind == "helper" and c.fn is not None:
                ret = c.fn.node.returns
                q = (self.m.qualname(ret) or "") if ret is not None else ""
                return _SIGNED.get(q.split(".")[-1], "f")
            return "f"
        return "f"


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _names(e)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []


def _module_value(m: ModuleModel, name: str) -> object:
    """The value of a module-level `NAME = <literal>` bound once (else None)."""
    found: list[object] = []
    for stmt in m.tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found.append(stmt.value.value if isinstance(stmt.value, ast.Constant) else None)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            found.append(None)
    return found[0] if len(found) == 1 else None

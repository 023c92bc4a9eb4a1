"""What the typer's modules share: its control-flow exceptions, operator tables and
constant folding (typer.py, typer_exprs.py, typer_calls.py)."""

from __future__ import annotations

import ast
from typing import Any

from anodize.language.diagnostics import Diagnostic
from anodize.language.types import ScalarTy
from anodize.language.walk import child_fields

__all__ = ["_Fail", "_Silent", "_BINOPS", "_CMPOPS", "_AXES_TEXT", "_wrap_int", "_fold", "_assigned"]


class _Fail(Exception):
    """A diagnostic raised from deep inside a visitor; collected per statement."""

    def __init__(self, diag: Diagnostic):
        super().__init__(diag.message)
        self.diag = diag


class _Silent(Exception):
    """An error already reported (a use of a name whose assignment failed)."""


_BINOPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


_AXES_TEXT = {2: "(row, col)", 3: "(layer, row, col)"}


def _wrap_int(v: int, ty: ScalarTy) -> int:
    bits = ty.bits
    v &= (1 << bits) - 1
    if ty.signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def _assigned(stmts: list[ast.stmt]) -> set[str]:
    """The names the statements assign (anywhere below them)."""
    out: set[str] = set()
    for s in stmts:
        out |= _stmt_assigned(s)
    return out


def _stmt_assigned(stmt: ast.stmt) -> frozenset[str]:
    """The names one statement assigns, kept on the node (whose lifetime is the module
    front's): each specialisation and helper call types the same tree, and every enclosing
    `if` and loop asks; a nested statement's names are found once, bottom up."""
    hit = getattr(stmt, "_az_assigned", None)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    out: set[str] = set()
    todo: list[object] = []
    for f in _child_fields(stmt.__class__):
        v = getattr(stmt, f)
        if v.__class__ is list:
            todo.extend(v)
        elif v is not None:
            todo.append(v)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.stmt):
            out |= _stmt_assigned(n)
            continue
        cls = n.__class__
        if cls is ast.Name:
            if n.ctx.__class__ is ast.Store:  # type: ignore[attr-defined]
                out.add(n.id)  # type: ignore[attr-defined]
            continue
        for f in _child_fields(cls):
            v = getattr(n, f)
            if v.__class__ is list:
                todo.extend(v)
            elif v is not None:
                todo.append(v)
    names = frozenset(out)
    stmt._az_assigned = names  # type: ignore[attr-defined]
    return names


_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = child_fields(cls)
    return fields


def _fold(op: str, a: Any, b: Any) -> Any:
    """Constant-fold two weak literals with Python's semantics; None if it cannot."""
    try:
        return {
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
            "/": lambda: a / b,
            "//": lambda: a // b,
            "%": lambda: a % b,
            "**": lambda: a**b if not (isinstance(b, int) and b < 0) else None,
            "<<": lambda: a << b if 0 <= b < 64 else None,
            ">>": lambda: a >> b if b >= 0 else None,
            "&": lambda: a & b,
            "|": lambda: a | b,
            "^": lambda: a ^ b,
            "<": lambda: a < b,
            "<=": lambda: a <= b,
            ">": lambda: a > b,
            ">=": lambda: a >= b,
            "==": lambda: a == b,
            "!=": lambda: a != b,
        }[op]()
    except (ArithmeticError, TypeError, ValueError, KeyError):
        return None

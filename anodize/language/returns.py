"""Whether control can reach the end of a statement list (a helper that returns a value must
not: falling off its end would hand the caller a value no `return` gave, a zero witness among
them, which is index 0 on every thread that gets it)."""

from __future__ import annotations

import ast

__all__ = ["may_fall_through"]


def may_fall_through(body: list[ast.stmt]) -> bool:
    """True unless every path through `body` ends in `return` (or `raise`, or a `while True:`
    loop that no `break` leaves)."""
    return all(_completes(s) for s in body)


def _completes(s: ast.stmt) -> bool:
    """May `s` complete normally (reach the statement after it)?"""
    if isinstance(s, (ast.Return, ast.Raise)):
        return False
    if isinstance(s, ast.If):
        return may_fall_through(s.body) or may_fall_through(s.orelse)
    if isinstance(s, (ast.With, ast.AsyncWith)):
        return may_fall_through(s.body)
    if isinstance(s, ast.While):
        forever = isinstance(s.test, ast.Constant) and bool(s.test.value)
        return not forever or _breaks(s.body)
    return True


def _breaks(body: list[ast.stmt]) -> bool:
    """Does a `break` in `body` leave the loop whose body it is (not an inner loop's)?"""
    for s in body:
        if isinstance(s, ast.Break):
            return True
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            if _breaks(s.orelse):
                return True
            continue
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(s, field, None)
            if isinstance(sub, list) and _breaks([x for x in sub if isinstance(x, ast.stmt)]):
                return True
        for h in getattr(s, "handlers", []) or []:
            if _breaks(h.body):
                return True
    return False

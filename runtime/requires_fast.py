"""`requires`, compiled once per launch plan into closures that read the packed launch arguments.

A launch plan knows where each parameter's values sit in the argument tuple it
hands to the launch call (a slice's `len` at one index, its `cols` at the next,
a scalar's converted value at its own), so a `requires` leaf becomes an index
into that tuple and the whole relation a few closures: no `Env`, no dicts, no
`isinstance` dispatch per launch, and never `eval`.

The compiled form only *accepts*: `check(packed)` is True when every relation
holds, and False when one fails or a side cannot be computed in i64 (overflow,
division by zero).  On False the launch takes the full path, whose evaluator
(`checker.contract.first_violation`) raises the message that names the
relation and both sides' values.  The arithmetic is the evaluator's, leaf for
leaf: literals and scalars are range-checked, every `+ - * //` result is
checked, lengths are read as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from anodize.language.contract import (
    COMPARISONS,
    I64_MAX,
    I64_MIN,
    BinOp,
    Const,
    Expr,
    Len,
    Neg,
    Param,
    Requires,
    RequiresOverflow,
    Shape,
)

__all__ = ["compile_requires", "Check"]

Check = Callable[[Sequence[Any]], bool]
_Leaf = Callable[[Sequence[Any]], int]



class _Unsupported(Exception):
    """A `requires` this compiler does not take (the full evaluator then runs every launch)."""


def _checked(v: int) -> int:
    if v < I64_MIN or v > I64_MAX:
        raise RequiresOverflow(v)
    return v


def compile_requires(
    req: Requires,
    slices: dict[str, tuple[int, int]],
    scalars: dict[str, int],
) -> Check | None:
    """A fast acceptor for `req`, or None when some leaf cannot be compiled.

    `slices[name] = (index of its first length value, rank)` and `scalars[name] = index of
    its converted value`, both into the packed argument sequence the check receives."""
    try:
        pairs: list[tuple[int, int]] = []  # `len(a) == len(c)`-style: two reads, one compare
        rels: list[tuple[Callable[[int, int], bool], _Leaf, _Leaf]] = []
        for rel in req.relations:
            lr = _read_index(rel.left, slices)
            rr = _read_index(rel.right, slices)
            if rel.op == "==" and lr is not None and rr is not None:
                pairs.append((lr, rr))
            else:
                rels.append((COMPARISONS[rel.op], _expr(rel.left, slices, scalars), _expr(rel.right, slices, scalars)))
    except _Unsupported:
        return None
    eq = tuple(pairs)
    general = tuple(rels)

    def check(packed: Sequence[Any]) -> bool:
        for i, j in eq:
            if packed[i] != packed[j]:
                return False
        if general:
            try:
                for cmp, left, right in general:
                    if not cmp(left(packed), right(packed)):
                        return False
            except (RequiresOverflow, ZeroDivisionError):
                return False
        return True

    # for callers that inline the equalities: `pairs` alone decide when `only_pairs` is True
    check.pairs = eq  # type: ignore[attr-defined]
    check.only_pairs = not general  # type: ignore[attr-defined]
    return check


def _read_index(e: Expr, slices: dict[str, tuple[int, int]]) -> int | None:
    """The packed index of a length or shape leaf (read as is, like the evaluator does)."""
    if isinstance(e, Len):
        hit = slices.get(e.param)
        return None if hit is None else hit[0]
    if isinstance(e, Shape):
        hit = slices.get(e.param)
        if hit is None or e.axis >= hit[1]:
            return None
        return hit[0] + e.axis
    return None


def _expr(e: Expr, slices: dict[str, tuple[int, int]], scalars: dict[str, int]) -> _Leaf:
    idx = _read_index(e, slices)
    if idx is not None:
        return lambda p: p[idx]  # type: ignore[no-any-return]
    if isinstance(e, (Len, Shape)):
        raise _Unsupported(e)
    if isinstance(e, Const):
        value = _checked_const(e.value)
        return lambda p: value
    if isinstance(e, Param):
        at = scalars.get(e.name)
        if at is None:
            raise _Unsupported(e)
        return lambda p: _checked(int(p[at]))
    if isinstance(e, Neg):
        inner = _expr(e.operand, slices, scalars)
        return lambda p: _checked(-inner(p))
    if isinstance(e, BinOp):
        left = _expr(e.left, slices, scalars)
        right = _expr(e.right, slices, scalars)
        if e.op == "+":
            return lambda p: _checked(left(p) + right(p))
        if e.op == "-":
            return lambda p: _checked(left(p) - right(p))
        if e.op == "*":
            return lambda p: _checked(left(p) * right(p))
        if e.op == "//":

            def floordiv(p: Sequence[Any]) -> int:
                d = right(p)
                if d == 0:
                    raise ZeroDivisionError("division by zero in `requires`")
                return _checked(left(p) // d)

            return floordiv
    raise _Unsupported(e)


def _checked_const(v: int) -> int:
    if v < I64_MIN or v > I64_MAX:
        raise _Unsupported(v)  # always overflows: let the full evaluator report it
    return v

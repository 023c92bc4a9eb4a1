"""The uniform skip of a register tile's mask (`ANODIZE_TILE_MASK_SKIP`, on by default since the H100
measured it: causal attention 0.953 -> 0.847 ms at d64, session 14 in bench/RESULTS.md; `=0`
turns it off).

`x = tile.where(cond, x, other)` of a register tile `x` leaves `x` as it is wherever `cond` holds.
Where `cond` is one comparison (`<`, `<=`, `>`, `>=`) of two integer expressions that are affine in
the element's coordinates -- `tile.arange(n)` along an axis (`[:, None]`, `[None, :]`), integer
constants, and scalars (any expression reading no tile: a loop variable, `pid.row * BM - base`)
joined by `+`, `-` and multiplication by a constant, in 64-bit signed arithmetic (32-bit where
only coordinates and constants are involved and no value can leave the type) -- the smallest
value of `lhs - rhs` over the tile is a scalar: the scalars' sum plus each axis's `min(0, coef *
(extent - 1))`.  When it is at least 0 (1 for a strict comparison) every element keeps `x`, and the
fragment loop that evaluates the mask is skipped by one uniform branch: a causal attention's
`tile.where(tile.arange(BM)[:, None] + row0 >= tile.arange(BN)[None, :] + j, s, -1e30)` pays its
compare and select only on the tiles the diagonal crosses.

The reasoning is exact integer arithmetic, so the skip also tests, at run time, that every scalar
lies within +-2**40 (with at most 8 scalars, constants within 2**56 and every coefficient, at every
subexpression, within 2**16, no value the element expression forms can wrap 64 bits); outside it
the fragment loop runs as written.

**Lazy rescale** (`ANODIZE_TILE_LAZY_RESCALE`, on by default since the H100 measured it; `=0` turns
it off): a matmul's
accumulator expression `acc * alpha` (`acc` the target, `alpha` an (M, 1) register row tile) is
skipped by a warp-uniform branch when every lane's `alpha` registers are exactly 1.0
(`vote.sync.any` of `alpha != 1.0`): `x * 1.0` is `x` for every float, so the skip changes no
bit.  An online softmax's `alpha = exp(m - m_new)` is 1.0 wherever no row maximum moved (the
recognised form skips its rescale the same way).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from anodize.language import ir
from anodize.language.ir_walk import walk
from anodize.language.tile_ir import TileArange, TileElem, TileReshape, TileTy
from anodize.language.types import BOOL, F32, I64, ScalarTy

from .compute import _bin, _c, _lt

__all__ = ["lazy_rescale", "mask_skip", "rescale_condition", "skip_condition"]

LEAF_LIMIT = 1 << 40
COEF_LIMIT = 1 << 16
MAX_LEAVES = 8


def mask_skip() -> bool:
    """`ANODIZE_TILE_MASK_SKIP` (on unless `=0`): the uniform skip (the module docstring)."""
    return os.environ.get("ANODIZE_TILE_MASK_SKIP", "1") != "0"


@dataclass(frozen=True)
class _Aff:
    """`sum(coef[a] * coord[a]) + const + sum(sign * leaf)` of a 2-D tile's element."""

    coef: tuple[int, int]
    const: int
    leaves: tuple[tuple[int, ir.Expr], ...]

    def scaled(self, k: int) -> _Aff:
        return _Aff((self.coef[0] * k, self.coef[1] * k), self.const * k, tuple((s * k, e) for s, e in self.leaves))

    def plus(self, o: _Aff) -> _Aff:
        return _Aff((self.coef[0] + o.coef[0], self.coef[1] + o.coef[1]), self.const + o.const, self.leaves + o.leaves)


def _signed_int(ty: Any) -> bool:
    return isinstance(ty, ScalarTy) and ty.is_int and ty.signed


def _reads(e: Any, names: set[str]) -> bool:
    return any(isinstance(n, ir.Local) and n.name in names for n in walk(e))


def _ok(a: _Aff | None) -> _Aff | None:
    """`a` where each of its terms is small enough that no value it (or a subexpression) takes
    wraps 64 bits (the module docstring's bounds; the constant within 2**56), else None."""
    if a is None or len(a.leaves) > MAX_LEAVES or abs(a.const) > 1 << 56:
        return None
    return a if max(abs(c) for c in (*a.coef, *(s for s, _ in a.leaves))) <= COEF_LIMIT else None


def _affine(e: Any, env: dict[str, _Aff], shape: tuple[int, ...]) -> _Aff | None:
    """`e` (a scalar template, placeholders bound in `env`, of a tile of `shape`) as an affine form, or None."""
    return _ok(_affine_node(e, env, shape))


def _fits(a: _Aff | None, bits: int, shape: tuple[int, ...]) -> _Aff | None:
    """`a` if it is computed in 64 bits, or in fewer with no scalar and every value it takes over
    the tile inside the type (the coordinates' term and the constant bounded), else None."""
    if a is None or bits == 64:
        return a
    top = sum(abs(c) * (n - 1) for c, n in zip(a.coef, shape)) + abs(a.const)
    return a if not a.leaves and top < 1 << (bits - 1) else None


def _affine_node(e: Any, env: dict[str, _Aff], shape: tuple[int, ...]) -> _Aff | None:
    if not _reads(e, set(env)):  # a scalar: one leaf, its own value (integer, at most 64 bits)
        if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
            return _Aff((0, 0), e.value, ()) if abs(e.value) <= LEAF_LIMIT else None
        return _Aff((0, 0), 0, ((1, e),)) if _signed_int(e.ty) else None
    if isinstance(e, ir.Local):
        return env.get(e.name)
    if isinstance(e, ir.Cast) and isinstance(e.ty, ScalarTy) and isinstance(e.value.ty, ScalarTy):
        if _signed_int(e.ty) and _signed_int(e.value.ty) and e.value.ty.bits <= e.ty.bits:
            return _affine(e.value, env, shape)  # a widening of a signed integer: the same value
        return None
    if isinstance(e, ir.BinOp) and _signed_int(e.ty):
        if e.op in ("+", "-"):
            a, b = _affine(e.left, env, shape), _affine(e.right, env, shape)
            return None if a is None or b is None else _fits(a.plus(b if e.op == "+" else b.scaled(-1)), e.ty.bits, shape)
        if e.op == "*":
            for x, k in ((e.left, e.right), (e.right, e.left)):
                if isinstance(k, ir.Const) and isinstance(k.value, int) and abs(k.value) <= COEF_LIMIT:
                    a = _affine(x, env, shape)
                    return None if a is None else _fits(a.scaled(k.value), e.ty.bits, shape)
    return None


def _tile_affine(x: Any) -> _Aff | None:
    """A 2-D integer tile expression as an affine form of its element's coordinates, or None."""
    if isinstance(x, TileReshape) and isinstance(x.value, TileArange) and len(x.ty.shape) == 2:
        n = x.value.ty.shape[0]
        if x.ty.shape == (n, 1):
            return _Aff((1, 0), 0, ())
        if x.ty.shape == (1, n):
            return _Aff((0, 1), 0, ())
        return None
    if isinstance(x, TileElem) and len(x.ty.shape) == 2:
        env: dict[str, _Aff] = {}
        for name, t in x.inputs:
            a = _tile_affine(t)
            if a is None:
                return None
            env[name] = a
        return _affine(x.template, env, x.ty.shape)
    return None


def _min_diff(cond: Any, env: dict[str, Any], shape: tuple[int, ...]) -> tuple[_Aff, int] | None:
    """For a one-link integer comparison: (lhs - rhs oriented so the comparison is `>= need`, need)."""
    if isinstance(cond, ir.Local) and cond.name in env and isinstance(env[cond.name], TileElem):
        inner = env[cond.name]
        return _min_diff(inner.template, dict(inner.inputs), shape) if inner.ty.shape == shape else None
    if not (isinstance(cond, ir.Compare) and len(cond.ops) == 1 and cond.ops[0] in ("<", "<=", ">", ">=")):
        return None
    bound: dict[str, _Aff] = {}
    for name, t in env.items():  # every input affine (a tile bound to no form is never read as a scalar)
        a = _tile_affine(t)
        if a is None:
            return None
        bound[name] = a
    left, right = (_affine(o, bound, shape) for o in cond.operands)
    if left is None or right is None:
        return None
    op = cond.ops[0]
    diff = _ok(left.plus(right.scaled(-1)) if op in (">", ">=") else right.plus(left.scaled(-1)))
    return None if diff is None else (diff, 1 if op in ("<", ">") else 0)


def skip_condition(low: Any, s: ir.Assign) -> ir.Expr | None:
    """For `x = tile.where(cond, x, other)` with an affine `cond` (the module docstring): a scalar
    condition true when the fragment loop must run (some element may take `other`, or a scalar is
    outside the range the reasoning covers); None when the statement is not of that shape."""
    v = s.value
    if not (isinstance(v, TileElem) and isinstance(v.template, ir.IfExp) and len(v.ty.shape) == 2):
        return None
    env = dict(v.inputs)
    then = v.template.then
    if not (isinstance(then, ir.Local) and isinstance(env.get(then.name), ir.Local) and env[then.name].name == s.name):
        return None
    cond = v.template.cond
    for name, t in env.items():  # nothing but the target, the condition and affine tiles: no memory read, no barrier
        if name != then.name and not (isinstance(cond, ir.Local) and name == cond.name) and _tile_affine(t) is None:
            return None
    found = _min_diff(cond, env, v.ty.shape)
    if found is None:
        return None
    diff, need = found
    lo = diff.const + sum(min(0, c * (n - 1)) for c, n in zip(diff.coef, v.ty.shape))
    total: ir.Expr = _c(lo)
    run: list[ir.Expr] = []
    for sign, leaf in diff.leaves:
        x = low.scalar(leaf)
        x = x if x.ty == I64 else ir.Cast(x, I64)
        run += [_lt(x, _c(-LEAF_LIMIT)), _lt(_c(LEAF_LIMIT), x)]
        total = _bin("+", total, x if sign == 1 else _bin("*", x, _c(sign)))
    run.append(_lt(total, _c(need)))
    return run[0] if len(run) == 1 else ir.BoolOp("or", tuple(run), BOOL)


def lazy_rescale() -> bool:
    """`ANODIZE_TILE_LAZY_RESCALE` (on unless `=0`): the lazy rescale (the module docstring)."""
    return os.environ.get("ANODIZE_TILE_LAZY_RESCALE", "1") != "0"


def rescale_condition(target: str, acc: Any, rows: Any) -> ir.Expr | None:
    """For an accumulator expression `acc` of the matmul into `target` that is `target * alpha`
    (either order; `alpha` an (M, 1) tile local): a warp-uniform condition true when some lane's
    `alpha` is not 1.0, `rows(name, ty)` giving the row tile's register names; else None."""
    if not (isinstance(acc, TileElem) and isinstance(acc.template, ir.BinOp) and acc.template.op == "*"):
        return None
    env = dict(acc.inputs)
    sides = [env.get(x.name) if isinstance(x, ir.Local) else None for x in (acc.template.left, acc.template.right)]
    if not all(isinstance(x, ir.Local) for x in sides) or acc.ty.elem != F32:
        return None
    names = [x.name for x in sides]  # type: ignore[union-attr]
    if names.count(target) != 1:
        return None
    alpha = sides[1 - names.index(target)]
    aty = alpha.ty  # type: ignore[union-attr]
    if not (isinstance(aty, TileTy) and aty.elem == F32 and len(aty.shape) == 2 and aty.shape[1] == 1):
        return None
    regs = rows(alpha.name, aty)  # type: ignore[union-attr]
    if regs is None:
        return None
    ne = [ir.Compare(("!=",), (ir.Local(r, F32), ir.Const(1.0, F32)), BOOL, None, (F32,)) for r in regs]
    return ir.WarpOp("any", (ne[0] if len(ne) == 1 else ir.BoolOp("or", tuple(ne), BOOL),), BOOL)

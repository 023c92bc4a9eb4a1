"""The typed model's integers, for the shared-memory race walk (barrier_intervals.py).

The race walk keys block-uniform values by their text and does integer arithmetic on
index forms; it reads each expression's exact type (width, signedness) from the one typed
model (`anodize/language/fn_types.py`: what `front.typed(fdef, spec)` gave each `ast.expr`
and each local of one typing of the body), never from the syntax.  A function is walked
once per distinct typing of its body (`views_of`): a kernel per member of its type
variables' constraints, a helper per argument types its callers' typings give it (or, when
nothing in the module calls it, as its annotations say).  What the typed model does not
type (a statement that failed to type, a helper that cannot be typed on its own) is of
unknown type: no integer form, so no proof.
"""

from __future__ import annotations

import ast
from typing import Any

from anodize.language.fn_types import FnTypes
from anodize.language.param_annotations import typevars_of
from anodize.language.types import ScalarTy, Ty

__all__ = ["IntView", "views_of", "sign", "wide"]

_HALF = 1 << 31


class IntView:
    """One typing of a function body (or none: every type unknown)."""

    __slots__ = ("exprs", "vars", "fn_types")

    def __init__(self, types: FnTypes | None) -> None:
        self.fn_types = types
        self.exprs: dict[ast.AST, Any] = types.exprs if types is not None else {}
        self.vars: dict[str, Ty] = types.vars if types is not None else {}
        if types is not None and types.unknown:
            self.exprs = _without_constants(types)

    def int_ty(self, node: ast.AST) -> ScalarTy | None:
        """The node's type when it is an integer (or bool) type; None for a float, a non-scalar
        or a node the typed model did not type."""
        e = self.exprs.get(node)
        t = getattr(e, "ty", None)
        return t if isinstance(t, ScalarTy) and not t.is_float else None

    def expr(self, node: ast.AST) -> Any:
        """The typed IR expression of a node (None when untyped)."""
        return self.exprs.get(node)

    def local(self, name: str) -> ScalarTy | None:
        """A local's (or scalar parameter's) integer type."""
        t = self.vars.get(name)
        return t if isinstance(t, ScalarTy) and not t.is_float else None


def _without_constants(types: FnTypes) -> dict[ast.AST, Any]:
    """The typing without every expression that reads an `az.Constant` parameter checked
    without a value: at a launch the parameter is a weak literal, which may take another
    type there (`t + K` is an i32 sum then), so those expressions are of unknown type."""
    dependent: set[ast.AST] = set()

    def visit(node: ast.AST) -> bool:
        hit = isinstance(node, ast.Name) and node.id in types.unknown
        for child in ast.iter_child_nodes(node):
            hit = visit(child) or hit
        if hit:
            dependent.add(node)
        return hit

    for stmt in types.fdef.body:
        visit(stmt)
    return {n: e for n, e in types.exprs.items() if n not in dependent}


def sign(t: ScalarTy) -> str:
    """The `index_forms.Lin.sg` of a typed integer: "s" signed, "u" unsigned, "?" a bool."""
    if t.is_bool:
        return "?"
    return "s" if t.signed else "u"


def wide(t: ScalarTy) -> bool:
    """32 bits or more: machine values stay congruent to the forms modulo 2**32."""
    return t.is_int and t.bits >= 32


def bounds(t: ScalarTy | str) -> tuple[int, int]:
    """The values an *exact* form of this type may take.  For a type of 32 bits or more,
    conservatively those of a 32-bit value of its signedness (an exact form's value stays
    below 2**31 in magnitude, which `Div` and `Mod` rely on); a weak literal ("w") as an i32."""
    if isinstance(t, str):
        return (-_HALF, _HALF - 1) if t in ("s", "w") else (0, _HALF - 1)
    if t.is_bool:
        return 0, 1
    if t.bits >= 32:
        return (-_HALF, _HALF - 1) if t.signed else (0, _HALF - 1)
    half = 1 << (t.bits - 1)
    return (-half, half - 1) if t.signed else (0, 2 * half - 1)


def holds(dst: ScalarTy, src: ScalarTy) -> bool:
    """Every value of `src` is a value of `dst` (a conversion that keeps the machine value)."""
    if dst == src:
        return True
    if not (dst.is_int and (src.is_int or src.is_bool)):
        return False
    if src.is_bool:
        return True
    if dst.signed == src.signed:
        return dst.bits >= src.bits
    return dst.signed and dst.bits > src.bits


def views_of(model: Any, fn: Any, cache: dict[int, list[IntView]] | None = None) -> list[IntView]:
    """Every distinct typing of `fn`'s body (at least one view; an empty one when the typed
    model has none)."""
    key = id(fn.node)
    if cache is not None and key in cache:
        return cache[key]
    front = model.front
    found: list[FnTypes] = []
    partial = False  # a generic kernel with more members than are typed: some typing unseen
    if fn.kind == "kernel":
        partial = _partial(front, fn.node)
        for spec in front.members(fn.node):
            found += [v for v in front.typed(fn.node, spec).views if v.fdef is fn.node]
    else:
        for k in front.kernels():
            partial = partial or _partial(front, k)
            for spec in front.members(k):
                found += [v for v in front.typed(k, spec).views if v.fdef is fn.node]
        if not found:
            alone = front.helper_types(fn.node)
            if alone is not None:
                found.append(alone)
    seen: set[frozenset[tuple[int, object]]] = set()
    out: list[IntView] = []
    for v in found:
        if len(found) > 1:
            sig = _int_signature(v)
            if sig in seen:
                continue
            seen.add(sig)
        out.append(IntView(v))
    if not out or partial:
        out.append(IntView(None))  # nothing typed (or not every member): every type unknown
    if cache is not None:
        cache[key] = out
    return out


def _partial(front: Any, fdef: ast.FunctionDef) -> bool:
    """More members of a generic kernel's type variables than `front.members` types."""
    if len(front.members(fdef)) < 64:  # (`members` types up to 64: fewer is every one)
        return False
    tvs = typevars_of(front.symbols, fdef)
    n = 1
    for c in tvs.values():
        n *= len(c)
    return n > len(front.members(fdef))


def _int_signature(v: FnTypes) -> frozenset[tuple[int, object]]:
    """What the race walk reads of a typing: its integer types (two typings with equal
    signatures are walked alike; a generic kernel over f32 and f64 is walked once)."""
    out: set[tuple[int, object]] = set()
    for n, e in v.exprs.items():
        t = e.ty
        if isinstance(t, ScalarTy) and not t.is_float:
            out.add((id(n), (t, getattr(e, "weak", False), getattr(e, "value", None), getattr(e, "link_types", ()))))
        elif (links := getattr(e, "link_types", None)):
            out.add((id(n), links))
    out.update((-1, (k, t)) for k, t in v.vars.items() if isinstance(t, ScalarTy) and not t.is_float)
    return frozenset(out)

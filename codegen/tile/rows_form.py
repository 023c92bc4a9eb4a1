"""The row form of a tile kernel: its reshapes that only add or drop axes of extent 1 folded
away where broadcasting makes them moot, so the register lowering (rows.py) sees the
shapes it knows.  A semantics-preserving rewrite of the typed tile IR, run before `row_plan`.

NumPy's `keepdims=False` (the language's default) makes a row reduction `(R,)`, which a user
broadcasts back with `m[:, None]` (or `keepdims=True`); the typer writes both as a
`TileReshape` of a `TileReduce` that keeps its axes (language/tile_ir.py).  Here:

* a reshape of a reshape is one reshape, and a reshape to the shape its value already has is
  that value;
* an input of an element-wise operation that is a reshape adding or dropping *leading* axes
  of extent 1 (and not raising the operation's rank) is its value: broadcasting aligns shapes
  at the right, so both give every element the same value;
* a reshape that adds or drops axes of extent 1 of an element-wise operation is that
  operation over its inputs reshaped alike (of a fill: the fill of the new shape);
* a tile variable every assignment of which is a reshape from one shape K is kept at K, and
  each use reads it through the reshape (which the rules above then usually remove):
  `m = tile.max(t, axis=1)` ... `t - m[:, None]` reads `m` as the `(R, 1)` it was computed as;
  a variable every read of which is one such reshape to K' is kept at K' (`rows = base +
  tile.arange(R)` ... `rows[:, None]`); a variable assigned only `tile.arange(n)`, at the top
  level, is that constant tile at each use.
"""

from __future__ import annotations

from dataclasses import is_dataclass, replace
from typing import Any

from anodize.language import ir
from anodize.language.ir_walk import map_children
from anodize.language.tile_ir import TileArange, TileElem, TileFull, TileReshape, TileTy

__all__ = ["row_form"]


def _core(shape: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return shape[i:]


def _map(x: Any, f: Any) -> Any:
    """`x` with `f` applied bottom-up to every IR node under it (helper bodies untouched)."""
    if isinstance(x, tuple):
        return map_children(x, lambda y: _map(y, f))
    if not is_dataclass(x) or isinstance(x, (type, ir.FuncIR, ir.Const, ir.SliceRef, ir.SharedRef, TileTy)):
        return x
    return f(map_children(x, lambda y: _map(y, f)))


def _unit_only(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Do shapes `a` and `b` differ only by axes of extent 1?"""
    return [d for d in a if d != 1] == [d for d in b if d != 1]


def _reshape(v: Any, shape: tuple[int, ...], span: Any) -> Any:
    return _fold(TileReshape(v, TileTy(v.ty.elem, shape), span))


def _fold(e: Any) -> Any:
    if isinstance(e, TileReshape):
        v = e.value
        while isinstance(v, TileReshape):
            v = v.value
        if v.ty.shape == e.ty.shape:
            return v
        if isinstance(v, TileFull):
            return TileFull(v.value, e.ty, v.span)
        if isinstance(v, TileElem) and _unit_only(v.ty.shape, e.ty.shape):
            return _push(v, e.ty.shape, e.span)
        return e if v is e.value else TileReshape(v, e.ty, e.span)
    if isinstance(e, TileElem):
        rank = e.ty.rank
        ins = []
        for name, v in e.inputs:
            if isinstance(v, TileReshape) and _core(v.value.ty.shape) == _core(v.ty.shape) and v.value.ty.rank <= rank:
                v = v.value
            ins.append((name, v))
        if any(a[1] is not b[1] for a, b in zip(ins, e.inputs, strict=True)):
            return replace(e, inputs=tuple(ins))
    return e


def _push(x: TileElem, shape: tuple[int, ...], span: Any) -> TileElem:
    """Element-wise `x` reshaped to `shape` (which differs from its shape only by axes of
    extent 1) as the same operation over its inputs reshaped alike."""
    out = x.ty.shape
    where = iter([j for j, d in enumerate(shape) if d != 1])
    to = {i: next(where) for i, d in enumerate(out) if d != 1}  # x's axes -> `shape`'s axes
    ins = []
    for name, v in x.inputs:
        s = (1,) * (len(out) - v.ty.rank) + v.ty.shape
        new = [1] * len(shape)
        for i, j in to.items():
            new[j] = s[i]
        ins.append((name, _reshape(v, tuple(new), span) if tuple(new) != v.ty.shape else v))
    return TileElem(x.template, tuple(ins), TileTy(x.ty.elem, shape), x.span)


def row_form(k: ir.KernelIR) -> ir.KernelIR:
    """`k` with its unit-axis reshapes folded (see the module docstring); `k` itself when
    there are none."""
    if not any(isinstance(n, (TileReshape, TileArange)) for n in _nodes(k.body)):
        return k
    # tile variables assigned only reshapes from one shape: kept at that shape; variables
    # assigned only `tile.arange(n)`: that constant tile at each use
    kept: dict[str, Any] = {}
    aranges: dict[str, Any] = {}
    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.Assign) and isinstance(s.value.ty, TileTy):
            v = s.value
            want = v.value.ty if isinstance(v, TileReshape) else None
            kept[s.name] = want if kept.get(s.name, want) == want else None
            got = v if isinstance(v, TileArange) and any(s is t for t in k.body) else None  # (top-level ones)
            aranges[s.name] = got if aranges.get(s.name, got) == got else None
    kept_ty = {n: t for n, t in kept.items() if t is not None}
    consts = {n: a for n, a in aranges.items() if a is not None}
    locals_ty = dict(k.locals)
    # tile variables read only through one reshape that adds or drops unit axes: kept at the
    # shape they are read at (`rows = pid.row * BM + tile.arange(BM)` ... `rows[:, None]`)
    uses: dict[str, Any] = {}
    for n in _nodes(k.body):
        if isinstance(n, TileReshape) and isinstance(n.value, ir.Local) and n.value.ty == locals_ty.get(n.value.name):
            got = n.ty if _unit_only(n.ty.shape, n.value.ty.shape) else None
            uses[n.value.name] = got if uses.get(n.value.name, got) == got else None
    reads = [m.name for m in _nodes(k.body) if isinstance(m, ir.Local)]
    read_as = {n: t for n, t in uses.items() if t is not None and n not in kept_ty and n not in consts
               and reads.count(n) == _count_wrapped(k.body, n)}

    def retype(e: Any) -> Any:
        if isinstance(e, ir.Assign) and e.name in kept_ty:
            return replace(e, value=e.value.value)
        if isinstance(e, ir.Assign) and e.name in read_as:
            return replace(e, value=_reshape(e.value, read_as[e.name].shape, e.value.span))
        if isinstance(e, ir.Local) and e.ty == locals_ty.get(e.name):
            if e.name in kept_ty:
                return TileReshape(ir.Local(e.name, kept_ty[e.name], e.span), e.ty, e.span)
            if e.name in read_as:
                return TileReshape(ir.Local(e.name, read_as[e.name], e.span), e.ty, e.span)
            if e.name in consts:
                return consts[e.name]
        return e

    body = _map(k.body, retype) if kept_ty or consts or read_as else k.body
    body = tuple(s for s in body if not (isinstance(s, ir.Assign) and s.name in consts))
    body = _map(body, _fold)
    new_locals = tuple((n, kept_ty.get(n, read_as.get(n, t))) for n, t in k.locals if n not in consts)
    return replace(k, body=body, locals=new_locals)


def _count_wrapped(body: Any, name: str) -> int:
    """How many reads of tile variable `name` are directly under a reshape."""
    return len([n for n in _nodes(body) if isinstance(n, TileReshape) and isinstance(n.value, ir.Local) and n.value.name == name])


def _nodes(x: Any) -> list[Any]:
    out: list[Any] = []

    def see(n: Any) -> Any:
        out.append(n)
        return n

    _map(x, see)
    return out

"""The safe tier's phase discipline for shared memory (az-shared-race), on top of the race
walk of barrier_intervals.py.

Outside `with az.unsafe():`, between two barriers (`az.syncthreads()`, a block collective,
or a helper that reaches one on every path):

- a thread writes a shared array only at its own slot: the index is the block-local
  witness itself (`buf[w]` with `w = thread.index_in_block()`, `w.get()`, or for a 2-D
  array `tile[w]` / `tile[w.row, w.col]` with `w = thread.index_in_block_2d()`);
  anything else is reported here (`unsafe_writes`), whatever else the walk proves;
- if an array is written in the interval, a safe-tier read of it is only at the reader's
  own slot; reads of arrays nothing writes in the interval may use any index (they are
  bounds-checked).  `conflict` decides a pair of accesses of which one is safe-tier,
  before the walk's own form analysis (which still decides a safe-tier witness access
  against an unsafe-tier access: both tiers are checked against each other).

Two witness accesses of one array are the same slot only for the same thread, so they
never conflict; the witness's index form (`form`: `tid.x + bx * (tid.y + by * tid.z)`
when the block is known, `(tid.y, tid.x)` for the 2-D one) lets the form analysis
compare it with the unsafe tier's indices.
"""

from __future__ import annotations

import ast
from typing import Any

from .index_forms import TX, TY, TZ, Lin
from .shared_slots import compatible

Named = tuple[Any, frozenset[str]]


def _names(node: ast.AST) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))


def _local(model: Any, node: ast.expr) -> int:
    """The rank of the block-local witness `node` evaluates to (0: none)."""
    v = model.values.get(node)
    return v.domain if v is not None and v.kind == "local_witness" else 0


def _get(model: Any, call: ast.Call) -> bool:
    """Is `call` a witness's `.get()` (its callee's declaration, language/intrinsics.py)?"""
    c = model.callees.get(call)
    return c is not None and c.kind == "witness_get"


def witness_rank(model: Any, sub: ast.Subscript) -> int:
    """The rank of the block-local witness that is exactly this subscript's index, else 0:
    `buf[w]`, `buf[w.get()]`, `tile[w]`, `tile[w.row, w.col]`."""
    sl = sub.slice
    if isinstance(sl, ast.Tuple):
        if len(sl.elts) != 2:
            return 0
        r, c = sl.elts
        if (
            isinstance(r, ast.Attribute) and r.attr == "row"
            and isinstance(c, ast.Attribute) and c.attr == "col"
            and isinstance(r.value, ast.Name) and isinstance(c.value, ast.Name)
            and r.value.id == c.value.id
            and _local(model, r.value) == 2 and _local(model, c.value) == 2
        ):
            return 2
        return 0
    rank = _local(model, sl)
    if rank:
        return rank
    if (
        isinstance(sl, ast.Call) and not sl.args and not sl.keywords
        and isinstance(sl.func, ast.Attribute) and _get(model, sl)
        and _local(model, sl.func.value) == 1
    ):
        return 1
    return 0


def witness_index(walk: Any, sub: ast.Subscript, rank: int) -> tuple[Named, ...] | None:
    """The per-axis forms of a 2-D witness index written `tile[w]` (one name, two axes)."""
    if rank != 2 or isinstance(sub.slice, ast.Tuple):
        return None
    names = _names(sub.slice)
    return ((_comp(TY), names), (_comp(TX), names))


def _comp(c: str) -> Lin:
    return Lin(((c, 1),), 0, True, True, "s")


def form(walk: Any, node: ast.expr, st: Any) -> Named | None:
    """The index form of a block-local witness expression, or None when `node` is none."""
    m = walk.m
    if isinstance(node, ast.Attribute) and node.attr in ("row", "col") and _local(m, node.value) == 2:
        return _comp(TY if node.attr == "row" else TX), _names(node.value)
    if isinstance(node, ast.Call):
        c = m.callees.get(node)
        if c is None:
            return None
        if c.kind == "local_witness" and not c.name.endswith("_2d"):
            return _linear(walk), frozenset()
        if c.kind == "witness_get" and isinstance(node.func, ast.Attribute) and _local(m, node.func.value) == 1:
            return walk.form(node.func.value, st)
    if isinstance(node, ast.Name) and node.id not in st.forms and _local(m, node) == 1:
        return _linear(walk), frozenset()
    return None


def _linear(walk: Any) -> Lin | None:
    """`tid.x + bx * (tid.y + by * tid.z)` over the block's extents (None when unknown; a
    contract's domain 1 fixes y = z = 1, domain 2 fixes z = 1)."""
    bx, by, bz = walk.block.ext
    fn = walk.fn
    domain = fn.contract.domain if fn.kind == "kernel" and fn.contract is not None else None
    if domain == 1:
        by = by or 1
        bz = bz or 1
    elif domain == 2:
        bz = bz or 1
    terms = {TX: 1}
    if by != 1 or bz != 1:
        if bx is None:
            return None
        terms[TY] = bx
    if bz != 1:
        if by is None:
            return None
        terms[TZ] = bx * by  # type: ignore[operator]
    return Lin(tuple(sorted(terms.items())), 0, True, True, "s")


def conflict(a: Any, b: Any) -> bool | None:
    """A pair of accesses of one array, one of them safe-tier (at least one writes): True when
    they conflict under the discipline, False when they cannot, None for the form analysis."""
    if a.witness and a.witness == b.witness:
        return False  # both at the own slot: the same element only for the same thread
    if a.owner is not None and b.owner is not None and compatible(a.owner, b.owner):
        return False  # both at owned slots of one ownership: a common slot is one thread's
    for x, y in ((a, b), (b, a)):
        own = x.witness or (x.owner is not None and x.owner.checked)
        if x.safe and not x.write and not own and y.write:
            return True  # a read of another slot of an array written in this interval
        if x.safe and x.write and not own:
            return True  # reported on its own (`unsafe_writes`)
    return None


def unsafe_writes(model: Any, fn: Any, owned: Any = frozenset()) -> list[ast.Subscript]:
    """The safe-tier writes of shared arrays in `fn` that are not at the writer's own slot
    (the witness itself, or a multi-slot index in `owned`: proven in every walk of `fn`)."""
    out: list[ast.Subscript] = []
    # (in no particular order: the rule's reports are sorted by place; an augmented
    # assignment's target is itself a stored subscript)
    for target in model.evaluated(fn):  # (a subscript the model did not evaluate in `fn` has no context of `fn`)
        if target.__class__ is not ast.Subscript or target.ctx.__class__ is not ast.Store:  # type: ignore[attr-defined]
            continue
        base = model.values.get(target.value)  # type: ignore[attr-defined]
        ctx = model.ctx.get(target)
        if base is None or base.kind != "shared" or ctx is None or ctx.unsafe or ctx.fn is not fn:
            continue
        if not witness_rank(model, target) and target not in owned and target not in out:
            out.append(target)
    return out


__all__ = ["witness_rank", "witness_index", "form", "conflict", "unsafe_writes"]

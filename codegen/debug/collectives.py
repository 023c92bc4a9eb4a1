"""The debug device's collectives: `warp.reduce`, `block.reduce`, `block.scan`,
`block.broadcast`, run by the same algorithm as the lowering (codegen/llvm/collectives.py: a
`shfl_xor` butterfly, lane 0's value to the warp; one scratch slot per warp, a barrier, the
warps' values combined in warp order), so the results are bit-identical to the other backends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anodize.language import ir
from anodize.language.types import I32, ScalarTy

from . import ops

if TYPE_CHECKING:
    from .interp import Interp

__all__ = ["collective"]


def _combine(op: str, a: Any, c: Any, ty: ScalarTy) -> Any:
    if ty.is_float:
        return ops.binop("+", a, c, ty) if op == "sum" else ops.minnum(a, c, op)
    if op == "sum":
        return ops.binop("+", a, c, ty)
    if op in ("and", "or"):
        return ops.binop("&" if op == "and" else "|", a, c, ty)
    return min(a, c) if op == "min" else max(a, c)


def _identity(op: str, ty: ScalarTy) -> Any:
    if ty.is_float:
        return {"sum": 0.0, "max": float("-inf"), "min": float("inf")}[op]
    if op in ("sum", "or"):
        return 0
    if op == "and":
        return ops.wrap(-1, ty)
    if op == "max":
        return -(1 << (ty.bits - 1)) if ty.signed else 0
    return ((1 << (ty.bits - 1)) - 1) if ty.signed else (1 << ty.bits) - 1


def _shfl(it: Interp, mode: str, v: Any, k: int) -> Any:
    """One warp shuffle; an invalid source lane gives the caller's own value (as in PTX)."""
    snap = it.block.exchange(it.linear, v)
    lane = it.lane
    src = {"shfl_xor": lane ^ k, "shfl_up": lane - k, "shfl_idx": k}[mode]
    return snap[src] if 0 <= src <= 31 and src in snap else v


def _warp_reduce(it: Interp, op: str, v: Any, ty: ScalarTy) -> Any:
    for d in (16, 8, 4, 2, 1):
        v = _combine(op, v, _shfl(it, "shfl_xor", v, d), ty)
    return _shfl(it, "shfl_idx", v, 0)


def _scratch(it: Interp) -> dict[int, Any]:
    blk = it.block
    with blk.lock:
        if not hasattr(blk, "collective_scratch"):
            blk.collective_scratch = {}  # type: ignore[attr-defined]
        return blk.collective_scratch  # type: ignore[attr-defined,no-any-return]


def collective(it: Interp, e: ir.Collective) -> Any:
    ty = I32 if e.ty.is_bool else e.ty  # bools travel as i32
    op = e.op
    v = it.eval(e.value)
    if e.ty.is_bool:
        v = int(bool(v))
    if e.kind == "warp.reduce":
        out = _warp_reduce(it, op, v, ty)
        return bool(out) if e.ty.is_bool else out
    warp, lane = it.linear // 32, it.lane
    nwarps = max(1, e.threads // 32)
    scratch = _scratch(it)
    if e.kind == "block.reduce":
        r = _warp_reduce(it, op, v, ty)
        if lane == 0:
            scratch[warp] = r
        it.block.barrier()
        acc = scratch[0]
        for w in range(1, nwarps):
            acc = _combine(op, acc, scratch[w], ty)
        out = acc
    elif e.kind == "block.scan":
        x = v
        for d in (1, 2, 4, 8, 16):
            y = _shfl(it, "shfl_up", x, d)
            x = _combine(op, y, x, ty) if lane >= d else x
        if lane == 31:
            scratch[warp] = x
        it.block.barrier()
        prefix = scratch.get(0)
        for w in range(1, nwarps - 1):
            if w < warp:
                prefix = _combine(op, prefix, scratch[w], ty)
        if e.inclusive:
            out = x if warp == 0 else _combine(op, prefix, x, ty)
        else:
            prev = _shfl(it, "shfl_up", x, 1)
            if warp == 0:
                out = _identity(op, ty) if lane == 0 else prev
            else:
                out = prefix if lane == 0 else _combine(op, prefix, prev, ty)
    else:  # block.broadcast
        if it.linear == e.src:
            scratch[0] = v
        it.block.barrier()
        out = scratch[0]
    it.block.barrier()  # a block collective ends with a barrier: the scratch is free again
    return bool(out) if e.ty.is_bool else out

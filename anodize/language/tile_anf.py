"""The layout plan's view of a tile kernel with every tensor-core candidate matmul a statement
of its own (A-normal form for matmuls): `s = tile.matmul(x, y) * scale` is read as
`t = tile.matmul(x, y)` then `s = t * scale`, `t` a fresh tile local.  The plan
(language/tile_plan.py) works on this kernel, and so do the on-chip bound
(language/tile_storage.py) and the lowering (codegen/tile/lower.py), so the three read one
program.  Only a matmul that is an element-wise expression's operand, without an accumulator,
is hoisted; the meaning of the kernel is unchanged (the matmul was computed whole, into a
temporary, before the expression in every lowering)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from anodize.language import ir
from anodize.language.tile_ir import TileElem, TileMatmul, TileTy

__all__ = ["hoist_matmuls"]

PREFIX = "__az_mm"  # (a fresh name: one the kernel already has is skipped)


def hoist_matmuls(k: ir.KernelIR) -> ir.KernelIR:
    """`k` with each matmul operand of an assignment's element-wise value hoisted into a fresh
    local assigned just before it; `k` itself when none is."""
    new_locals: list[tuple[str, Any]] = []
    taken = {n for n, _ in k.locals}

    def fresh() -> str:
        i = len(new_locals)
        while f"{PREFIX}{i}" in taken:
            i += 1
        taken.add(f"{PREFIX}{i}")
        return f"{PREFIX}{i}"

    def expr(e: Any, pre: list[ir.Stmt]) -> Any:
        if not isinstance(e, TileElem):
            return e
        inputs = []
        for n, v in e.inputs:
            if isinstance(v, TileMatmul) and v.acc is None and isinstance(v.ty, TileTy) and v.ty.rank == 2:
                name = fresh()
                new_locals.append((name, v.ty))
                pre.append(ir.Assign(name, v, v.span))
                v = ir.Local(name, v.ty)
            else:
                v = expr(v, pre)
            inputs.append((n, v))
        return replace(e, inputs=tuple(inputs))

    def body(stmts: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in stmts:
            if isinstance(s, ir.Assign) and isinstance(s.value, TileElem):
                pre: list[ir.Stmt] = []
                v = expr(s.value, pre)
                out += pre
                out.append(replace(s, value=v) if pre else s)
            elif isinstance(s, ir.If):
                out.append(replace(s, body=body(s.body), orelse=body(s.orelse)))
            elif isinstance(s, (ir.While, ir.ForRange)):
                out.append(replace(s, body=body(s.body)))
            else:
                out.append(s)
        return tuple(out)

    b = body(k.body)
    if not new_locals:
        return k
    return replace(k, body=b, locals=(*k.locals, *new_locals))

"""The layout plan's view of a tile kernel with every tensor-core candidate matmul a statement
of its own (A-normal form for matmuls): `s = tile.matmul(x, y) * scale` is read as
`t = tile.matmul(x, y)` then `s = t * scale`, `t` a fresh tile local.  The plan
(language/tile_plan.py) works on this kernel, and so do the on-chip bound
(language/tile_storage.py) and the lowering (codegen/tile/lower.py), so the three read one
program.  Only a matmul without an accumulator that is an element-wise expression's operand or
the value a `tile.store` stores (`tile.store(c, pid, tile.matmul(x, y))`) is hoisted; the meaning of the kernel is unchanged (the matmul was computed whole, into a
temporary, before the expression in every lowering)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from anodize.language import ir
from anodize.language.tile_ir import TileElem, TileMatmul, TileStore, TileTy

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

    def hoisted(v: Any, pre: list[ir.Stmt]) -> Any:
        """`v` itself, or a fresh local assigned `v` in `pre` where `v` is a candidate matmul."""
        if isinstance(v, TileMatmul) and v.acc is None and isinstance(v.ty, TileTy) and v.ty.rank == 2:
            name = fresh()
            new_locals.append((name, v.ty))
            pre.append(ir.Assign(name, v, v.span))
            return ir.Local(name, v.ty)
        return expr(v, pre)

    def expr(e: Any, pre: list[ir.Stmt]) -> Any:
        if not isinstance(e, TileElem):
            return e
        return replace(e, inputs=tuple((n, hoisted(v, pre)) for n, v in e.inputs))

    def body(stmts: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in stmts:
            if isinstance(s, ir.Assign) and isinstance(s.value, TileElem):
                pre: list[ir.Stmt] = []
                v = expr(s.value, pre)
                out += pre
                out.append(replace(s, value=v) if pre else s)
            elif isinstance(s, TileStore):
                pre = []
                v = hoisted(s.value, pre)
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

"""The canonical GEMM form of a tile kernel, recognised in one place.

    acc = tile.zeros((BM, BN), f32)                       # (optional: any tile of f32)
    for k in range(k0, k1, BK):
        acc = tile.matmul(tile.load(a, (r, k), (BM, BK)), tile.load(b, (k, c), (BK, BN)), acc)
    tile.store(out, pid, acc)                             # or acc.astype(f16 / bf16)

`match_gemm` finds it in a statement list; `lower_gemm` lowers it.  Today `lower_gemm`
returns None, so the generic tile lowering (codegen/tile_lower.py: shared staging, one
thread per output element, f32 accumulation) handles it, correctly and slowly.  A
tensor-core routine (mma.sync, ldmatrix, cp.async double buffering: `tc_gemm.emit_gemm_tile`)
plugs in here: `form` names the two input slices, their load offsets as functions of the
loop variable, the tile shape (BM, BN, BK), the loop bounds, the accumulator and the stored
output with its element type, which is everything such a routine takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anodize.language import ir
from anodize.language.tile_ir import TileElem, TileLoad, TileMatmul, TileStore, TileTy

__all__ = ["GemmForm", "match_gemm", "lower_gemm"]


@dataclass(frozen=True)
class GemmForm:
    loop: ir.ForRange  # the K loop
    acc: str  # the accumulator variable (f32, (BM, BN))
    a: TileLoad  # (BM, BK) tile of A at (row, k)
    b: TileLoad  # (BK, BN) tile of B at (k, col)
    store: TileStore  # of `acc` or `acc.astype(T)`
    out_elem: str  # the stored element type ("f32", "f16", "bf16")
    allow_tf32: bool
    start: int  # index of the loop in the statement list
    end: int  # index just past the store
    k_var: str = ""  # the loop variable (the K offset of both loads)
    a_row: ir.Expr | None = None  # A's row offset (independent of the loop)
    b_col: ir.Expr | None = None  # B's column offset (independent of the loop)

    @property
    def shape(self) -> tuple[int, int, int]:
        m, k = self.a.ty.shape
        return m, self.b.ty.shape[1], k


def _is_acc(e: Any, name: str) -> bool:
    return isinstance(e, ir.Local) and e.name == name and isinstance(e.ty, TileTy)


def match_gemm(body: tuple[ir.Stmt, ...], i: int, lowering: Any = None) -> GemmForm | None:
    """The GEMM form starting at `body[i]` (the K loop), else None."""
    loop = body[i]
    if not isinstance(loop, ir.ForRange) or len(loop.body) != 1 or i + 1 >= len(body):
        return None
    s = loop.body[0]
    if not (isinstance(s, ir.Assign) and isinstance(s.value, TileMatmul)):
        return None
    mm = s.value
    if not (isinstance(mm.x, TileLoad) and isinstance(mm.y, TileLoad) and _is_acc(mm.acc, s.name)):
        return None
    if mm.x.slice.ty.kind.disjoint or mm.y.slice.ty.kind.disjoint:
        return None
    a, b, k = mm.x, mm.y, loop.var
    # A at (row, k), B at (k, col): the loop variable is exactly the K offset of both, the step
    # is BK, and the other offsets do not move with the loop
    if not (_is_var(a.offset[1], k) and _is_var(b.offset[0], k) and not _mentions(a.offset[0], k) and not _mentions(b.offset[1], k)):
        return None
    if not (isinstance(loop.step, ir.Const) and loop.step.value == a.ty.shape[1]):
        return None
    st = body[i + 1]
    if not isinstance(st, TileStore):
        return None
    v = st.value
    if _is_acc(v, s.name):
        out = "f32"
    elif isinstance(v, TileElem) and len(v.inputs) == 1 and _is_acc(v.inputs[0][1], s.name) and isinstance(v.template, ir.Cast):
        out = v.ty.elem.name
    else:
        return None
    return GemmForm(loop, s.name, a, b, st, out, mm.allow_tf32, i, i + 2, k, a.offset[0], b.offset[1])


def _is_var(e: Any, name: str) -> bool:
    while isinstance(e, ir.Cast):
        e = e.value
    return isinstance(e, ir.Local) and e.name == name


def _mentions(e: Any, name: str) -> bool:
    from dataclasses import fields, is_dataclass

    if isinstance(e, ir.Local):
        return e.name == name
    if not is_dataclass(e):
        return False
    for f in fields(e):
        v = getattr(e, f.name)
        for x in v if isinstance(v, tuple) else (v,):
            if hasattr(x, "ty") and _mentions(x, name):
                return True
    return False


def lower_gemm(lowering: Any, form: GemmForm) -> list[ir.Stmt] | None:
    """The statements of `form` for `lowering` (codegen/tile_lower.py's pass: its `T` threads,
    `lowering.T == 1` on the CPU backend), or None for the generic lowering.

    The tensor-core path belongs here, for `lowering.T > 1` and f16/bf16 inputs: return one
    statement (a new IR node, say `TileGemm(form)`, lowered by a `Lowerer.s_TileGemm` that
    calls `tc_gemm.emit_gemm_tile(builder, ...)` with `frame.slices[a].ptr` / `.dims` (the
    leading dimension of a row-major 2-D slice is its cols), M = rows of C, N = cols of C,
    K = `form.loop.stop`, the tile's row and column offsets (`form.a_row`, `form.b_col`,
    lowered with `lw.expr`), and the accumulator's initial value (zeros when the statement
    before the loop is `acc = tile.zeros(...)`, else `acc`'s array), then the store of
    `form.store` (masked at the edges, to `pid * (BM, BN)`, converted to `form.out_elem`).
    Keep the lowering's barrier bookkeeping: `lowering.pending = {}` after a statement that
    ends with a barrier."""
    return None

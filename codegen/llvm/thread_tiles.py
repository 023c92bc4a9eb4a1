"""Lowering of per-thread tiles (`thread.tile_2d`, `t.at(r, s)`; anodize/language/typer_thread_tiles.py
has the mapping and why it is injective), for the GPU and the CPU backend alike.

The tile's value is the Index2D struct (row0, col0) = (by * BY * TR + ty * GR,
bx * BX * TC + tx * GC); `t.at(r, s)` adds (r // GR) * BY * GR + r % GR and
(s // GC) * BX * GC + s % GC.  Every quantity is non-negative and below 2^62 (TR, TC <= 2^20,
grid and block extents within CUDA's limits), so unsigned arithmetic never wraps.  A launch
that is not 2-D (kernels without a contract) and an r or s out of range (when the typer could
not prove it) record a fault and give the poisoned index (all ones), which no `in` test and no
bounds check admits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir as llir

from anodize.language import ir

if TYPE_CHECKING:
    from .lower import Lowerer

I64T = llir.IntType(64)
POISON = llir.Constant(I64T, -1)


def _block_dim(lw: Lowerer, axis: str, block: tuple[int, int] | None) -> llir.Value:
    if block is not None:
        return llir.Constant(I64T, block[0] if axis == "x" else block[1])
    return lw.sreg64("ntid", axis)


def lower_make_tile(lw: Lowerer, e: ir.MakeWitness) -> llir.Value:
    from .lower import WITNESS_LL

    b = lw.b
    assert e.ty.tile is not None
    tr, tc, gr, gc = e.ty.tile
    block = _contract_block(lw.k.contract)
    row0 = b.add(b.mul(lw.sreg64("ctaid", "y"), b.mul(_block_dim(lw, "y", block), llir.Constant(I64T, tr))),
                 b.mul(lw.sreg64("tid", "y"), llir.Constant(I64T, gr)))
    col0 = b.add(b.mul(lw.sreg64("ctaid", "x"), b.mul(_block_dim(lw, "x", block), llir.Constant(I64T, tc))),
                 b.mul(lw.sreg64("tid", "x"), llir.Constant(I64T, gc)))
    if e.site >= 0:
        ok, dims = lw.launch_dims_ok(2)
        with b.if_then(b.not_(ok), likely=False):
            lw.fault(e.site, dims, llir.Constant(I64T, 2))
        row0 = b.select(ok, row0, POISON)
        col0 = b.select(ok, col0, POISON)
    v = llir.Constant(WITNESS_LL[2], None)
    v = b.insert_value(v, row0, 0)
    return b.insert_value(v, col0, 1)


def _contract_block(contract: object) -> tuple[int, int] | None:
    block = getattr(contract, "block", None)
    if not block:
        return None
    bx, by = (tuple(block) + (1, 1))[:2]
    return int(bx), int(by)


def lower_tile_at(lw: Lowerer, e: ir.TileAt) -> llir.Value:
    from anodize.language.types import I64

    from .lower import WITNESS_LL

    b = lw.b
    tr, tc, gr, gc = e.shape
    t = lw.expr(e.tile)
    r = lw.conv(lw.expr(e.r), e.r.ty, I64)
    s = lw.conv(lw.expr(e.s), e.s.ty, I64)
    row0, col0 = b.extract_value(t, 0), b.extract_value(t, 1)

    def axis(base: llir.Value, k: llir.Value, group: int, dim: llir.Value) -> llir.Value:
        g = llir.Constant(I64T, group)
        step = b.mul(b.udiv(k, g), b.mul(dim, g))
        return b.add(b.add(base, step), b.urem(k, g))

    row = axis(row0, r, gr, _block_dim(lw, "y", e.block))
    col = axis(col0, s, gc, _block_dim(lw, "x", e.block))
    ok: llir.Value | None = None
    if e.check_r or e.check_s:
        ok_r = b.icmp_unsigned("<", r, llir.Constant(I64T, tr))
        ok_s = b.icmp_unsigned("<", s, llir.Constant(I64T, tc))
        ok = b.and_(ok_r, ok_s)
        with b.if_then(b.not_(ok), likely=False):
            lw.fault(e.site, b.select(ok_r, s, r), b.select(ok_r, llir.Constant(I64T, tc), llir.Constant(I64T, tr)))
    if e.poisonable:  # a tile of a launch that failed its device check stays poisoned
        live = b.icmp_unsigned("!=", row0, POISON)
        ok = live if ok is None else b.and_(ok, live)
    if ok is not None:
        row = b.select(ok, row, POISON)
        col = b.select(ok, col, POISON)
    v = llir.Constant(WITNESS_LL[2], None)
    v = b.insert_value(v, row, 0)
    return b.insert_value(v, col, 1)


# ---- the debug device (codegen/debug/interp.py) -------------------------------------------------------
def eval_make_tile(fr: object, e: ir.MakeWitness) -> tuple[int, int]:
    """The tile's (row0, col0) on the debug device, as `lower_make_tile` computes it."""
    assert e.ty.tile is not None
    tr, tc, gr, gc = e.ty.tile
    (tx, ty_, _), (cx, cy, _), (bx, by, _) = fr.tid, fr.ctaid, fr.run.block_dim  # type: ignore[attr-defined]
    if e.site >= 0:
        w = fr.witness(2, e.site)  # type: ignore[attr-defined]  # the launch check (faults, poisons)
        if w == (-1, -1):
            return (-1, -1)
    return (cy * by * tr + ty_ * gr, cx * bx * tc + tx * gc)


def eval_tile_at(fr: object, e: ir.TileAt) -> tuple[int, int]:
    tr, tc, gr, gc = e.shape
    row0, col0 = fr.eval(e.tile)  # type: ignore[attr-defined]
    r, s = int(fr.eval(e.r)), int(fr.eval(e.s))  # type: ignore[attr-defined]
    bx, by = e.block if e.block is not None else fr.run.block_dim[:2]  # type: ignore[attr-defined]
    if (e.check_r or e.check_s) and not (0 <= r < tr and 0 <= s < tc):
        bad_r = not 0 <= r < tr
        fr.run.fault(e.site, r if bad_r else s, tr if bad_r else tc)  # type: ignore[attr-defined]
        return (-1, -1)
    if e.poisonable and row0 == -1:
        return (-1, -1)
    return (row0 + (r // gr) * by * gr + r % gr, col0 + (s // gc) * bx * gc + s % gc)

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
from anodize.language.types import I64

from .registry import lowers
from .types import WITNESS_LL

if TYPE_CHECKING:
    from .lower import Lowerer

I64T = llir.IntType(64)
POISON = llir.Constant(I64T, -1)


def _block_dim(lw: Lowerer, axis: str, block: tuple[int, int] | None) -> llir.Value:
    if block is not None:
        return llir.Constant(I64T, block[0] if axis == "x" else block[1])
    return lw.sreg64("ntid", axis)


def lower_make_tile(lw: Lowerer, e: ir.MakeWitness) -> llir.Value:
    b = lw.b
    assert e.ty.tile is not None
    tr, tc, gr, gc = e.ty.tile
    block = _contract_block(lw.k.contract)
    row0 = b.add(b.mul(lw.sreg64("ctaid", "y"), b.mul(_block_dim(lw, "y", block), llir.Constant(I64T, tr))),
                 b.mul(lw.sreg64("tid", "y"), llir.Constant(I64T, gr)))
    col0 = b.add(b.mul(lw.sreg64("ctaid", "x"), b.mul(_block_dim(lw, "x", block), llir.Constant(I64T, tc))),
                 b.mul(lw.sreg64("tid", "x"), llir.Constant(I64T, gc)))
    if e.site >= 0:
        ok, dims = lw.expressions.launch_dims_ok(2)
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


@lowers(ir.TileAt)
def lower_tile_at(lw: Lowerer, e: ir.TileAt) -> llir.Value:
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

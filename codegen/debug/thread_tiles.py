"""The debug device's twins of the per-thread tile lowering (codegen/llvm/thread_tiles.py and
thread_tiles_io.py): a tile's origin, `t.at(r, s)`, and whole-tile moves element by element,
each access tracked as a plain one."""

from __future__ import annotations

from typing import Any

from anodize.language import ir
from anodize.language.halfbits import round_half

from . import ops


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


def exec_tile_move(th: Any, e: ir.ThreadTileLoad | ir.ThreadTileStore) -> None:
    """The debug device's twin: element by element, each access tracked as a plain one."""
    load = isinstance(e, ir.ThreadTileLoad)
    sref = e.src if load else e.dst
    aref = e.dst if load else e.src
    mem = th.frame.slices[sref.name]
    rows, cols = mem.dims[0], mem.dims[1]
    data = th.local_data(aref)
    row0, col0 = th.eval(e.tile)
    fill = th.eval(e.fill) if load else None  # type: ignore[union-attr]
    if load and sref.ty.elem.is_half:
        fill = round_half(float(fill), sref.ty.elem.name)
    tr, tc, gr, gc = e.shape
    bx, by = e.block if e.block is not None else th.run.block_dim[:2]
    for r in range(tr):
        for s in range(tc):
            flat = r * tc + s
            inside = row0 != -1 or not e.poisonable
            row = row0 + (r // gr) * by * gr + r % gr
            col = col0 + (s // gc) * bx * gc + s % gc
            inside = inside and 0 <= row < rows and 0 <= col < cols
            if load:
                if inside:
                    th.run.track(th, mem, row * cols + col, False, e)
                    data[flat] = mem.load(row * cols + col)
                else:
                    data[flat] = fill if fill is not None else ops.zero(sref.ty.elem)
            elif inside:
                th.run.track(th, mem, row * cols + col, True, e)
                mem.store(row * cols + col, data[flat])

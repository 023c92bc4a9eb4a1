"""Lowering of a per-thread tile's whole-tile moves, `t.load(x, v, fill)` and `t.store(out, v)`
(anodize/language/typer_thread_tiles.py types them), for the GPU and the CPU backend alike, and
their twins on the debug device.

Element (r, s) of the tile is `t.at(r, s)` (codegen/llvm/thread_tiles.py): inside a group of GC
columns the thread's columns are consecutive, so a group is split into runs of V elements,
V = 16 bytes / the element's size when V divides GC (4 for f32, 2 for f64, 8 for f16), else 1.
Row by row of the tile: when the row is inside the slice, its last run ends by `cols`
(columns grow with s, so every run is inside) and its first run's address is 16-byte aligned
(then every run's is: runs start V elements, or a multiple of BX * GC columns, apart, both
multiples of 16 bytes), each run is moved with one vector access (`ld.global.nc.v4.f32`,
`st.global.v4.f32`), straight-line, so all the row's loads are in flight at once.  Any other
row (a ragged right edge, a slice whose width is not a multiple of V, a row view that starts
mid-allocation) moves element by element: each element inside the slice is moved, each
outside is `fill` (load) or left alone (store).  So the result is the element loop's whatever
the alignment; the test costs a few integer instructions a row.

Every quantity is below 2^62 (row0, col0 and the offsets: thread_tiles.py), so `col + V` does
not wrap; a poisoned tile (all ones: a launch that failed its device check) moves nothing, and
its loads give `fill`.  The element pointers are plain (not `inbounds`) GEPs, so an address
computed for an element outside the slice is a defined value that is tested, never used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir as llir

from anodize.language import ir
from anodize.language.types import ScalarTy

from .registry import lowers
from .thread_tiles import POISON, _block_dim
from .types import _align, mem_type

if TYPE_CHECKING:
    from .lower import Lowerer

I64T = llir.IntType(64)
VECTOR_BYTES = 16


def run_width(shape: tuple[int, int, int, int], elem: ScalarTy) -> int:
    """V: the elements one 16-byte access moves, when V divides the column group GC, else 1."""
    size = elem.info.mem_bits // 8
    v = VECTOR_BYTES // size if size and VECTOR_BYTES % size == 0 else 1
    return v if v > 1 and shape[3] % v == 0 else 1


def _coords(lw: Lowerer, e: ir.ThreadTileLoad | ir.ThreadTileStore) -> tuple[Any, Any, Any, Any, Any]:
    """(row0, col0, BX, BY, live) of a tile move: the tile's value, the block's extents and
    whether the tile is not poisoned (None: it cannot be)."""
    b = lw.b
    t = lw.expr(e.tile)
    row0, col0 = b.extract_value(t, 0), b.extract_value(t, 1)
    live = b.icmp_unsigned("!=", row0, POISON) if e.poisonable else None
    return row0, col0, _block_dim(lw, "x", e.block), _block_dim(lw, "y", e.block), live


def _offset(k: int, group: int, dim: Any, lw: Lowerer) -> Any:
    """(k // group) * dim * group + k % group: element k's offset along one axis of the tile."""
    b = lw.b
    return b.add(b.mul(llir.Constant(I64T, (k // group) * group), dim), llir.Constant(I64T, k % group))


@lowers(ir.ThreadTileLoad, ir.ThreadTileStore)
def lower_tile_move(lw: Lowerer, e: ir.ThreadTileLoad | ir.ThreadTileStore) -> None:
    """`t.load(src, dst, fill)` / `t.store(dst, src)`, row by row of the tile.  A row whose runs
    all lie inside the slice (the last run ends by `cols`; columns grow with s) and whose first
    run is 16-byte aligned (then every run is: runs start V elements, or a multiple of the
    block's BX * GC columns, apart, both multiples of 16 bytes) moves each run with one vector
    access, straight-line, so the loads are all in flight at once; any other row moves element
    by element."""
    b = lw.b
    load = isinstance(e, ir.ThreadTileLoad)
    sref = e.src if load else e.dst
    aref = e.dst if load else e.src
    sv = lw.frame.slices[sref.name]
    rows, cols = sv.dims[0], sv.dims[1]
    slot, _ = lw.frame.vars[aref.name]
    elem = sref.ty.elem
    mt = mem_type(elem)
    al = _align(elem)
    fill = None
    if isinstance(e, ir.ThreadTileLoad):
        fv = lw.expr(e.fill)
        fill = b.zext(fv, llir.IntType(8)) if elem.is_bool else fv
    row0, col0, bx, by, live = _coords(lw, e)
    tr, tc, gr, gc = e.shape
    v = run_width(e.shape, elem)
    mover = _Mover(lw, load, sv.ptr, mt, al, slot, cols, fill)
    for r in range(tr):
        row = b.add(row0, _offset(r, gr, by, lw))
        row_ok = b.icmp_unsigned("<", row, rows)
        if live is not None:
            row_ok = b.and_(row_ok, live)
        base = b.mul(row, cols)  # wraps harmlessly where the row is outside

        def cols_at(s: int) -> Any:  # computed where used: nothing held across the branch
            return b.add(col0, _offset(s, gc, bx, lw))

        if v == 1:
            mover.elements(r * tc, tc, cols_at, base, row_ok)
            continue
        first = b.gep(sv.ptr, [b.add(base, col0)], source_etype=mt)
        aligned = b.icmp_unsigned("==", b.and_(b.ptrtoint(first, I64T), llir.Constant(I64T, VECTOR_BYTES - 1)), llir.Constant(I64T, 0))
        inside = b.icmp_unsigned("<=", b.add(cols_at(tc - v), llir.Constant(I64T, v)), cols)
        fast = b.and_(b.and_(row_ok, inside), aligned)
        with b.if_else(fast, likely=True) as (then, other):
            with then:
                for s0 in range(0, tc, v):
                    mover.vector(r * tc + s0, v, b.add(base, cols_at(s0)))
            with other:
                mover.elements(r * tc, tc, cols_at, base, row_ok)


class _Mover:
    """The accesses of one tile move: runs as vectors, or elements one by one."""

    def __init__(self, lw: Lowerer, load: bool, base: Any, mt: Any, al: int, slot: Any, cols: Any, fill: Any):
        self.lw, self.load, self.base, self.mt, self.al, self.slot, self.cols, self.fill = lw, load, base, mt, al, slot, cols, fill

    def local(self, flat: int) -> Any:
        return self.lw.b.gep(self.slot, [llir.Constant(I64T, flat)], source_etype=self.mt)

    def vector(self, flat0: int, v: int, at: Any) -> None:
        b = self.lw.b
        ptr = b.gep(self.base, [at], source_etype=self.mt)
        vt = llir.VectorType(self.mt, v)
        if self.load:
            vec = b.load(ptr, typ=vt, align=VECTOR_BYTES)
            for i in range(v):
                b.store(b.extract_element(vec, llir.Constant(llir.IntType(32), i)), self.local(flat0 + i), align=self.al)
            return
        vec = llir.Constant(vt, None)
        for i in range(v):
            x = b.load(self.local(flat0 + i), typ=self.mt, align=self.al)
            vec = b.insert_element(vec, x, llir.Constant(llir.IntType(32), i))
        b.store(vec, ptr, align=VECTOR_BYTES)

    def elements(self, flat0: int, n: int, cols_at: Any, base: Any, row_ok: Any) -> None:
        """Each element inside the slice is moved; each outside is `fill` (load) or skipped."""
        b = self.lw.b
        for s in range(n):
            col = cols_at(s)
            local = self.local(flat0 + s)
            ok = b.and_(row_ok, b.icmp_unsigned("<", col, self.cols))
            ptr = b.gep(self.base, [b.add(base, col)], source_etype=self.mt)
            if self.load:
                b.store(self.fill, local, align=self.al)
                with b.if_then(ok):
                    b.store(b.load(ptr, typ=self.mt, align=self.al), local, align=self.al)
            else:
                with b.if_then(ok):
                    b.store(b.load(local, typ=self.mt, align=self.al), ptr, align=self.al)

"""Typing of per-thread tiles of a 2-D output (`ThreadTileTyper`, the typer's
`FnTyper.thread_tiles`, typer_fn.py).

`t = thread.tile_2d(TR, TC)` / `thread.tile_2d(TR, TC, GR, GC)` gives this thread a TR x TC
set of elements of every 2-D output; `t.at(r, s)` (r in [0, TR), s in [0, TC)) is the
`Index2D` of one of them:

    row = by * (BY * TR) + (r // GR) * (BY * GR) + ty * GR + r % GR
    col = bx * (BX * TC) + (s // GC) * (BX * GC) + tx * GC + s % GC

with (bx, by) the block index, (tx, ty) the thread index in the block and (BX, BY) the block's
extents.  Block (bx, by) owns the contiguous (BY * TR) x (BX * TC) block tile; inside it a
thread's rows come in TR / GR groups of GR consecutive rows, the groups of the block's threads
interleaved (GR = 1: rows ty, ty + BY, ...; GR = TR: TR consecutive rows).  The map is a
mixed-radix numbering of (by, r // GR, ty, r % GR), so every element has exactly one
(thread, r): that is the ownership proof.  It needs r, s in range (proven, else checked at
run time: a fault and a poisoned index) and a 2-D launch (a contract of domain 2, or the
device check of a witness of rank 2).  Each tile shape is its own index space for the
one-mapping rule (checker/kernel_model.py).

The tile's own value is (row0, col0) = the terms without r and s; it is not an index: `t` is
only ever used as `t.at(r, s)` (anything else is a located error).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from anodize.language import ir, messages
from anodize.language.intrinsics import Intrinsic
from anodize.language.ranges import ZERO, Lin
from anodize.language.types import VOID, LocalArrayTy, WitnessTy
from anodize.language.vocab import TILE_MAKER, TILE_MAX_EXTENT

if TYPE_CHECKING:
    from anodize.language.typer_fn import FnTyper

TILE_SHOWN = f"thread.{TILE_MAKER}"


class ThreadTileTyper:
    """Per-thread tiles of one function body (module docstring)."""

    def __init__(self, fn: FnTyper):
        self.fn = fn
        self.st = fn.st

    def make_tile(self, node: ast.Call) -> ir.Expr:
        """`thread.tile_2d(TR, TC[, GR, GC])`: the extents and groups are constants."""
        if len(node.args) not in (2, 4):
            self.st.fail(messages.type_error(self.st.span(node), "thread-tile-arity", help="tile-form"))
        unknown = any(isinstance(a, ast.Name) and a.id in self.st.k.unknown_consts for a in node.args)
        vals = [self.fn.names.const_value(a) for a in node.args]
        if len(vals) == 2:
            vals += [1, 1]
        if unknown:  # an az.Constant checked without a value: the widest tile, checked again at specialisation
            vals = [TILE_MAX_EXTENT, TILE_MAX_EXTENT, 1, 1]
        if not unknown:
            for a, v in zip(node.args, vals, strict=False):
                if type(v) is not int or not 1 <= v <= TILE_MAX_EXTENT:
                    self.st.fail(messages.type_error(self.st.span(a), "tile-extent", help="tile-form", got=ast.unparse(a), most=TILE_MAX_EXTENT))
            for k, (ext, grp) in enumerate(((vals[0], vals[2]), (vals[1], vals[3]))):
                if ext % grp != 0:
                    self.st.fail(messages.type_error(self.st.span(node.args[2 + k]), "tile-group", help="tile-form", group=grp, extent=ext))
        self.fn.calls.note_rank(2, node)
        shape = (int(vals[0]), int(vals[1]), int(vals[2]), int(vals[3]))
        return ir.MakeWitness(2, self.fn.calls.rank_site(node), WitnessTy(2, tile=shape), self.st.span(node))

    def tile_at(self, owner: ast.Name, node: ast.Call, decl: Intrinsic) -> ir.Expr:
        """`t.at(r, s)`: the Index2D of this thread's element (r, s) of the tile."""
        tile = self.fn.exprs.load_name(owner)
        assert isinstance(tile.ty, WitnessTy) and tile.ty.tile is not None
        shape = tile.ty.tile
        if not decl.takes(len(node.args)) or node.keywords:
            self.st.fail(messages.type_error(self.st.span(node), "tile-at-arity", help="tile-form", name=owner.id))
        parts = [self.fn.exprs.as_index(self.fn.expr(a), a) for a in node.args]
        checks = []
        for a, e, ext, axis in zip(node.args, parts, shape[:2], ("row", "column"), strict=True):
            if isinstance(e, ir.Const) and not 0 <= int(e.value) < ext:
                self.st.fail(messages.type_error(self.st.span(a), "tile-at-constant", help="tile-form", index=e.value, axis=axis, name=owner.id, extent=ext))
            checks.append(not self.fn.ranges.index_in_range((e,), [Lin(ZERO, ext)]))
        span = self.st.span(node)
        site = self.st.k.site(span, "tile index", f"{owner.id}.at") if any(checks) else -1
        contract = self.st.k.contract
        block = None
        if contract is not None and contract.block is not None:
            bx, by = (tuple(contract.block) + (1, 1))[:2]
            block = (int(bx), int(by))
        return ir.TileAt(tile, parts[0], parts[1], shape, checks[0], checks[1], site, block, contract is None, WitnessTy(2), span)

    def tile_io(self, owner: ast.Name, node: ast.Call, decl: Intrinsic) -> ir.Expr:
        """`t.load(src, dst, fill)` (a `Slice2D` into a local array) and `t.store(out, src)` (a local
        array into a `DisjointSlice2D`): every element of the tile at once, the local array shaped
        (TR, TC), or (TC,) for a one-row tile; elements outside the slice are `fill` / not written."""
        tile = self.fn.exprs.load_name(owner)
        assert isinstance(tile.ty, WitnessTy) and tile.ty.tile is not None
        shape = tile.ty.tile
        method = decl.tag[1]
        load = method == "load"
        if not decl.takes(len(node.args)) or node.keywords:
            if load:
                self.st.fail(messages.type_error(self.st.span(node), "tile-io-arity-load", help="tile-io-form", name=owner.id))
            self.st.fail(messages.type_error(self.st.span(node), "tile-io-arity-store", help="tile-io-form", name=owner.id))
        snode, anode = node.args[0], node.args[1]
        sty = self.st.slices.get(snode.id) if isinstance(snode, ast.Name) else None
        if sty is None or sty.kind.name != ("Slice2D" if load else "DisjointSlice2D"):
            if load:
                self.st.fail(messages.type_error(self.st.span(snode), "tile-io-slice-load", help="tile-io-form", name=owner.id, got=ast.unparse(snode)))
            self.st.fail(messages.type_error(self.st.span(snode), "tile-io-slice-store", help="tile-io-form", name=owner.id, got=ast.unparse(snode)))
        aty = self.st.arrays.get(anode.id) if isinstance(anode, ast.Name) else None
        tr, tc = shape[0], shape[1]
        fits = isinstance(aty, LocalArrayTy) and aty.elem == sty.elem and (aty.shape == (tr, tc) or (tr == 1 and aty.shape == (tc,)))
        if self.st.k.unknown_consts and isinstance(aty, LocalArrayTy) and aty.elem == sty.elem and len(aty.shape) in (1, 2):
            fits = True  # extents from an `az.Constant` checked without its value: again at specialisation
        if not fits:
            self.st.fail(messages.type_error(self.st.span(anode), "tile-io-array", help="tile-io-form", name=owner.id, method=method,
                                       got=ast.unparse(anode), elem=sty.elem, tr=tr, tc=tc))
        src = ir.SliceRef(snode.id, sty, self.st.span(snode))
        arr = self.fn.local_values.local_ref(anode.id, anode)
        contract = self.st.k.contract
        block = None
        if contract is not None and contract.block is not None:
            bx, by = (tuple(contract.block) + (1, 1))[:2]
            block = (int(bx), int(by))
        span = self.st.span(node)
        if load:
            fill = self.fn.exprs.coerce(self.fn.expr(node.args[2]), sty.elem, node.args[2], "the fill value")
            return ir.ThreadTileLoad(tile, src, arr, fill, shape, block, contract is None, VOID, span)
        return ir.ThreadTileStore(tile, src, arr, shape, block, contract is None, VOID, span)

    def reject_tile_use(self, e: ir.Expr, node: ast.expr) -> None:
        """A tile is not an index: only `t.at(r, s)` names an element."""
        if isinstance(e.ty, WitnessTy) and e.ty.tile is not None:
            self.st.fail(messages.type_error(self.st.span(node), "tile-not-index", help="tile-form", expr=ast.unparse(node)))

    def reject_tile_arg(self, e: ir.Expr, node: ast.expr, want: Any, pname: str, hname: str) -> None:
        """A tile passed to a helper: the checker's az-index-forge for a witness parameter (same code
        and span), az-type otherwise; the helper takes `t.at(r, s)` instead."""
        if not (isinstance(e.ty, WitnessTy) and e.ty.tile is not None):
            return
        if isinstance(want, WitnessTy):
            self.st.fail(messages.index_forge(self.st.span(node), "passed-witness-index-d", arg=ast.unparse(node),
                                        pname=pname, domain=want.rank, name=hname))
        self.reject_tile_use(e, node)

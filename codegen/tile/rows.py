"""Row-shaped tile kernels with their tiles in registers (the GPU lowering's fast form).

`plain.py`'s generic scheme keeps every tile variable in a block-shared array and walks
each tile statement with `for e in range(tid, size, threads)`.  For the kernels whose tiles
are all one *main shape* S (or shapes that broadcast to it: (R, 1) row values, (1, C) and (C,)
column values, (1, 1) scalars), with no matmul or transpose and reductions of S only (along
the rows, down the columns or over everything), `row_plan` picks a fixed distribution of S over the block instead,
and `RowLowering` keeps every tile in registers:

* **The layout.**  With V lanes (4, else 2, else 1: a 16-byte chunk of f32) and T threads,
  thread t owns the chunks `i * T + t` for i < K = R*C / (T*V), chunk j being the V
  consecutive elements `j*V .. j*V + V - 1` of S in row-major order.  Either a row spans
  whole passes of the block (`C % (T*V) == 0`, m = C / (T*V) chunks of a row per thread: the
  row of chunk i is the constant i // m, and the row is shared by all T threads), or a pass
  covers P = T*V / C rows (`T*V % C == 0`: row i*P + t // G, shared by G = C / V consecutive
  threads).  A value of a broadcast shape has one register per distinct element the thread
  touches (a row value one per row, not per element).
* **Loads and stores.**  A statement's loads are all issued first, then its arithmetic, then
  its stores.  When every tile the statement loads or stores is inside its slice (the same
  test on every thread), they are unmasked; on the GPU, when in addition every slice is
  16-byte aligned (a 2-D one with a column count divisible by V) and each load's column
  offset is a multiple of V, each chunk is one vector access (`ld.global.nc.v4.f32`,
  `st.global.v4.f32`: `TileVecLoad` / `TileVecStore`, lowered by `rows_llvm.py`).  A
  tile partly outside goes chunk by chunk (a vector for a chunk inside, else element by
  element, masked); without the alignment every element is masked as in the generic lowering.
* **Reductions.**  Each thread folds its own elements of a row in registers (in chunk, then
  lane order), the G threads of the row combine theirs with `shfl.sync.bfly` (every lane ends
  with the same bits: each butterfly step adds the same two operands on both partners), and
  when G > 32 lane 0 of each warp leaves its value in a small shared array, one barrier, and
  every thread folds the G / 32 warp values in the same order.  So every thread holds the
  row's result, bit for bit the same, with one barrier per reduction at most and no shared
  memory for the tiles themselves.  Column reductions: `reduce_columns`.
* **Ownership.**  An element of S belongs to exactly one thread; an element of a broadcast
  shape is stored by the thread holding the element of S at coordinate 0 of each broadcast
  axis, so every stored element has one writer.  A load from an output slice is allowed only
  of the program's own tile of S, in a kernel whose stores to that slice are all of S: the
  thread reading an element is the one that writes it.

Results can differ from the generic lowering and the CPU backend by the order of a float
reduction's additions (the values are the same; `tests/codegen/test_tile_rows.py`).
The layout and the choice of kernels are in `rows_plan.py`.
"""

from __future__ import annotations

from typing import Any

from anodize.language import ir
from anodize.language.ir_walk import walk
from anodize.language.tile_ir import TileArange, TileElem, TileFull, TileLoad, TileReduce, TileReshape, TileStore, TileTy
from anodize.language.types import BOOL, I32, I64, SharedTy

from .compute import TileCompute, _and, _bin, _c, _eq, _le, _lt
from .plain import _Lowering
from .rows_plan import MAX_PER_THREAD, RowLayout, TileVecAligned, TileVecLoad, TileVecStore, load_sig, row_plan, sig

__all__ = ["RowLayout", "RowLowering", "row_plan", "TileVecLoad", "TileVecStore", "TileVecAligned", "MAX_PER_THREAD"]


class _Reg:
    """A tile held in registers: one local per key (`RowLayout.key`)."""

    __slots__ = ("ty", "locs")

    def __init__(self, ty: TileTy, locs: dict[Any, ir.Local]):
        self.ty = ty
        self.locs = locs


# ---- the lowering --------------------------------------------------------------------------------


class RowLowering(_Lowering):
    def __init__(self, k: ir.KernelIR, threads: int, layout: RowLayout, vectors: bool):
        super().__init__(k, threads)
        self.L = layout
        self.vectors = vectors
        self.regs: dict[str, _Reg] = {}
        # tiles loaded by a top-level `x = tile.load(...)` of an input, by (slice, offset, shape):
        # a later load of the same elements reuses the registers where both are inside
        self.loaded: dict[Any, _Reg] = {}
        self.depth = 0
        self.once: set[str] = set()  # tile variables assigned once, at the top level, so far
        self.remat: dict[str, Any] = {}  # masks recomputed at their uses (assign_tile)
        self.assigned: dict[str, int] = {}  # how many statements assign each tile variable
        for st in ir.walk_stmts(k.body):
            if isinstance(st, ir.Assign) and isinstance(st.value.ty, TileTy):
                self.assigned[st.name] = self.assigned.get(st.name, 0) + 1

    def body_of(self, body: tuple[ir.Stmt, ...], loop: bool) -> tuple[ir.Stmt, ...]:
        self.depth += 1
        try:
            return super().body_of(body, loop)
        finally:
            self.depth -= 1

    # ---- registers ----------------------------------------------------------------------------------
    def reg_var(self, name: str, ty: TileTy) -> _Reg:
        hit = self.regs.get(name)
        if hit is None:
            locs = {key: self.local(ty.elem, f"r_{name}_") for key, _ in self.L.positions(ty.shape)}
            hit = self.regs[name] = _Reg(ty, locs)
        return hit

    def rprep(self, x: Any, out: list[ir.Stmt]) -> Any:
        """`x` with its tile variables as registers and its reductions computed first."""
        if isinstance(x, ir.Local) and isinstance(x.ty, TileTy):
            if x.name in self.remat:
                return self.rprep(self.remat[x.name], out)
            return self.reg_var(x.name, x.ty)
        if isinstance(x, TileElem):
            return TileElem(x.template, tuple((n, self.rprep(v, out)) for n, v in x.inputs), x.ty, x.span)
        if isinstance(x, TileFull):
            return TileFull(self.scalar(x.value), x.ty, x.span)
        if isinstance(x, TileLoad):
            return TileLoad(x.slice, tuple(self.scalar(o) for o in x.offset), self.scalar(x.other), x.own, x.ty, x.span)
        if isinstance(x, TileReduce):
            return self.reduce_rows(x, out)
        if isinstance(x, (TileArange, TileReshape)):  # an arange, or one with unit axes added (row_plan)
            return x
        raise AssertionError(f"not a row-plan tile expression: {type(x).__name__}")

    # ---- statements ---------------------------------------------------------------------------------
    def assign_tile(self, name: str, value: ir.Expr) -> list[ir.Stmt]:
        ty: TileTy = value.ty  # type: ignore[assignment]
        out: list[ir.Stmt] = []
        once = self.depth == 0 and self.assigned.get(name) == 1
        if once and ty.elem.is_bool and self.remat_ok(value):
            # a mask (layer norm's `inside`): recomputed where it is used rather than kept in a
            # register an element (predicates are few; its inputs never change after this)
            self.remat[name] = value
            return out
        tree = self.rprep(value, out)
        if isinstance(tree, _Reg):
            vals: dict[Any, ir.Expr] = dict(tree.locs)
        else:
            temps = {key: self.local(ty.elem, "v") for key, _ in self.L.positions(ty.shape)}

            def consume(key: Any, pos: tuple[int, int], v: ir.Expr, mode: str, state: dict) -> list[ir.Stmt]:  # type: ignore[type-arg]
                return [ir.Assign(temps[key].name, v)]

            out += self.over(tree, ty.shape, consume)
            vals = dict(temps)
        dest = self.reg_var(name, ty)
        out += [ir.Assign(dest.locs[key].name, vals[key]) for key in dest.locs]
        # only a variable assigned once, by a top-level statement, keeps the loaded values for
        # every later statement (a loop could otherwise come back to a load after a reassignment)
        if once:
            self.once.add(name)
            if isinstance(tree, TileLoad) and not tree.slice.ty.kind.output:
                sig = load_sig(tree)
                if sig is not None:
                    self.loaded[sig] = dest
        return out

    def remat_ok(self, x: Any) -> bool:
        """Is `x` the same value wherever it is evaluated after here: loads of inputs at fixed
        offsets, constant fills, variables assigned once at the top level, element-wise
        operations of those whose templates read nothing else?"""
        if isinstance(x, ir.Local) and isinstance(x.ty, TileTy):
            return x.name in self.once or x.name in self.remat
        if isinstance(x, TileLoad):
            return not x.slice.ty.kind.output and load_sig(x) is not None and sig(x.other) is not None
        if isinstance(x, TileFull):
            return sig(x.value) is not None
        if isinstance(x, (TileArange, TileReshape)):
            return True
        if isinstance(x, TileElem):
            names = {n for n, _ in x.inputs}
            locals_in = [e for e in _exprs(x.template) if isinstance(e, ir.Local)]
            return all(e.name in names for e in locals_in) and all(self.remat_ok(v) for _, v in x.inputs)
        return False

    def store(self, s: TileStore) -> list[ir.Stmt]:
        ty: TileTy = s.value.ty  # type: ignore[assignment]
        out: list[ir.Stmt] = []
        tree = self.rprep(s.value, out)
        shape, rank, L = ty.shape, ty.rank, self.L
        vec = self.vectors and shape[-1] > 1 and not ty.elem.is_bool and L.V > 1

        def where(pos: tuple[int, int]) -> list[ir.Expr]:
            coords = L.coords(shape, *pos)
            return [_bin("+", _bin("*", self.pid(rank, a), _c(shape[a])), coords[a]) for a in range(rank)]

        def consume(key: Any, pos: tuple[int, int], v: ir.Expr, mode: str, state: dict) -> list[ir.Stmt]:  # type: ignore[type-arg]
            i, lane = pos
            if mode in ("vec", "chunked") and vec:  # a chunk is stored once its last lane is computed
                tmp = self.local(ty.elem, "st")
                lanes = state.setdefault(i, {})
                lanes[lane] = tmp
                return [ir.Assign(tmp.name, v), *(chunk_store(mode, i, lanes) if len(lanes) == L.V else [])]
            write: ir.Stmt = masked_write(pos, v) if mode in ("masked", "chunked") else ir.Write(s.slice, tuple(where(pos)), v, False, -1, s.span)
            own = L.owner(shape, *pos)
            return self.in_tile(i, [write] if own is None else [ir.If(own, (write,), ())])

        def masked_write(pos: tuple[int, int], v: ir.Expr) -> ir.Stmt:
            at = where(pos)
            write = ir.Write(s.slice, tuple(at), v, False, -1, s.span)
            return ir.If(_and(*(_lt(w, ir.Len(s.slice, a, I64)) for a, w in enumerate(at))), (write,), ())

        def chunk_store(mode: str, i: int, lanes: dict) -> list[ir.Stmt]:  # type: ignore[type-arg]
            at = where((i, 0))
            st: ir.Stmt = TileVecStore(s.slice, tuple(at), tuple(lanes[v] for v in range(L.V)), s.span)  # type: ignore[assignment]
            if mode == "chunked":  # the chunk inside: one vector; else element by element
                ok = _and(*(_lt(a, ir.Len(s.slice, ax, I64)) for ax, a in enumerate(at[:-1])),
                          _le(at[-1], _bin("-", ir.Len(s.slice, len(at) - 1, I64), _c(L.V))))
                st = ir.If(ok, (st,), tuple(masked_write((i, v), lanes[v]) for v in range(L.V)))
            own = L.owner(shape, i, 0)
            return self.in_tile(i, [st if own is None else ir.If(own, (st,), ())])

        own = [_le(_bin("*", self.pid(rank, a), _c(shape[a])), _bin("-", ir.Len(s.slice, a, I64), _c(shape[a])))
               for a in range(rank)]
        out += self.over(tree, shape, consume, own, [s.slice] if vec else [])
        return out

    # ---- a statement over the thread's positions: loads first, then the values, then stores ----------
    def over(self, tree: Any, shape: tuple[int, ...], consume: Any, extra: list[ir.Expr] = (),
             vec_slices: list[ir.SliceRef] = ()) -> list[ir.Stmt]:  # type: ignore[assignment]
        keys = self.L.positions(shape)
        loads = self.loads_in(tree)
        inside = self.all_inside(tree, list(extra))

        def variant(mode: str) -> list[ir.Stmt]:
            cache: dict[Any, ir.Expr] = {}
            state: dict[Any, Any] = {}
            body: list[ir.Stmt] = []
            if mode in ("vec", "plain"):  # the edge variants load a chunk where it is first used
                body += self.preload(loads, keys, mode, cache)
            for key, pos in keys:
                pre: list[ir.Stmt] = []
                v = self.at(tree, pos, pre, mode, cache)
                body += pre
                body += consume(key, pos, v, mode, state)
            return body

        if inside is None:
            return variant("plain")
        vslices = list(vec_slices) + [ld.slice for ld in loads if self.vector_load(ld)]
        if self.vectors and vslices:
            uniq: dict[str, ir.SliceRef] = {}
            for sl in vslices:
                uniq.setdefault(sl.name, sl)
            conds: list[ir.Expr] = [TileVecAligned(tuple(uniq.values()), self.L.V)]  # type: ignore[list-item]
            for ld in loads:
                if self.vector_load(ld):
                    conds.append(_eq(_bin("%", ld.offset[-1], _c(self.L.V)), _c(0), I64))
            aligned = _and(*conds)
            fast: ir.Stmt = ir.If(aligned, tuple(variant("vec")), tuple(variant("plain")))
            # not all inside (a row shorter than the tile): a vector per chunk that is inside
            slow: ir.Stmt = ir.If(aligned, tuple(variant("chunked")), tuple(variant("masked")))
            return [ir.If(inside, (fast,), (slow,))]
        return [ir.If(inside, tuple(variant("plain")), tuple(variant("masked")))]

    def vector_load(self, ld: TileLoad) -> bool:
        return self.vectors and self.L.V > 1 and ld.ty.shape[-1] > 1 and not ld.ty.elem.is_bool

    def preload(self, loads: list[TileLoad], keys: list[Any], mode: str, cache: dict) -> list[ir.Stmt]:  # type: ignore[type-arg]
        """Every load of a statement before any arithmetic, unmasked (mode "vec": one vector a
        chunk; "plain": one scalar read an element)."""
        out: list[ir.Stmt] = []
        for ld in loads:
            again = self.loaded.get(load_sig(ld))
            for key, pos in self.L.positions(ld.ty.shape):
                if (id(ld), key) in cache:
                    continue
                if again is not None:  # loaded before by a top-level statement (inside there too)
                    cache[(id(ld), key)] = again.locs[key]
                    continue
                self.load_at(ld, pos, mode, cache, out)
        return out

    def load_at(self, ld: TileLoad, pos: tuple[int, int], mode: str, cache: dict, out: list[ir.Stmt]) -> None:  # type: ignore[type-arg]
        """Load `ld` at position `pos` into `cache`: with vectors the whole chunk of `pos` (mode
        "chunked": a vector where the chunk is inside, else element by element)."""
        L = self.L
        shape = ld.ty.shape
        i, v = pos
        if mode in ("vec", "chunked") and self.vector_load(ld):
            at = [_bin("+", o, c) for o, c in zip(ld.offset, L.coords(shape, i, 0), strict=True)]
            dests = [self.local(ld.ty.elem, "ld") for _ in range(L.V)]
            vec: ir.Stmt = TileVecLoad(ld.slice, tuple(at), tuple(d.name for d in dests), ld.ty.elem, ld.span)  # type: ignore[assignment]
            if mode == "chunked":
                each: list[ir.Stmt] = []
                for lane in range(L.V):
                    each.append(ir.Assign(dests[lane].name, self.masked_read(ld, L.coords(shape, i, lane), each)))
                ok = _and(*(ir.Compare(("<=",), (_c(0), a), BOOL, None, (I64,)) for a in at),
                          *(_lt(a, ir.Len(ld.slice, ax, I64)) for ax, a in enumerate(at[:-1])),
                          _le(at[-1], _bin("-", ir.Len(ld.slice, len(at) - 1, I64), _c(L.V))))
                vec = ir.If(ok, (vec,), tuple(each))
            out += self.in_tile(i, [vec], [ir.Assign(d.name, ld.other) for d in dests])
            for lane in range(L.V):
                cache[(id(ld), L.key(shape, i, lane))] = dests[lane]
        elif mode == "chunked":
            cache[(id(ld), L.key(shape, i, v))] = self.masked_read(ld, L.coords(shape, i, v), out)
        else:
            at = [_bin("+", o, c) for o, c in zip(ld.offset, L.coords(shape, i, v), strict=True)]
            d = self.local(ld.ty.elem, "ld")
            out += self.in_tile(i, [ir.Assign(d.name, ir.Read(ld.slice, tuple(at), False, -1, ld.ty.elem))], [ir.Assign(d.name, ld.other)])
            cache[(id(ld), L.key(shape, i, v))] = d

    def in_tile(self, i: int, body: list[ir.Stmt], orelse: list[ir.Stmt] = ()) -> list[ir.Stmt]:  # type: ignore[assignment]
        """`body` where this thread's chunk i is inside the main shape (a ragged layout's last
        pass: RowLayout.valid), else `orelse`: a position past the row is never loaded (its value
        is `other`), stored or reduced."""
        ok = self.L.valid(i)
        if ok is None:
            return body
        return [ir.If(ok, tuple(body), tuple(orelse))]

    def at(self, x: Any, pos: tuple[int, int], pre: list[ir.Stmt], mode: str, cache: dict) -> ir.Expr:  # type: ignore[type-arg]
        """Element at position `pos` of tile tree `x` (statements it needs appended to `pre`)."""
        L = self.L
        if isinstance(x, _Reg):
            return x.locs[L.key(x.ty.shape, *pos)]
        if isinstance(x, TileFull):
            return x.value  # type: ignore[no-any-return]
        if isinstance(x, (TileArange, TileReshape)):  # the coordinate along the arange's one axis
            shape = x.ty.shape
            coords = L.coords(shape, *pos)
            return ir.Cast(coords[max(range(len(shape)), key=lambda a: shape[a])], I32)
        if isinstance(x, TileElem):
            for name, v in x.inputs:
                self.locals[name] = v.ty.elem
                pre.append(ir.Assign(name, self.at(v, pos, pre, mode, cache)))
            return self.scalar(x.template)  # type: ignore[no-any-return]
        if isinstance(x, TileLoad):
            key = L.key(x.ty.shape, *pos)
            if mode == "chunked" and (id(x), key) not in cache:
                self.load_at(x, pos, mode, cache, pre)
            if mode != "masked":
                return cache[(id(x), key)]  # type: ignore[no-any-return]
            return self.masked_read(x, L.coords(x.ty.shape, *pos), pre)
        raise AssertionError(f"not evaluable at a position: {type(x).__name__}")

    def masked_read(self, x: TileLoad, coords: list[ir.Expr], pre: list[ir.Stmt]) -> ir.Local:
        """Element `coords` of load `x`: `src[offset + coords]` when inside `src`, else `other`
        (a branch: an address outside is never formed into a load)."""
        at = [_bin("+", o, c) for o, c in zip(x.offset, coords, strict=True)]
        v = self.local(x.ty.elem, "ld")
        slots = [self.local(I64, "at") for _ in at]
        pre += [ir.Assign(s.name, a) for s, a in zip(slots, at, strict=True)]
        inside = _and(*(
            _and(ir.Compare(("<=",), (_c(0), s), BOOL, None, (I64,)), _lt(s, ir.Len(x.slice, axis, I64)))
            for axis, s in enumerate(slots)
        ))
        pre += [ir.Assign(v.name, x.other),
                ir.If(inside, (ir.Assign(v.name, ir.Read(x.slice, tuple(slots), False, -1, x.ty.elem)),), ())]
        return v

    # ---- reductions ---------------------------------------------------------------------------------
    def reduce_rows(self, x: TileReduce, out: list[ir.Stmt]) -> _Reg:
        src = self.rprep(x.value, out)
        L, elem = self.L, x.ty.elem
        op = {"sum": "+", "max": "max", "min": "min"}[x.op]
        rshape = x.ty.shape
        parts = {key: self.local(elem, "part") for key, _ in L.positions(rshape)}

        if L.ragged:  # a part may see no element of the row (every chunk of this thread past it)
            out += [ir.Assign(p.name, TileCompute.neutral(x.op, elem)) for p in parts.values()]

        def consume(key: Any, pos: tuple[int, int], v: ir.Expr, mode: str, state: dict) -> list[ir.Stmt]:  # type: ignore[type-arg]
            rk = L.key(rshape, *pos)
            p = parts[rk]
            if v.ty != elem:
                v = ir.Cast(v, elem)
            if rk not in state and not L.ragged:
                state[rk] = True
                return [ir.Assign(p.name, v)]
            return self.in_tile(pos[0], [ir.Assign(p.name, _bin(op, p, v, elem))])

        if isinstance(src, _Reg):
            st: dict[Any, Any] = {}
            for key, pos in L.positions(src.ty.shape):
                out += consume(key, pos, src.locs[key], "plain", st)
        else:
            out += self.over(src, x.value.ty.shape, consume)
        full = len(x.axes) == x.value.ty.rank
        if not full and x.axes == (0,):
            return self.reduce_columns(x, parts, op, out)
        G = L.T if full or L.rank == 1 else L.G
        for mask in (16, 8, 4, 2, 1):
            if mask < G:
                for p in parts.values():
                    out.append(ir.Assign(p.name, _bin(op, p, ir.WarpOp("shfl_xor", (p, _c(mask, I32)), elem), elem)))
                self.uses_warp = True
        if G <= 32:
            return _Reg(x.ty, parts)
        W = G // 32
        slots = 1 if full or L.rank == 1 else L.R
        name = self.fresh("red")
        sty = SharedTy(elem, (slots * W,))
        self.shared[name] = sty
        ref = ir.SharedRef(name, sty)
        t = L.tid()
        warp = _bin("//", _bin("%", t, _c(G)), _c(32))
        firsts = dict(L.positions(rshape))

        def slot(rk: Any) -> ir.Expr:
            return _c(0) if slots == 1 else L.row(firsts[rk][0])

        out += self.sync({(name, True, False)})
        writes = tuple(ir.SharedWrite(ref, (_bin("+", _bin("*", slot(rk), _c(W)), warp),), p, False, -1) for rk, p in parts.items())
        out.append(ir.If(_eq(_bin("%", t, _c(32)), _c(0), I64), writes, ()))
        out += self.sync({(name, False, False)})
        res = {rk: self.local(elem, "red") for rk in parts}
        for rk, r in res.items():
            base = _bin("*", slot(rk), _c(W))
            out.append(ir.Assign(r.name, ir.SharedRead(ref, (base,), False, -1, elem)))
            for w in range(1, W):
                read = ir.SharedRead(ref, (_bin("+", base, _c(w)),), False, -1, elem)
                out.append(ir.Assign(r.name, _bin(op, r, read, elem)))
        return _Reg(x.ty, res)

    def reduce_columns(self, x: TileReduce, parts: dict, op: str, out: list[ir.Stmt]) -> _Reg:  # type: ignore[type-arg]
        """`tile.sum(x, axis=0)`: where a row spans the block each column has one owner, whose
        partial is the result; else the T / G threads of a column (t, t + G, ...) leave their
        partials in a shared array, one barrier, and each folds them in the same order."""
        L, elem = self.L, x.ty.elem
        if L.spans:
            return _Reg(x.ty, parts)
        keys = list(parts)  # one a lane: the thread's columns are (t % G) * V + v
        name = self.fresh("red")
        sty = SharedTy(elem, (L.T * len(keys),))
        self.shared[name] = sty
        ref = ir.SharedRef(name, sty)
        t = L.tid()
        out += self.sync({(name, True, False)})
        for j, rk in enumerate(keys):
            out.append(ir.SharedWrite(ref, (_bin("+", _bin("*", t, _c(len(keys))), _c(j)),), parts[rk], False, -1))
        out += self.sync({(name, False, False)})
        res = {rk: self.local(elem, "red") for rk in keys}
        first = _bin("%", t, _c(L.G))
        for j, rk in enumerate(keys):
            r = res[rk]
            for member in range(L.T // L.G):
                at = _bin("+", _bin("*", _bin("+", first, _c(member * L.G)), _c(len(keys))), _c(j))
                read = ir.SharedRead(ref, (at,), False, -1, elem)
                out.append(ir.Assign(r.name, read if member == 0 else _bin(op, r, read, elem)))
        return _Reg(x.ty, res)


def _exprs(e: Any) -> list[Any]:
    """`e` and every expression under it."""
    return [n for n in walk(e, stop=(ir.FuncIR,)) if hasattr(n, "ty")]

"""Tile kernels to plain kernel IR: a model-to-model pass run before `codegen/llvm/lower.py`.

`lower_tiles(k, threads)` turns a tile kernel's typed IR (language/tile_ir.py) into the
ordinary IR of a kernel whose block has `threads` threads (num_warps * 32 on the GPU, 1 on
the CPU backend and the debug device), so both LLVM targets and the interpreter run it
unchanged.  The scheme (docs/tiles.md):

* every tile *variable* lives in a block-shared array (`SharedDecl`, flat, row-major); on
  the CPU backend the "block" is one host thread, so that array is private to the program;
* a tile *statement* is one loop over the elements of its result, element `e` handled by
  thread `e % threads` (`for e in range(tid, size, threads)`), then a barrier (GPU only);
* element-wise chains, transposes, broadcasts, fills and loads are evaluated *inline* per
  element (fused: no memory between them); only reductions and matmuls get a loop of
  their own (into a temporary array, reused between statements), and a matmul's operands are
  staged in shared memory when they are not arrays already;
* `tile.store` writes element `e` of the program's tile `pid * shape` when it is inside the
  output (masked); `tile.load` reads `src[offset + e]` when inside, else `other`;
* the program id is `ctaid` (x the column, y the row, z the layer); the whole body runs
  under `tid.x < threads and tid.y == tid.z == 0` and `ctaid` 0 on every grid dimension the
  domain does not use (z below 3-D, y for 1-D), so a launch with more threads or an unused
  grid dimension never gives a tile two writers;
* a reshape (`.reshape`, `expand_dims`, `x[:, None]`, a reduction without `keepdims`) keeps
  the elements' row-major order: an array is read as it is at the same flat index, an inline
  tree at the coordinates the flat index has in its own shape; `tile.arange(n)` is the
  element's coordinate.

Row-shaped kernels (every tile one main shape or a broadcast of it, reductions of that shape
along either axis or over everything, no matmul or transpose) keep their tiles in registers instead, with 16-byte
vector accesses and shuffle reductions: `rows.row_plan` / `rows.RowLowering`, a
subclass of the pass here (docs/tiles.md, "Row-shaped kernels in registers").

On a GPU with tensor cores the language's layout plan (language/tile_plan.py) puts the
accumulators of `tile.matmul`s whose operands are loads (and every tile computed from them
element-wise) in registers; `codegen/tile/lower.py` lowers those statements (fragment loops,
`TileMma`), everything else stays here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from anodize.language import ir
from anodize.language.ir_walk import children, map_children
from anodize.language.tile_ir import (
    TileArange,
    TileElem,
    TileFull,
    TileId,
    TileIdPart,
    TileLoad,
    TileMatmul,
    TileReduce,
    TileReshape,
    TileStore,
    TileTrans,
    TileTy,
    TileWitnessTy,
    is_tile,
)
from anodize.language.types import BOOL, I32, I64, U32, ScalarTy, SharedTy

from .attention import lower_attention
from .epilogue import TilePredLoad, pred_load_kind
from .lower import (assign_registers, env_int, is_register_tile, pipelined_loop, prefetching_loop, read_register, reads_registers,
                    registers_of, row_reduce, store_registers)
from .ops import COMPUTES, ELEMENTWISE, Op
from .compute import TileCompute, _Access, _and, _Arr, _bin, _c, _eq, _flat, _le, _lt, _unflat


class _Lowering:
    def __init__(self, k: ir.KernelIR, threads: int):
        self.k = k
        self.T = threads
        self.compute = TileCompute(self)  # the loops that cannot be evaluated inline (compute.py)
        self.locals: dict[str, Any] = {n: t for n, t in k.locals if not isinstance(t, (TileTy, TileWitnessTy))}
        self.shared: dict[str, SharedTy] = dict(k.shared)
        self.arrays: dict[str, _Arr] = {}
        self.n = 0
        self.pool: dict[tuple[str, int], list[ir.SharedRef]] = {}
        self.taken: list[tuple[tuple[str, int], ir.SharedRef]] = []
        self.uses_barrier = False
        self.uses_warp = False
        # barrier placement: the accesses since the last barrier, array -> {(write, identity)}
        # (identity: element e of a loop touching flat element e, so always the same thread)
        self.pending: dict[str, set[tuple[bool, bool]]] = {}
        self.acc: _Access | None = None  # the element loop being built
        self.unmasked = False  # building the fast variant of a loop whose tiles are all inside
        self.tensor_cores = False  # the layout plan's matmuls may lower to tensor cores (lower_tiles)
        self.wgmma = False  # ... or to wgmma (sm_90)
        self.shared_limit = 48 * 1024  # a block's shared bytes, the compiler's dynamic buffer included
        self.prefetch: dict[int, Any] = {}  # the loop being prefetched: site id -> (Prefetch, its buffer bytes) (prefetch.py)
        self.prefetch_ok = True  # (a benchmarking switch: ANODIZE_TILE_PREFETCH=0)
        self.typed: Any = None  # the kernel as typed, where the layout plan's view (`k`) differs (lower.py `plan_for`)
        self.plan: Any = None  # the layout plan (language/tile_plan.py) on a GPU with tensor cores
        self.layouts: dict[tuple[int, int], Any] = {}  # register-tile shape -> its MmaLayout
        self.registers: dict[str, Any] = {}  # register tile -> its registers (codegen/tile/lower.py)
        self.frag: Any = None  # the fragment loop being built: (register index, coordinates)
        self.grouped: Any = None  # (row, col) locals of the grouped program order (group_programs)
        self.frag_loads: Any = None  # the fragment loop element's masked loads, issued ahead (tile/lower.py)
        self.frag_memo: dict[Any, ir.Local] = {}  # the fragment loop's loads by element (frag_load)
        self.frag_even: dict[str, bool] = {}  # its fast copy's loads of even layout columns (pair_loads.py)

    # ---- names and storage -------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"__az_t{prefix}{self.n}"

    def local(self, ty: ScalarTy, prefix: str = "v") -> ir.Local:
        name = self.fresh(prefix)
        self.locals[name] = ty
        return ir.Local(name, ty)

    def array(self, ty: TileTy, name: str) -> ir.SharedRef:
        sty = SharedTy(ty.elem, (ty.size,))
        self.shared[name] = sty
        return ir.SharedRef(name, sty)

    def var(self, name: str, ty: TileTy) -> _Arr:
        hit = self.arrays.get(name)
        if hit is None:
            hit = self.arrays[name] = _Arr(self.array(ty, self.fresh(f"tile_{name}_")), ty)
        return hit

    def temp(self, ty: TileTy) -> _Arr:
        key = (ty.elem.name, ty.size)
        free = self.pool.setdefault(key, [])
        ref = free.pop() if free else self.array(ty, self.fresh("tmp"))
        self.taken.append((key, ref))
        return _Arr(ref, ty)

    def release(self) -> None:
        for key, ref in self.taken:
            self.pool[key].append(ref)
        self.taken = []

    # ---- ids -----------------------------------------------------------------------------------
    def tid(self) -> ir.Expr:
        return ir.Cast(ir.RawId("tid", "x", I32), I64)

    def pid(self, rank: int, axis: int) -> ir.Expr:
        if self.grouped is not None and rank == 2:
            return self.grouped[axis]
        cuda_axis = "xyz"[rank - 1 - axis]  # the column is x, the row y, the layer z
        return ir.Cast(ir.RawId("ctaid", cuda_axis, I32), I64)

    def group_programs(self) -> list[ir.Stmt]:
        """Program ids in grouped order for a 2-D kernel with tensor-core matmuls: block (y, x)
        computes tile (row, col) of a bijection of the grid in which 8 tile rows sweep the
        columns together, so the operand rows they share stay in L2.  Invisible to the
        program: a tile kernel writes and reads back only its own tile of an output (the
        typer's ownership rules), so which block computes which tile changes nothing else."""
        g = env_int("ANODIZE_TILE_GROUP") or 8  # (benchmarking: 1 is row-major order)
        raw = lambda reg, axis: ir.Cast(ir.RawId(reg, axis, I32), I64)  # noqa: E731
        gx, gy = raw("nctaid", "x"), raw("nctaid", "y")
        y = raw("ctaid", "y")
        first, gs = self.local(I64, "pfirst"), self.local(I64, "pgs")
        row, col = self.local(I64, "prow"), self.local(I64, "pcol")
        left = _bin("-", gy, first)
        # program p = y gx + x (x < gx) is in group p // (g gx) = y // g, at i = (y % g) gx + x
        # of it, its tile (first + i % gs, i // gs); with r = y % g, gx = q gs + t and
        # x = qx gs + tx, i // gs = r q + qx + (r t + tx) // gs and i % gs = (r t + tx) % gs:
        # 32-bit divisions by gs (1..g) where i // gs on 64 bits was a subroutine to ptxas
        u = lambda e: ir.Cast(e, U32)  # noqa: E731
        d, rq, q, qx, sm = (self.local(U32, n) for n in ("pd", "pr", "pq", "pqx", "ps"))
        ub = lambda op, a, b: _bin(op, a, b, U32)  # noqa: E731
        gxu, xu = ir.RawId("nctaid", "x", U32), ir.RawId("ctaid", "x", U32)
        out = [
            ir.Assign(first.name, _bin("*", _bin("//", y, _c(g)), _c(g))),
            ir.Assign(gs.name, ir.IfExp(_lt(left, _c(g)), left, _c(g), I64)),
            ir.Assign(d.name, u(gs)),
            ir.Assign(rq.name, u(_bin("-", y, first))),
            ir.Assign(q.name, ub("//", gxu, d)),
            ir.Assign(qx.name, ub("//", xu, d)),
            ir.Assign(sm.name, ub("+", ub("*", rq, ub("-", gxu, ub("*", q, d))), ub("-", xu, ub("*", qx, d)))),
            ir.Assign(row.name, _bin("+", first, ir.Cast(ub("%", sm, d), I64))),
            ir.Assign(col.name, ir.Cast(ub("+", ub("+", ub("*", rq, q), qx), ub("//", sm, d)), I64)),
        ]
        self.grouped = (row, col)
        return out

    # ---- the kernel ------------------------------------------------------------------------------
    def run(self) -> ir.KernelIR:
        pre = self.group_programs() if self.plan is not None and self.plan.sites and self.k.domain == 2 else []
        body = pre + self.stmts(self.k.body)
        raw = lambda reg, axis: ir.RawId(reg, axis, I32)  # noqa: E731
        conds = [_lt(raw("tid", "x"), _c(self.T, I32), I32), _eq(raw("tid", "y"), _c(0, I32)),
                 _eq(raw("tid", "z"), _c(0, I32))]
        if self.k.domain < 3:
            conds.append(_eq(raw("ctaid", "z"), _c(0, I32)))
        if self.k.domain == 1:
            conds.append(_eq(raw("ctaid", "y"), _c(0, I32)))
        decls = [ir.SharedDecl(n, t) for n, t in self.shared.items() if n not in dict(self.k.shared)]
        # a launch whose block is not the one this code divides the elements over would leave
        # elements uncomputed: it computes nothing and faults instead
        block_ok = _and(_eq(raw("ntid", "x"), _c(self.T, I32)), _eq(raw("ntid", "y"), _c(1, I32)), _eq(raw("ntid", "z"), _c(1, I32)))
        site = ir.FaultSite(self.k.path, self.k.line, 1, f"block: a tile kernel runs with blocks of exactly {self.T} threads here (num_warps * 32; launch it through the kernel object, which fills in the block)", "")
        check = ir.If(block_ok, (), (ir.Assert(ir.Const(False, BOOL), len(self.k.fault_sites)),))
        contract = self.k.contract
        if contract is not None and self.T > 1:  # the block is the compiler's: `.reqntid`, and launches checked against it
            contract = replace(contract, block=(self.T,) + (1,) * (self.k.domain - 1))
        return replace(
            self.k,
            contract=contract,
            tile_warps=0,  # plain IR now
            fault_sites=(*self.k.fault_sites, site),
            body=(*decls, check, ir.If(_and(block_ok, *conds), tuple(body), ())),
            locals=tuple(self.locals.items()),
            shared=tuple(self.shared.items()),
            uses_shared=bool(self.shared),
            uses_barrier=self.k.uses_barrier or self.uses_barrier,
            uses_warp=self.k.uses_warp or self.uses_warp,
        )

    def barrier(self) -> list[ir.Stmt]:
        self.pending = {}
        if self.T == 1:
            return []
        self.uses_barrier = True
        return [ir.Barrier()]

    def note(self, name: str, write: bool, identity: bool) -> None:
        """An access of array (or output) `name` by the element loop being built."""
        if self.acc is not None:
            self.acc.seen.add((name, write, identity))

    def sync(self, seen: set[tuple[str, bool, bool]]) -> list[ir.Stmt]:
        """A barrier before a loop making `seen` accesses when one of them may touch an element
        another thread touched since the last barrier (one of the two a write, not both at
        the thread's own element); then the loop's accesses are pending."""
        out: list[ir.Stmt] = []
        for name, w, i in seen:
            if any((w or w2) and not (i and i2) for w2, i2 in self.pending.get(name, ())):
                out = self.barrier()
                break
        for name, w, i in seen:
            self.pending.setdefault(name, set()).add((w, i))
        return out

    def foreign_pending(self) -> bool:
        return any(not i for acc in self.pending.values() for _, i in acc)

    def body_of(self, body: tuple[ir.Stmt, ...], loop: bool) -> tuple[ir.Stmt, ...]:
        """A compound statement's body: a loop body ends with a barrier when anything is
        pending (its next iteration may touch what this one did)."""
        out = self.stmts(body)
        if loop and self.pending:
            out += self.barrier()
        return tuple(out)

    # ---- statements ------------------------------------------------------------------------------
    def stmts(self, body: tuple[ir.Stmt, ...]) -> list[ir.Stmt]:
        att = lower_attention(self, body)  # the attention form: the whole kernel body, or None
        if att is not None:
            return att
        out: list[ir.Stmt] = []
        for s in body:
            if self.plan is not None and id(s) in self.plan.pipelined:
                out.extend(pipelined_loop(self, s))  # type: ignore[arg-type]
            elif self.plan is not None and isinstance(s, ir.ForRange) and not self.prefetch \
                    and (pre := prefetching_loop(self, s)) is not None:
                out.extend(pre)
            else:
                out.extend(self.stmt(s))
            self.release()
        return out

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(s, ir.Assign):
            ty = s.value.ty
            if isinstance(ty, TileWitnessTy):
                return []
            if isinstance(ty, TileTy):
                if self.plan is not None and s.name in self.plan.registers:
                    return assign_registers(self, s)
                if self.plan is not None and s.name in self.plan.staged:
                    return []  # read only as tensor-core operands, each staging its load again
                return self.assign_tile(s.name, s.value)
            return [replace(s, value=self.scalar(s.value))]
        if isinstance(s, TileStore):
            return self.store(s)
        if isinstance(s, ir.If):
            pre = self.barrier() if self.foreign_pending() else []
            start = {k: set(v) for k, v in self.pending.items()}
            body = self.body_of(s.body, False)
            after = self.pending
            self.pending = start
            orelse = self.body_of(s.orelse, False)
            for k, v in after.items():
                self.pending.setdefault(k, set()).update(v)
            return [*pre, replace(s, cond=self.scalar(s.cond), body=body, orelse=orelse)]
        if isinstance(s, ir.While):
            pre = self.barrier() if self.foreign_pending() else []
            start = {k: set(v) for k, v in self.pending.items()}
            body = self.body_of(s.body, True)
            self.pending = start
            return [*pre, replace(s, cond=self.scalar(s.cond), body=body)]
        if isinstance(s, ir.ForRange):
            pre = self.barrier() if self.foreign_pending() else []
            start = {k: set(v) for k, v in self.pending.items()}
            body = self.body_of(s.body, True)
            self.pending = start
            return [*pre, replace(s, start=self.scalar(s.start), stop=self.scalar(s.stop), step=self.scalar(s.step), body=body)]
        if isinstance(s, ir.ExprStmt):
            if isinstance(s.value.ty, (TileTy, TileWitnessTy)):
                return []  # a tile expression as a statement computes nothing observable
            return [replace(s, value=self.scalar(s.value))]
        if isinstance(s, (ir.Break, ir.Continue)):
            # leaving the body skips its closing barrier: settle what is pending first
            return [*(self.barrier() if self.pending else []), s]
        if isinstance(s, ir.Assert):
            return [replace(s, cond=self.scalar(s.cond))]
        if isinstance(s, ir.Return):
            return [s if s.value is None else replace(s, value=self.scalar(s.value))]
        return [s]

    # ---- scalar expressions (the program id is the only tile construct in them) ---------------
    def scalar(self, e: Any) -> Any:
        if isinstance(e, TileIdPart):
            return self.pid(e.rank, e.axis)
        if isinstance(e, (ir.FuncIR, ir.Const, ir.Local, ir.RawId, ir.SliceRef, ir.SharedRef)):
            return e
        return map_children(e, self.scalar)

    # ---- tile statements ---------------------------------------------------------------------------
    def assign_tile(self, name: str, value: ir.Expr) -> list[ir.Stmt]:
        ty: TileTy = value.ty  # type: ignore[assignment]
        dest = self.var(name, ty)
        out: list[ir.Stmt] = []
        tree = self.compute.matmul(value, out, want=dest) if isinstance(value, TileMatmul) else self.prep(value, out)
        if isinstance(tree, _Arr) and tree.ref is dest.ref:
            return out  # computed in place (a matmul or reduction into its own variable)
        if self.hazard(tree, dest.ref, ty.shape):
            tmp = self.temp(ty)
            out += self.fill(tmp, tree)
            tree = tmp
        out += self.fill(dest, tree)
        return out

    def store(self, s: TileStore) -> list[ir.Stmt]:
        ty: TileTy = s.value.ty  # type: ignore[assignment]
        out: list[ir.Stmt] = []
        tree = self.prep(s.value, out)
        if self.plan is not None:
            if reads_registers(tree):
                return out + store_registers(self, s, tree)
        rank = ty.rank
        if self.moved_load(tree, s.slice.name):
            # the value reads the output's own tile at other elements (`tile.load(c, pid, s).T`):
            # evaluated inline, element e's thread would read an element another thread (or a
            # later element of its own loop) stores: read the whole tile into a temporary first
            tmp = self.temp(ty)
            out += self.fill(tmp, tree)
            tree = tmp

        def body(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            pre: list[ir.Stmt] = []
            v = self.ev(tree, coords, pre)
            where = [_bin("+", _bin("*", self.pid(rank, a), _c(ty.shape[a])), coords[a]) for a in range(rank)]
            inside = _and(*(_lt(w, ir.Len(s.slice, a, I64)) for a, w in enumerate(where)))
            write = ir.Write(s.slice, tuple(where), v, False, -1, s.span)
            self.note("global " + s.slice.name, True, True)
            if self.unmasked:
                return [*pre, write]
            return [ir.If(inside, (*pre, write), ())]

        own = [_le(_bin("*", self.pid(rank, a), _c(ty.shape[a])), _bin("-", ir.Len(s.slice, a, I64), _c(ty.shape[a])))
               for a in range(rank)]
        out += self.loop(ty, body, self.all_inside(tree, own))
        return out

    # ---- the fast path: every tile of a loop inside its slice ------------------------------------
    def loads_in(self, tree: Any) -> list[TileLoad]:
        if isinstance(tree, TileLoad):
            return [tree]
        if isinstance(tree, (TileTrans, TileReshape)):
            return self.loads_in(tree.value)
        if isinstance(tree, TileElem):
            return [ld for _, v in tree.inputs for ld in self.loads_in(v)]
        if isinstance(tree, Op):
            return [ld for v in tree.tiles() for ld in self.loads_in(v)]
        return []

    def all_inside(self, tree: Any, extra: list[ir.Expr] = ()) -> ir.Expr | None:  # type: ignore[assignment]
        """The condition (the same on every thread) under which every load of `tree` is inside
        its slice: `0 <= offset <= extent - shape` per axis (no overflow: the shape is small)."""
        conds = list(extra)
        for ld in self.loads_in(tree):
            for a, off in enumerate(ld.offset):
                conds.append(ir.Compare(("<=",), (_c(0), off), BOOL, None, (I64,)))
                conds.append(_le(off, _bin("-", ir.Len(ld.slice, a, I64), _c(ld.ty.shape[a]))))
        return _and(*conds) if conds else None

    # ---- element loops -----------------------------------------------------------------------------
    def coords(self, e: ir.Expr, shape: tuple[int, ...]) -> list[ir.Expr]:
        return _unflat(e, shape)

    def loop(self, ty: TileTy, body: Any, inside: ir.Expr | None = None) -> list[ir.Stmt]:
        """`for e in range(tid, size, threads)`: body(e, coords of e) per element, after a
        barrier when its accesses need one (`sync`).  With `inside` (every tile the loop loads
        or stores is inside its slice), a second copy without the per-element masks runs when
        it holds."""
        e = self.local(I64, "e")
        start: ir.Expr = self.tid() if self.T > 1 else _c(0)
        coords = self.coords(e, ty.shape)
        saved, self.acc = self.acc, _Access(ty.shape, coords)
        try:
            stmts = body(e, coords)
            fast = None
            if inside is not None:
                self.unmasked = True
                try:
                    fast = body(e, coords)
                finally:
                    self.unmasked = False
            seen = self.acc.seen
        finally:
            self.acc = saved
        slow_loop = self.strided(e, start, ty.size, stmts)
        if fast is None:
            return [*self.sync(seen), slow_loop]
        fast_loop = self.strided(e, start, ty.size, fast)
        return [*self.sync(seen), ir.If(inside, (fast_loop,), (slow_loop,))]  # type: ignore[arg-type]

    def strided(self, e: ir.Local, start: ir.Expr, size: int, body: list[ir.Stmt]) -> ir.Stmt:
        """`e` over `start, start + threads, ...` below `size`: a loop with a constant trip count
        when the threads divide the tile (so LLVM can unroll it and batch its loads)."""
        if self.T > 1 and size % self.T == 0:
            i = self.local(I64, "i")
            set_e = ir.Assign(e.name, _bin("+", start, _bin("*", i, _c(self.T))))
            return ir.ForRange(i.name, _c(0), _c(size // self.T), _c(1), (set_e, *body))
        return ir.ForRange(e.name, start, _c(size), _c(self.T), tuple(body))

    def identity(self, coords: list[ir.Expr], shape: tuple[int, ...]) -> bool:
        """Are `coords` of a tile of `shape` the loop's own element (so this thread's)?"""
        a = self.acc
        if self.frag is not None:
            return False  # a fragment loop's thread is not the element loop's owner of the element
        return a is not None and shape == a.shape and len(coords) == len(a.coords) and all(
            c is d for c, d in zip(coords, a.coords, strict=True)
        )

    def fill(self, dest: _Arr, tree: Any) -> list[ir.Stmt]:
        def body(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            pre: list[ir.Stmt] = []
            v = self.ev(tree, coords, pre)
            self.note(dest.ref.name, True, True)
            return [*pre, ir.SharedWrite(dest.ref, (e,), v, False, -1)]

        return self.loop(dest.ty, body, self.all_inside(tree))

    # ---- materialising what cannot be evaluated inline --------------------------------------------
    def prep(self, x: Any, out: list[ir.Stmt]) -> Any:
        """`x` with every reduction, matmul and node with a loop of its own (ops.py `computes`)
        computed into an array first (statements to `out`)."""
        if isinstance(x, ir.Local) and isinstance(x.ty, TileTy):
            if self.plan is not None and x.name in self.plan.registers:
                return registers_of(self, x.name, x.ty)
            return self.var(x.name, x.ty)
        if isinstance(x, TileElem):
            return replace(x, inputs=tuple((n, self.prep(v, out)) for n, v in x.inputs))
        if isinstance(x, TileTrans):
            return replace(x, value=self.prep(x.value, out))
        if isinstance(x, TileReshape):
            inner = self.prep(x.value, out)
            if isinstance(inner, _Arr):  # an array in row-major order is every shape of its size
                return _Arr(inner.ref, x.ty)
            return replace(x, value=inner)
        if isinstance(x, TileArange):
            return x
        if isinstance(x, TileFull):
            return replace(x, value=self.scalar(x.value))
        if isinstance(x, TileLoad):
            return replace(x, offset=tuple(self.scalar(o) for o in x.offset), other=self.scalar(x.other))
        if isinstance(x, TileReduce):
            if self.plan is not None and id(x) in self.plan.row_reduces:
                return row_reduce(self, x, out)
            return self.compute.reduce(x, out)
        if isinstance(x, TileMatmul):
            return self.compute.matmul(x, out)
        if type(x) in ELEMENTWISE:  # an op's own node (ops.py)
            return Op(x, [self.prep(c, out) if is_tile(c) else self.scalar(c) for c in children(x)])
        if type(x) in COMPUTES:  # an op's own node with a loop of its own (ops.py), into the tiles it declares
            args = [self.prep(c, out) if is_tile(c) else self.scalar(c) for c in children(x)]
            return COMPUTES[type(x)](self, x, args, [self.temp(t) for t in x.temporaries(self.T)], out)
        raise AssertionError(f"not a tile expression: {type(x).__name__}")

    # ---- hazards -----------------------------------------------------------------------------------
    def hazard(self, tree: Any, ref: ir.SharedRef, shape: tuple[int, ...]) -> bool:
        """Does `tree` read the array `ref` at an element other than the one being written?"""
        if isinstance(tree, _Arr):
            return tree.ref is ref and tree.ty.shape != shape
        if isinstance(tree, (TileTrans, TileReshape)):
            return self.reads(tree.value, ref)
        if isinstance(tree, TileElem):
            return any(
                (v.ty.shape != shape and self.reads(v, ref)) or self.hazard(v, ref, shape) for _, v in tree.inputs
            )
        if isinstance(tree, Op):
            return any((v.ty.shape != shape and self.reads(v, ref)) or self.hazard(v, ref, shape) for v in tree.tiles())
        return False

    def moved_load(self, tree: Any, name: str, moved: bool = False) -> bool:
        """Does `tree` load slice `name` at coordinates other than the element being computed
        (under a transpose, or broadcast)?"""
        if isinstance(tree, TileLoad):
            return moved and tree.slice.name == name
        if isinstance(tree, (TileTrans, TileReshape)):
            return self.moved_load(tree.value, name, True)
        if isinstance(tree, TileElem):
            return any(self.moved_load(v, name, moved or v.ty.shape != tree.ty.shape) for _, v in tree.inputs)
        if isinstance(tree, Op):
            return any(self.moved_load(v, name, moved or v.ty.shape != tree.ty.shape) for v in tree.tiles())
        return False

    def reads(self, tree: Any, ref: ir.SharedRef) -> bool:
        if isinstance(tree, _Arr):
            return tree.ref is ref
        if isinstance(tree, (TileTrans, TileReshape)):
            return self.reads(tree.value, ref)
        if isinstance(tree, TileElem):
            return any(self.reads(v, ref) for _, v in tree.inputs)
        if isinstance(tree, Op):
            return any(self.reads(v, ref) for v in tree.tiles())
        return False

    # ---- one element of a tile tree ----------------------------------------------------------------
    def ev(self, x: Any, coords: list[ir.Expr], pre: list[ir.Stmt]) -> ir.Expr:
        """Element `coords` of tile tree `x` (statements it needs appended to `pre`)."""
        if is_register_tile(x):  # a tile the register plan holds (only with a plan in force)
            return read_register(self, x, coords)
        if isinstance(x, _Arr):
            shape = x.ty.shape
            self.note(x.ref.name, False, self.identity(coords, shape))
            return ir.SharedRead(x.ref, (_flat(coords, shape),), False, -1, x.ty.elem)
        if isinstance(x, TileFull):
            return x.value
        if isinstance(x, TileTrans):
            return self.ev(x.value, coords[::-1], pre)
        if isinstance(x, TileReshape):
            return self.ev(x.value, reshape_coords(coords, x.ty.shape, x.value.ty.shape), pre)  # type: ignore[union-attr]
        if isinstance(x, TileArange):
            return ir.Cast(coords[0], I32)
        if isinstance(x, TileElem):
            for name, v in x.inputs:
                self.locals[name] = v.ty.elem
                pre.append(ir.Assign(name, self.ev(v, self.broadcast(coords, x.ty.shape, v.ty.shape), pre)))
            return self.scalar(x.template)  # type: ignore[no-any-return]
        if isinstance(x, Op):  # element e of each tile operand into a local, then the op's element
            args: list[ir.Expr] = []
            for c in x.kids:
                if isinstance(getattr(c, "ty", None), TileTy):
                    v = self.local(c.ty.elem, "op")
                    pre.append(ir.Assign(v.name, self.ev(c, self.broadcast(coords, x.ty.shape, c.ty.shape), pre)))
                    c = v
                args.append(c)
            return x.lower(args)
        if isinstance(x, TileLoad):
            if x.slice.ty.kind.output:  # the program's own tile of an output: stored by these threads?
                self.note("global " + x.slice.name, False, self.identity(coords, x.ty.shape))
            at = [_bin("+", o, c) for o, c in zip(x.offset, coords, strict=True)]
            frag = self.frag is not None and self.frag_loads is not None and pred_load_kind(x.ty.elem.name)
            if self.unmasked and not frag:  # the whole tile is inside `src` (the loop's `inside` condition)
                return ir.Read(x.slice, tuple(at), False, -1, x.ty.elem)
            if frag:  # (in a fragment loop's fast copy: loads that pair up, pair_loads.py)
                return self.frag_load(x, at, coords[-1] is self.frag[1][-1] and self.frag[0] % 2 == 0)
            v = self.local(x.ty.elem, "ld")
            slots = [self.local(I64, "at") for _ in at]
            if self.frag is not None and self.frag_loads is not None:
                pre = self.frag_loads  # a fragment loop issues a batch of elements' loads first (tile/lower.py)
            pre += [ir.Assign(s.name, a) for s, a in zip(slots, at, strict=True)]
            inside = _and(*(
                _and(ir.Compare(("<=",), (_c(0), s), BOOL, None, (I64,)), _lt(s, ir.Len(x.slice, axis, I64)))
                for axis, s in enumerate(slots)
            ))
            pre += [ir.Assign(v.name, x.other),
                    ir.If(inside, (ir.Assign(v.name, ir.Read(x.slice, tuple(slots), False, -1, x.ty.elem)),), ())]
            return v
        raise AssertionError(f"not evaluable inline: {type(x).__name__}")

    def frag_load(self, x: TileLoad, at: list[ir.Expr], even: bool = False) -> ir.Expr:
        """A fragment loop's masked load: one predicated load (codegen/tile/epilogue.py
        `TilePredLoad`) among the batch issued ahead, once per element of `x` the loop reads
        (a row's bias serves both fragment rows), its address the element's row address (one
        a fragment row, as the stores') plus its column as a constant displacement."""
        key = (id(x), repr(at))
        hit = self.frag_memo.get(key)
        if hit is not None:
            return hit
        hit = self.frag_memo[key] = self.local(x.ty.elem, "ld")
        self.frag_even[hit.name] = even and self.unmasked  # (an even layout column at the load's column offset plus it)
        parts = [_split_const(a) for a in at]
        row: ir.Local | None = None
        if len(at) <= 2:
            rkey = (id(x), *(repr(p) for p, _ in parts[:-1]), *(d for _, d in parts[:-1]), repr(parts[-1][0]))
            row = self.frag_memo.get(rkey)
            if row is None:  # the flat index of (the element's row, its column less the constant), wrapping
                row = self.frag_memo[rkey] = self.local(I64, "lr")
                flat = parts[-1][0] if len(at) == 1 else \
                    _bin("+", _bin("*", at[0], ir.Len(x.slice, 1, I64)), parts[-1][0])
                self.frag_loads.append(ir.Assign(row.name, flat))
        self.frag_loads.append(TilePredLoad(hit.name, x.slice, tuple(at), x.other, not x.slice.ty.kind.output, None, row,
                                            parts[-1][1] if row is not None else 0))
        return hit

    @staticmethod
    def broadcast(coords: list[ir.Expr], out: tuple[int, ...], inp: tuple[int, ...]) -> list[ir.Expr]:
        return broadcast_coords(coords, out, inp)


def _split_const(e: ir.Expr) -> tuple[ir.Expr, int]:
    """`e` as (an expression, a constant) summing to it: the fragment loops' coordinates are
    `origin + constant`, and a load's index `offset + coordinate`."""
    if isinstance(e, ir.BinOp) and e.op == "+":
        if isinstance(e.right, ir.Const) and type(e.right.value) is int:
            return e.left, e.right.value
        inner, d = _split_const(e.right)
        if d or inner is not e.right:  # (a `+ 0` dropped: one row local for the columns 0 and 1)
            return _bin("+", e.left, inner, e.ty), d
    return e, 0


def broadcast_coords(coords: list[ir.Expr], out: tuple[int, ...], inp: tuple[int, ...]) -> list[ir.Expr]:
    """The coordinates in a tile of shape `inp` of element `coords` of its broadcast to `out`."""
    lead = len(out) - len(inp)
    return [_c(0) if d == 1 and out[lead + a] != 1 else coords[lead + a] for a, d in enumerate(inp)]


def reshape_coords(coords: list[ir.Expr], out: tuple[int, ...], inp: tuple[int, ...]) -> list[ir.Expr]:
    """The coordinates in a tile of shape `inp` of element `coords` of its reshape to `out`
    (row-major order kept): where the two shapes differ only by axes of extent 1 these are
    `coords` with those axes' zeros dropped or added, else the flat index taken apart."""
    if [d for d in out if d != 1] == [d for d in inp if d != 1]:
        kept = iter([c for c, d in zip(coords, out, strict=True) if d != 1])
        return [_c(0) if d == 1 else next(kept) for d in inp]
    return _unflat(_flat(coords, out), inp)



# (the kinds of tile node the lowering knows; `TileId` only ever initialises a witness local)
_KNOWN = (TileId, TileIdPart, TileLoad, TileFull, TileElem, TileTrans, TileReduce, TileReshape, TileArange, TileMatmul, TileStore)

"""Tile kernels to plain kernel IR: a model-to-model pass run before `lower_llvm.py`.

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
* the program id is `ctaid` (x the column, y the row); the whole body runs under
  `tid.x < threads and tid.y == tid.z == 0 and ctaid.z == 0` (and `ctaid.y == 0` for a 1-D
  domain), so a launch with more threads or an unused grid dimension never gives a tile
  two writers.

The canonical GEMM form (a K loop of `acc = tile.matmul(tile.load(a, ..), tile.load(b, ..),
acc)` and a store of `acc` or `acc.astype(T)`) is recognised in one place,
`tile_gemm.match_gemm`, and lowered by `tile_gemm.lower_gemm` (generic until a tensor-core
routine is plugged in there).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any

from anodize.language import ir
from anodize.language.tile_ir import (
    TileElem,
    TileFull,
    TileId,
    TileIdPart,
    TileLoad,
    TileMatmul,
    TileReduce,
    TileStore,
    TileTrans,
    TileTy,
    TileWitnessTy,
)
from anodize.language.types import BOOL, F32, I32, I64, ScalarTy, SharedTy

__all__ = ["lower_tiles", "is_tile_kernel", "ProgramsOnHost"]


def is_tile_kernel(k: ir.KernelIR) -> bool:
    return getattr(k, "tile_warps", 0) > 0


def lower_tiles(k: ir.KernelIR, threads: int) -> ir.KernelIR:
    """The plain IR of tile kernel `k` for a block of `threads` threads (`k` itself when it
    is not a tile kernel)."""
    if not is_tile_kernel(k):
        return k
    return _Lowering(k, threads).run()


class ProgramsOnHost:
    """The CPU entry of a tile kernel: each program (block) runs on one host thread, whatever
    block the launch names (the code is lowered for `threads=1` and its guard leaves any other
    thread idle, so this only saves the idle ones)."""

    def __init__(self, inner: Any):
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __call__(self, grid_xyz: Any, block_xyz: Any, flat_args: Any, fault_address: int, launch_rank: int, dynamic_shared: int = 0) -> None:
        self.inner(grid_xyz, (1, 1, 1), flat_args, fault_address, launch_rank, dynamic_shared)


class _Access:
    """The element loop being built: its shape, its element's coordinates, what it touches."""

    __slots__ = ("shape", "coords", "seen")

    def __init__(self, shape: tuple[int, ...], coords: list[ir.Expr]):
        self.shape = shape
        self.coords = coords
        self.seen: set[tuple[str, bool, bool]] = set()


class _Arr:
    """A tile held in a shared array (a variable or a temporary), as a node of a tile tree."""

    __slots__ = ("ref", "ty")

    def __init__(self, ref: ir.SharedRef, ty: TileTy):
        self.ref = ref
        self.ty = ty


def _c(v: int, ty: ScalarTy = I64) -> ir.Const:
    return ir.Const(v, ty)


def _bin(op: str, a: ir.Expr, b: ir.Expr, ty: ScalarTy = I64) -> ir.Expr:
    return ir.BinOp(op, a, b, ty)


def _fma(a: ir.Expr, b: ir.Expr, c: ir.Expr) -> ir.Expr:
    """a * b + c in f32, rounded once (`fma.rn.f32`; the host's fused multiply-add on the CPU)."""
    return ir.MathCall("fma", (a, b, c), F32)


def _lt(a: ir.Expr, b: ir.Expr, ty: ScalarTy = I64) -> ir.Expr:
    return ir.Compare(("<",), (a, b), BOOL, None, (ty,))


def _le(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Compare(("<=",), (a, b), BOOL, None, (I64,))


def _eq(a: ir.Expr, b: ir.Expr, ty: ScalarTy = I32) -> ir.Expr:
    return ir.Compare(("==",), (a, b), BOOL, None, (ty,))


def _and(*xs: ir.Expr) -> ir.Expr:
    return xs[0] if len(xs) == 1 else ir.BoolOp("and", tuple(xs), BOOL)


class _Lowering:
    def __init__(self, k: ir.KernelIR, threads: int):
        self.k = k
        self.T = threads
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
        cuda_axis = "x" if rank == 1 or axis == rank - 1 else "y"
        return ir.Cast(ir.RawId("ctaid", cuda_axis, I32), I64)

    # ---- the kernel ------------------------------------------------------------------------------
    def run(self) -> ir.KernelIR:
        body = self.stmts(self.k.body)
        raw = lambda reg, axis: ir.RawId(reg, axis, I32)  # noqa: E731
        conds = [_lt(raw("tid", "x"), _c(self.T, I32), I32), _eq(raw("tid", "y"), _c(0, I32)),
                 _eq(raw("tid", "z"), _c(0, I32)), _eq(raw("ctaid", "z"), _c(0, I32))]
        if self.k.domain == 1:
            conds.append(_eq(raw("ctaid", "y"), _c(0, I32)))
        decls = [ir.SharedDecl(n, t) for n, t in self.shared.items() if n not in dict(self.k.shared)]
        # a launch whose block is not the one this code divides the elements over would leave
        # elements uncomputed: it computes nothing and faults instead
        block_ok = _and(_eq(raw("ntid", "x"), _c(self.T, I32)), _eq(raw("ntid", "y"), _c(1, I32)), _eq(raw("ntid", "z"), _c(1, I32)))
        site = ir.FaultSite(self.k.path, self.k.line, 1, f"block: a tile kernel runs with blocks of exactly {self.T} threads here (num_warps * 32; launch it through the kernel object, which fills in the block)", "")
        check = ir.If(block_ok, (), (ir.Assert(ir.Const(False, BOOL), len(self.k.fault_sites)),))
        return replace(
            self.k,
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
        from .tile_gemm import lower_gemm, match_gemm

        out: list[ir.Stmt] = []
        i = 0
        while i < len(body):
            s = body[i]
            form = match_gemm(body, i, self)
            if form is not None:
                done = lower_gemm(self, form)
                if done is not None:
                    out.extend(done)
                    i = form.end
                    continue
            out.extend(self.stmt(s))
            self.release()
            i += 1
        return out

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(s, ir.Assign):
            ty = s.value.ty
            if isinstance(ty, TileWitnessTy):
                return []
            if isinstance(ty, TileTy):
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
        if not is_dataclass(e) or isinstance(e, (ir.FuncIR, ir.Const, ir.Local, ir.RawId, ir.SliceRef, ir.SharedRef)):
            return e
        changes = {}
        for f in fields(e):
            v = getattr(e, f.name)
            if hasattr(v, "ty") and is_dataclass(v):
                nv = self.scalar(v)
            elif isinstance(v, tuple) and any(hasattr(x, "ty") for x in v):
                nv = tuple(self.scalar(x) for x in v)
            else:
                continue
            if nv is not v:
                changes[f.name] = nv
        return replace(e, **changes) if changes else e

    # ---- tile statements ---------------------------------------------------------------------------
    def assign_tile(self, name: str, value: ir.Expr) -> list[ir.Stmt]:
        ty: TileTy = value.ty  # type: ignore[assignment]
        dest = self.var(name, ty)
        out: list[ir.Stmt] = []
        tree = self.matmul(value, out, want=dest) if isinstance(value, TileMatmul) else self.prep(value, out)
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
        rank = ty.rank

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
        if isinstance(tree, TileTrans):
            return self.loads_in(tree.value)
        if isinstance(tree, TileElem):
            return [ld for _, v in tree.inputs for ld in self.loads_in(v)]
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
        if len(shape) == 1:
            return [e]
        return [_bin("//", e, _c(shape[1])), _bin("%", e, _c(shape[1]))]

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
        """`x` with every reduction and matmul computed into an array first (statements to `out`)."""
        if isinstance(x, ir.Local) and isinstance(x.ty, TileTy):
            return self.var(x.name, x.ty)
        if isinstance(x, TileElem):
            return replace(x, inputs=tuple((n, self.prep(v, out)) for n, v in x.inputs))
        if isinstance(x, TileTrans):
            return replace(x, value=self.prep(x.value, out))
        if isinstance(x, TileFull):
            return replace(x, value=self.scalar(x.value))
        if isinstance(x, TileLoad):
            return replace(x, offset=tuple(self.scalar(o) for o in x.offset), other=self.scalar(x.other))
        if isinstance(x, TileReduce):
            return self.reduce(x, out)
        if isinstance(x, TileMatmul):
            return self.matmul(x, out)
        raise AssertionError(f"not a tile expression: {type(x).__name__}")

    def staged(self, x: Any, out: list[ir.Stmt]) -> Any:
        """`x` readable cheaply at any element: an array (or a transposed one, or a fill)."""
        t = x
        while isinstance(t, TileTrans):
            t = t.value
        if isinstance(t, (_Arr, TileFull)):
            return x
        tmp = self.temp(x.ty)
        if isinstance(x, TileTrans) and x.ty.rank == 2 and not isinstance(x.value, TileTrans):
            out += self.fill_transposed(tmp, x.value)
        else:
            out += self.fill(tmp, x)
        return tmp

    def fill_transposed(self, dest: _Arr, tree: Any) -> list[ir.Stmt]:
        """`dest = tree.T`, walking `tree`'s elements in its own order (so a load from global
        memory stays coalesced) and writing each to its transposed place."""
        ty: TileTy = tree.ty
        dest_cols = dest.ty.shape[1]

        def body(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            pre: list[ir.Stmt] = []
            v = self.ev(tree, coords, pre)
            self.note(dest.ref.name, True, False)
            flat = _bin("+", _bin("*", coords[1], _c(dest_cols)), coords[0])
            return [*pre, ir.SharedWrite(dest.ref, (flat,), v, False, -1)]

        return self.loop(ty, body, self.all_inside(tree))

    def reduce(self, x: TileReduce, out: list[ir.Stmt]) -> _Arr:
        """A reduction: with fewer results than threads, `parts` threads share each result
        (each combines a strided share of the reduced elements into a partial), then one
        thread per result combines the partials; else one thread per result."""
        src = self.prep(x.value, out)
        sty: TileTy = x.value.ty  # type: ignore[assignment]
        dest = self.temp(x.ty)
        elem = x.ty.elem
        extents = [sty.shape[a] for a in x.axes]
        n = 1
        for d in extents:
            n *= d
        op = {"sum": "+", "max": "max", "min": "min"}[x.op]
        warp_parts = self.T // x.ty.size if self.T % max(1, x.ty.size) == 0 else 0
        if self.T > 1 and warp_parts >= 32 and warp_parts % 32 == 0 and warp_parts <= n and elem.bits in (32, 64) and not elem.is_bool:
            return self.reduce_warps(x, src, sty, dest, elem, extents, n, op, warp_parts, out)
        parts = 1
        while parts * 2 * x.ty.size <= self.T and parts * 2 <= n:
            parts *= 2

        def combine(acc: ir.Local, coords: list[ir.Expr], r: ir.Expr, pre: list[ir.Stmt]) -> None:
            self.combine_into(x, src, sty, extents, elem, op, acc, coords, r, pre)

        if parts == 1:
            def body(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
                acc = self.local(elem, "acc")
                r = self.local(I64, "r")
                inner: list[ir.Stmt] = []
                combine(acc, coords, r, inner)
                self.note(dest.ref.name, True, True)
                return [ir.Assign(acc.name, self.neutral(x.op, elem)), ir.ForRange(r.name, _c(0), _c(n), _c(1), tuple(inner)),
                        ir.SharedWrite(dest.ref, (e,), acc, False, -1)]

            out += self.loop(x.ty, body)
            return dest
        scratch = self.temp(TileTy(elem, (x.ty.size * parts,)))

        def partial(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            acc = self.local(elem, "acc")
            r = self.local(I64, "r")
            res = _bin("//", e, _c(parts))
            rc = [res] if x.ty.rank == 1 else [_bin("//", res, _c(x.ty.shape[1])), _bin("%", res, _c(x.ty.shape[1]))]
            inner: list[ir.Stmt] = []
            combine(acc, rc, r, inner)
            self.note(scratch.ref.name, True, True)
            return [ir.Assign(acc.name, self.neutral(x.op, elem)),
                    ir.ForRange(r.name, _bin("%", e, _c(parts)), _c(n), _c(parts), tuple(inner)),
                    ir.SharedWrite(scratch.ref, (e,), acc, False, -1)]

        out += self.loop(scratch.ty, partial)

        def final(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            acc = self.local(elem, "acc")
            p = self.local(I64, "p")
            self.note(scratch.ref.name, False, False)
            self.note(dest.ref.name, True, True)
            read = ir.SharedRead(scratch.ref, (_bin("+", _bin("*", e, _c(parts)), p),), False, -1, elem)
            return [ir.Assign(acc.name, self.neutral(x.op, elem)),
                    ir.ForRange(p.name, _c(0), _c(parts), _c(1), (ir.Assign(acc.name, _bin(op, acc, read, elem)),)),
                    ir.SharedWrite(dest.ref, (e,), acc, False, -1)]

        out += self.loop(x.ty, final)
        return dest

    def combine_into(self, x: TileReduce, src: Any, sty: TileTy, extents: list[int], elem: ScalarTy, op: str,
                     acc: ir.Local, coords: list[ir.Expr], r: ir.Expr, pre: list[ir.Stmt]) -> None:
        """`acc = acc op src[...]` for reduced element `r` (flat over the reduced axes) of the
        result at `coords`."""
        idx: dict[int, ir.Expr] = {}
        rest = r
        for a, d in reversed(list(zip(x.axes, extents, strict=True))):
            idx[a] = rest if a == x.axes[0] else _bin("%", rest, _c(d))
            rest = _bin("//", rest, _c(d))
        at = [idx[a] if a in idx else coords[a] for a in range(sty.rank)]
        v = self.ev(src, at, pre)
        if v.ty != elem:
            v = ir.Cast(v, elem)
        pre.append(ir.Assign(acc.name, _bin(op, acc, v, elem)))

    def reduce_warps(self, x: TileReduce, src: Any, sty: TileTy, dest: _Arr, elem: ScalarTy, extents: list[int],
                     n: int, op: str, parts: int, out: list[ir.Stmt]) -> _Arr:
        """Every thread folds a strided share of one result's elements (`parts` threads per
        result, whole warps), the warp combines its lanes with `shfl.sync.bfly`, lane 0 of each
        warp leaves the warp's value in shared memory, and one thread per result folds those."""
        per = parts // 32
        scratch = self.temp(TileTy(elem, (self.T // 32,)))
        saved, self.acc = self.acc, _Access((), [])
        try:
            t = self.local(I64, "t")
            acc = self.local(elem, "acc")
            r = self.local(I64, "r")
            res = _bin("//", t, _c(parts))
            rc = [res] if x.ty.rank == 1 else [_bin("//", res, _c(x.ty.shape[1])), _bin("%", res, _c(x.ty.shape[1]))]
            inner: list[ir.Stmt] = []
            self.combine_into(x, src, sty, extents, elem, op, acc, rc, r, inner)
            body: list[ir.Stmt] = [ir.Assign(t.name, self.tid()), ir.Assign(acc.name, self.neutral(x.op, elem)),
                                   ir.ForRange(r.name, _bin("%", t, _c(parts)), _c(n), _c(parts), tuple(inner))]
            for m in (16, 8, 4, 2, 1):
                other = ir.WarpOp("shfl_xor", (acc, _c(m, I32)), elem)
                body.append(ir.Assign(acc.name, _bin(op, acc, other, elem)))
            lane0 = _eq(_bin("%", t, _c(32)), _c(0), I64)
            body.append(ir.If(lane0, (ir.SharedWrite(scratch.ref, (_bin("//", t, _c(32)),), acc, False, -1),), ()))
            self.note(scratch.ref.name, True, False)
            seen = self.acc.seen
        finally:
            self.acc = saved
        self.uses_warp = True
        out += [*self.sync(seen), *body]

        def final(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            a = self.local(elem, "acc")
            p = self.local(I64, "p")
            self.note(scratch.ref.name, False, False)
            self.note(dest.ref.name, True, True)
            read = ir.SharedRead(scratch.ref, (_bin("+", _bin("*", e, _c(per)), p),), False, -1, elem)
            return [ir.Assign(a.name, self.neutral(x.op, elem)),
                    ir.ForRange(p.name, _c(0), _c(per), _c(1), (ir.Assign(a.name, _bin(op, a, read, elem)),)),
                    ir.SharedWrite(dest.ref, (e,), a, False, -1)]

        out += self.loop(x.ty, final)
        return dest

    @staticmethod
    def neutral(op: str, ty: ScalarTy) -> ir.Expr:
        if op == "sum":
            return ir.Const(0.0 if ty.is_float else 0, ty)
        big = op == "min"
        if ty.is_float:
            return ir.Const(float("inf") if big else float("-inf"), ty)
        if ty.is_bool:
            return ir.Const(big, ty)
        bits = ty.bits
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if ty.signed else (0, (1 << bits) - 1)
        return ir.Const(hi if big else lo, ty)

    def matmul(self, x: TileMatmul, out: list[ir.Stmt], want: _Arr | None = None) -> _Arr:
        """`x` into `want` (the variable assigned) when that is safe in place, else a temporary."""
        a = self.staged(self.prep(x.x, out), out)
        b = self.staged(self.prep(x.y, out), out)
        acc = self.prep(x.acc, out) if x.acc is not None else None
        in_place = want is not None and not (
            self.reads(a, want.ref) or self.reads(b, want.ref) or (acc is not None and self.hazard(acc, want.ref, x.ty.shape))
        )
        dest = want if in_place and want is not None else self.temp(x.ty)
        kdim = x.x.ty.shape[1]  # type: ignore[union-attr]
        micro = self.micro_shape(*x.ty.shape)
        if micro is not None:
            out += self.matmul_micro(x, a, b, acc, dest, kdim, *micro)
            return dest

        def body(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            s = self.local(F32, "dot")
            pre: list[ir.Stmt] = []
            init = self.ev(acc, coords, pre) if acc is not None else ir.Const(0.0, F32)
            kk = self.local(I64, "k")
            inner: list[ir.Stmt] = []
            av = self.ev(a, [coords[0], kk], inner)
            bv = self.ev(b, [kk, coords[1]], inner)
            av = av if av.ty == F32 else ir.Cast(av, F32)
            bv = bv if bv.ty == F32 else ir.Cast(bv, F32)
            inner.append(ir.Assign(s.name, _fma(av, bv, s)))
            self.note(dest.ref.name, True, True)
            return [*pre, ir.Assign(s.name, init), ir.ForRange(kk.name, _c(0), _c(kdim), _c(1), tuple(inner)),
                    ir.SharedWrite(dest.ref, (e,), s, False, -1)]

        out += self.loop(x.ty, body)
        return dest

    def micro_shape(self, m: int, n: int) -> tuple[int, int] | None:
        """(rows, cols) of the block of a matmul's result each thread computes in registers, so
        that the threads cover it exactly once; None when no such split fits."""
        if self.T == 1:
            return None
        fits = [(r, c) for r in (8, 4, 2, 1) for c in (8, 4, 2, 1)
                if m % r == 0 and n % c == 0 and (m // r) * (n // c) == self.T and r * c >= 2]
        if not fits:
            return None
        return min(fits, key=lambda rc: (-rc[0] * rc[1], abs(rc[0] - rc[1]), -rc[1]))

    def matmul_micro(self, x: TileMatmul, a: Any, b: Any, acc: Any, dest: _Arr, kdim: int, mr: int, nc: int) -> list[ir.Stmt]:
        """The matmul with a register block per thread: thread t owns rows `t // (N / nc) + r * (M / mr)`
        and columns `t % (N / nc) + c * (N / nc)` (strided, so a warp's reads of `b` are
        consecutive and its reads of `a` one broadcast), accumulating mr x nc sums in registers
        over K, then writing them."""
        m, n = x.ty.shape
        saved, self.acc = self.acc, _Access((), [])  # no element here is "the loop's own"
        try:
            t = self.local(I64, "t")
            body: list[ir.Stmt] = [ir.Assign(t.name, self.tid())]
            cols_per = n // nc
            tr, tc = self.local(I64, "tr"), self.local(I64, "tc")
            body += [ir.Assign(tr.name, _bin("//", t, _c(cols_per))), ir.Assign(tc.name, _bin("%", t, _c(cols_per)))]
            rows = [self.local(I64, "row") for _ in range(mr)]
            cols = [self.local(I64, "col") for _ in range(nc)]
            body += [ir.Assign(v.name, _bin("+", tr, _c(r * (m // mr)))) for r, v in enumerate(rows)]
            body += [ir.Assign(v.name, _bin("+", tc, _c(c * cols_per))) for c, v in enumerate(cols)]
            sums = [[self.local(F32, "dot") for _ in range(nc)] for _ in range(mr)]
            for r in range(mr):
                for c in range(nc):
                    if acc is None:
                        body.append(ir.Assign(sums[r][c].name, ir.Const(0.0, F32)))
                    else:
                        v = self.ev(acc, [rows[r], cols[c]], body)
                        body.append(ir.Assign(sums[r][c].name, v if v.ty == F32 else ir.Cast(v, F32)))
            kk = self.local(I64, "k")
            inner: list[ir.Stmt] = []
            avs = [self.local(F32, "a") for _ in range(mr)]
            bvs = [self.local(F32, "b") for _ in range(nc)]
            for r, av in enumerate(avs):
                v = self.ev(a, [rows[r], kk], inner)
                inner.append(ir.Assign(av.name, v if v.ty == F32 else ir.Cast(v, F32)))
            for c, bv in enumerate(bvs):
                v = self.ev(b, [kk, cols[c]], inner)
                inner.append(ir.Assign(bv.name, v if v.ty == F32 else ir.Cast(v, F32)))
            for r in range(mr):
                for c in range(nc):
                    sv = sums[r][c]
                    inner.append(ir.Assign(sv.name, _fma(avs[r], bvs[c], sv)))
            body.append(ir.ForRange(kk.name, _c(0), _c(kdim), _c(1), tuple(inner)))
            for r in range(mr):
                for c in range(nc):
                    flat = _bin("+", _bin("*", rows[r], _c(n)), cols[c])
                    body.append(ir.SharedWrite(dest.ref, (flat,), sums[r][c], False, -1))
            self.note(dest.ref.name, True, False)
            seen = self.acc.seen
        finally:
            self.acc = saved
        return [*self.sync(seen), *body]

    # ---- hazards -----------------------------------------------------------------------------------
    def hazard(self, tree: Any, ref: ir.SharedRef, shape: tuple[int, ...]) -> bool:
        """Does `tree` read the array `ref` at an element other than the one being written?"""
        if isinstance(tree, _Arr):
            return tree.ref is ref and tree.ty.shape != shape
        if isinstance(tree, TileTrans):
            return self.reads(tree.value, ref)
        if isinstance(tree, TileElem):
            return any(
                (v.ty.shape != shape and self.reads(v, ref)) or self.hazard(v, ref, shape) for _, v in tree.inputs
            )
        return False

    def reads(self, tree: Any, ref: ir.SharedRef) -> bool:
        if isinstance(tree, _Arr):
            return tree.ref is ref
        if isinstance(tree, TileTrans):
            return self.reads(tree.value, ref)
        if isinstance(tree, TileElem):
            return any(self.reads(v, ref) for _, v in tree.inputs)
        return False

    # ---- one element of a tile tree ----------------------------------------------------------------
    def ev(self, x: Any, coords: list[ir.Expr], pre: list[ir.Stmt]) -> ir.Expr:
        """Element `coords` of tile tree `x` (statements it needs appended to `pre`)."""
        if isinstance(x, _Arr):
            shape = x.ty.shape
            flat = coords[0] if len(shape) == 1 else _bin("+", _bin("*", coords[0], _c(shape[1])), coords[1])
            self.note(x.ref.name, False, self.identity(coords, shape))
            return ir.SharedRead(x.ref, (flat,), False, -1, x.ty.elem)
        if isinstance(x, TileFull):
            return x.value
        if isinstance(x, TileTrans):
            return self.ev(x.value, coords[::-1], pre)
        if isinstance(x, TileElem):
            for name, v in x.inputs:
                self.locals[name] = v.ty.elem
                pre.append(ir.Assign(name, self.ev(v, self.broadcast(coords, x.ty.shape, v.ty.shape), pre)))
            return self.scalar(x.template)  # type: ignore[no-any-return]
        if isinstance(x, TileLoad):
            if x.slice.ty.kind.output:  # the program's own tile of an output: stored by these threads?
                self.note("global " + x.slice.name, False, self.identity(coords, x.ty.shape))
            at = [_bin("+", o, c) for o, c in zip(x.offset, coords, strict=True)]
            if self.unmasked:  # the whole tile is inside `src` (the loop's `inside` condition)
                return ir.Read(x.slice, tuple(at), False, -1, x.ty.elem)
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
        raise AssertionError(f"not evaluable inline: {type(x).__name__}")

    @staticmethod
    def broadcast(coords: list[ir.Expr], out: tuple[int, ...], inp: tuple[int, ...]) -> list[ir.Expr]:
        lead = len(out) - len(inp)
        return [_c(0) if d == 1 and out[lead + a] != 1 else coords[lead + a] for a, d in enumerate(inp)]


# (the kinds of tile node the lowering knows; `TileId` only ever initialises a witness local)
_KNOWN = (TileId, TileIdPart, TileLoad, TileFull, TileElem, TileTrans, TileReduce, TileMatmul, TileStore)

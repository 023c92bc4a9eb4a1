"""The register half of the tile lowering (codegen/tile/plain.py's pass calls in here when the
layout plan, language/tile_plan.py, puts tiles in registers).

A register tile of shape (M, N) is `MmaLayout.count` f32 (or its element type's) scalar locals
per thread, register i holding element `origin + layout.offset(i)`.  A statement producing or
storing one is a *fragment loop*: the thread's registers unrolled, each element computed with the
same inline evaluation as the generic element loops (`ev`: loads masked at the edges, broadcasts,
element-wise templates), reading a register tile only at the element being computed (the plan
guarantees it).  Everything else of the kernel (shared tiles, reductions, generic matmuls)
stays as it was; a fragment loop reads a shared tile at any element (after a barrier where one
is pending: its thread is never the element loop's owner of the element).

A tensor-core matmul becomes a `TileMma` (codegen/tile/mma.py); a pipelined loop (only such
matmuls, K advancing by the matmul's K each iteration) becomes one `TileMma` per matmul over
the loop's whole K range, the loop variable set to its first value for the offsets and to its
last value after.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from anodize.language import ir
from anodize.language.ir_walk import walk
from anodize.language.tile_ir import TileElem, TileReduce, TileTy
from anodize.language.tile_plan import MmaSite, mma_k_tile, plan_tiles
from anodize.language.types import BOOL, F32, I32, I64

from anodize.language.tile_storage import tile_storage_bound

from .compute import _Access, _bin, _c
from .layout import MmaLayout, RowLayout, choose_layout, row_of, stacked_enabled, wgmma_shape_ok
from .mask_skip import lazy_rescale, mask_skip, rescale_condition, skip_condition
from .epilogue import ELEM_BYTES, TileStagedStore, TileStageStart, TileStageWrite, stage_groups, staged_bytes, staged_epilogue
from .mma import MmaOperandIR, TileMma, TilePredStore
from .pair_loads import TilePairLoad, pair_condition, pair_up
from .prefetch import prefetch_loop, prefetched_sites
from .wgmma import smem_bytes, two_blocks_stages

__all__ = ["assign_registers", "env_int", "is_register_tile", "pipelined_loop", "plan_for", "read_register", "reads_registers", "registers_of",
           "prefetching_loop", "row_reduce", "store_registers"]


LOAD_BATCH = 8  # elements whose loads a fragment loop issues together


class _Frag:
    """A register tile as a node of a tile tree."""

    __slots__ = ("name", "ty", "regs", "layout")

    def __init__(self, name: str, ty: TileTy, regs: list[str], layout: MmaLayout):
        self.name, self.ty, self.regs, self.layout = name, ty, regs, layout


def env_int(name: str) -> int:
    """A benchmarking switch's integer value (codegen/toolchain.py CODE_SWITCHES), 0 unset."""
    v = os.environ.get(name, "")
    return int(v) if v.isdigit() else 0


def plan_for(low: Any) -> None:
    """Attach the layout plan to the lowering `low` (a GPU with tensor cores), when it puts any
    tile in registers."""
    plan = plan_tiles(low.k)
    if not plan.registers:
        return
    low.plan = plan
    low.typed = low.k
    # the next iteration's operands copied during this one (`ANODIZE_TILE_PREFETCH=0` stages each
    # tile at its matmul instead): on by default since the H100 checked every by-operations
    # attention spelling with it (session 15, bench/RESULTS.md)
    low.prefetch_ok = os.environ.get("ANODIZE_TILE_PREFETCH", "") != "0"
    low.k = plan.kernel  # (its matmuls hoisted into statements: language/tile_anf.py)
    warps = low.T // 32
    shapes = set(plan.registers.values()) | {(c.shape[0], c.shape[2]) for c in plan.sites.values() if c.x.load is None}
    for shape in shapes:
        if shape[1] != 1:
            # two m64 blocks a warpgroup only where wgmma's smallest ring (3 stages) fits: the layout
            # has no mma.sync fallback (never in row mode: its matmuls take A from registers on mma.sync)
            ring = 3 * (shape[0] + shape[1]) * 64 * 2 + 1024
            stack = not plan.rows and stacked_enabled() and ring <= low.shared_limit - tile_storage_bound(low.k)
            low.layouts[shape] = choose_layout(shape[0], shape[1], warps, low.wgmma, stack, plan.rows)
    for shape in shapes:
        if shape[1] == 1:
            low.layouts[shape] = RowLayout(shape[0], warps)


def registers_of(low: Any, name: str, ty: TileTy) -> _Frag:
    hit = low.registers.get(name)
    if hit is None:
        lay = low.layouts[ty.shape]
        regs = []
        for i in range(lay.count):
            r = low.fresh(f"r_{name}_{i}_")
            low.locals[r] = ty.elem
            regs.append(r)
        hit = low.registers[name] = _Frag(name, ty, regs, lay)
    return hit  # type: ignore[no-any-return]


def is_register_tile(x: Any) -> bool:
    """Is `x` a tile the register plan holds in registers (a fragment, read by `read_register`)?"""
    return isinstance(x, _Frag)


def reads_registers(tree: Any) -> bool:
    if isinstance(tree, _Frag):
        return True
    if isinstance(tree, TileElem):
        return any(reads_registers(v) for _, v in tree.inputs)
    return False


def read_register(low: Any, x: Any, coords: list[ir.Expr]) -> ir.Expr:
    """`ev` of a register tile: the register of the fragment loop's element (a row tile read in
    a loop over an accumulator layout: the register of the element's row)."""
    assert isinstance(x, _Frag), type(x).__name__
    assert low.frag is not None
    i, at, lay = low.frag
    if isinstance(x.layout, RowLayout) and isinstance(lay, MmaLayout):
        assert coords[0] is at[0], "a row tile read at another row than the fragment loop's (the plan forbids it)"
        return ir.Local(x.regs[row_of(lay, i)], x.ty.elem)
    assert all(c is d for c, d in zip(coords, at, strict=True)), \
        "a register tile read at another element than the fragment loop's (the plan forbids it)"
    return ir.Local(x.regs[i], x.ty.elem)


def _fragment_loop(low: Any, lay: MmaLayout, body: Any, inside: ir.Expr | None) -> list[ir.Stmt]:
    """body(i, coords) for each register i of the layout (unrolled); with `inside`, a second
    copy runs when it holds (`low.unmasked` set while it is built: its loads pair up,
    pair_loads.py).  `body` is called once a copy for each register, the slow copy first."""
    tid = low.tid()
    warp, lane = _bin("//", tid, _c(32)), _bin("%", tid, _c(32))
    r0, c0 = low.local(I64, "fr"), low.local(I64, "fc")
    if isinstance(lay, RowLayout):  # (every lane of a quad computes its rows' values)
        origin = [ir.Assign(r0.name, _bin("+", _bin("*", warp, _c(lay.m // lay.wm)), _bin("//", lane, _c(4)))),
                  ir.Assign(c0.name, _c(0))]
    else:
        if lay.stacked:  # warp w of warpgroup g: rows 64 mt g + 16 w (wn = 1)
            wrow = _bin("+", _bin("*", _bin("//", warp, _c(4)), _c(64 * lay.mt)), _bin("*", _bin("%", warp, _c(4)), _c(16)))
        else:
            wrow = _bin("*", _bin("//", warp, _c(lay.wn)), _c(lay.m // lay.wm))
        origin = [
            ir.Assign(r0.name, _bin("+", wrow, _bin("//", lane, _c(4)))),
            ir.Assign(c0.name, _bin("+", _bin("*", _bin("%", warp, _c(lay.wn)), _c(lay.n // lay.wn)),
                                    _bin("*", _bin("%", lane, _c(4)), _c(2)))),
        ]
    saved, low.acc = low.acc, _Access((lay.m, getattr(lay, "n", 1)), [])
    memos: tuple[dict[Any, Any], dict[Any, Any]] = ({}, {})  # each copy's loads by element (frag_load)
    low.frag_even = {}  # the fast copy's loads of even layout columns (pair_loads.py)
    slow: list[ir.Stmt] = []
    fast: list[ir.Stmt] = []
    batches: tuple[list[Any], list[Any]] = ([], [])

    def flush(copy: int) -> None:
        # a batch of elements' masked loads first, then their arithmetic and stores: the loads'
        # latencies overlap (each load sits in its own branch, which nothing hoists); in the
        # fast copy two adjacent columns' loads are one (pair_loads.py)
        loads = [st for part, _ in batches[copy] for st in part]
        into = fast if copy else slow
        into.extend(pair_up(loads, low.frag_even) if copy else loads)
        for _, rest in batches[copy]:
            into.extend(rest)
        batches[copy].clear()

    try:
        for i in range(lay.count):
            dr, dc = lay.offset(i)
            coords = [_bin("+", r0, _c(dr)), _bin("+", c0, _c(dc))]
            for copy in (0, 1) if inside is not None else (0,):
                low.frag, low.frag_memo, low.frag_loads, low.unmasked = (i, coords, lay), memos[copy], [], bool(copy)
                try:
                    rest = body(i, coords)
                finally:
                    low.unmasked = False
                batches[copy].append((low.frag_loads, rest))
                low.frag_loads = None
                if len(batches[copy]) == LOAD_BATCH:
                    flush(copy)
        flush(0)
        flush(1)
        seen = low.acc.seen
    finally:
        low.acc, low.frag, low.frag_loads = saved, None, None
        low.frag_memo, low.frag_even = {}, {}
    if not any(isinstance(st, TilePairLoad) for st in fast):
        inside = None  # (no two loads paired: the copy would be the same loads again)
    run: list[ir.Stmt] = slow if inside is None else [ir.If(inside, tuple(fast), tuple(slow))]
    return [*low.sync(seen), *origin, *run]


def assign_registers(low: Any, s: ir.Assign) -> list[ir.Stmt]:
    """`name = value` into a register tile: a tensor-core matmul, or a fragment loop."""
    site = low.plan.sites.get(id(s))
    if site is not None:
        return _mma(low, site, _c(1))
    ty: TileTy = s.value.ty  # type: ignore[assignment]
    dest = registers_of(low, s.name, ty)
    run = skip_condition(low, s) if mask_skip() else None
    out: list[ir.Stmt] = []
    tree = low.prep(s.value, out)
    if run is not None and not out:  # x = tile.where(affine cond, x, other): skipped where cond holds everywhere (mask_skip.py)
        return [ir.If(run, tuple(_fragment_assign(low, tree, dest)), ())]
    return out + _fragment_assign(low, tree, dest)


def _fragment_assign(low: Any, tree: Any, dest: Any) -> list[ir.Stmt]:
    """The fragment loop of `name = value` (each register's new value from the element's own)."""

    def body(i: int, coords: list[ir.Expr]) -> list[ir.Stmt]:
        # register i's new value reads the register tiles at element i only (the plan), so it
        # is written in place
        pre: list[ir.Stmt] = []
        v = low.ev(tree, coords, pre)
        return [*pre, ir.Assign(dest.regs[i], v)]

    return _fragment_loop(low, dest.layout, body, pair_condition(low, tree))


def store_registers(low: Any, s: Any, tree: Any) -> list[ir.Stmt]:
    """`tile.store(dst, pid, value)` of a value reading register tiles: each thread stores the
    elements it holds, each as one predicated store where it is inside `dst` (no branch, no
    unmasked twin: straight-line code for LLVM and ptxas beside the tile's mainloop)."""
    ty: TileTy = s.value.ty
    lay = low.layouts[ty.shape]
    assert ty.rank == 2
    staged = _staged(low, s, lay)
    if staged is not None:
        return staged(tree)
    g0 = [low.local(I64, "gr"), low.local(I64, "gc")]  # the thread's first row and column of `dst`
    rows: dict[tuple[bool, int], ir.Local] = {}  # (copy, row offset) -> the flat index of (that row, the thread's first column)

    def body(i: int, coords: list[ir.Expr]) -> list[ir.Stmt]:
        dr, dc = lay.offset(i)
        pre: list[ir.Stmt] = []
        if i == 0:  # (the fragment loop's origin is assigned before its first element)
            origin = [coords[0].left, coords[1].left]  # type: ignore[union-attr]
            for a in range(2):
                pre.append(ir.Assign(g0[a].name, _bin("+", _bin("*", low.pid(2, a), _c(ty.shape[a])), origin[a])))
        row = _bin("+", g0[0], _c(dr))
        key = (low.unmasked, dr)
        if key not in rows:  # the row's flat index once a copy (wrapping i64, as the bounds' address forms it)
            rows[key] = low.local(I64, "gb")
            pre.append(ir.Assign(rows[key].name, _bin("+", _bin("*", row, ir.Len(s.slice, 1, I64)), g0[1])))
        v = low.ev(tree, coords, pre)
        low.note("global " + s.slice.name, True, False)
        where = (row, _bin("+", g0[1], _c(dc)))
        return [*pre, TilePredStore(s.slice, where, v, s.span, rows[key], dc)]  # type: ignore[list-item]

    return _fragment_loop(low, lay, body, pair_condition(low, tree))


def _staged(low: Any, s: Any, lay: MmaLayout) -> Any:
    """The staged store of `s` (codegen/tile/epilogue.py) as a function of the value's tree,
    or None for per-element stores: f16 / bf16 / f32 elements, a tile whose staged copy fits
    the block's shared budget beside the kernel's own tiles (the matmul rings' budget), and no
    dynamic shared array of the kernel's own (the compiler's buffer would alias it)."""
    elem = s.slice.ty.elem.name
    if not staged_epilogue() or elem not in ELEM_BYTES or any(t.dynamic for t in low.shared.values()):
        return None
    nbytes = staged_bytes(lay, ELEM_BYTES[elem])
    if nbytes > low.shared_limit - tile_storage_bound(low.k):
        return None

    es = ELEM_BYTES[elem]
    stmatrix = bool(low.wgmma)  # (sm_90)
    groups = {regs[-1]: (regs, off, kind) for regs, off, kind in stage_groups(lay, es, stmatrix)}

    def run(tree: Any) -> list[ir.Stmt]:
        addr = low.local(I32, "sa")
        names: tuple[list[str], list[str]] = ([], [])  # each copy's values, by register

        def body(i: int, coords: list[ir.Expr]) -> list[ir.Stmt]:
            # each group of registers goes to shared memory once computed: few values live at once
            pre: list[ir.Stmt] = []
            v = low.ev(tree, coords, pre)
            low.note("global " + s.slice.name, True, False)
            ety = s.slice.ty.elem
            if elem == "f16" and isinstance(v, ir.Cast) and v.value.ty == F32:
                v, ety = v.value, F32  # rounded with its pair when written (one cvt.rn.f16x2.f32)
            mine = names[low.unmasked]
            mine.append(low.local(ety, "ev").name)
            out = [*pre, ir.Assign(mine[-1], v)]
            if i in groups:
                regs, off, kind = groups[i]
                out.append(TileStageWrite(addr.name, tuple(mine[r] for r in regs), off, kind))  # type: ignore[arg-type]
            return out

        out: list[ir.Stmt] = [TileStageStart(addr.name, lay, es, stmatrix)]  # type: ignore[list-item]
        out += _fragment_loop(low, lay, body, pair_condition(low, tree))
        low.uses_barrier = True
        low.pending = {}  # the statement ends with a barrier
        row0, col0 = (_bin("*", low.pid(2, a), _c(lay.m if a == 0 else lay.n)) for a in range(2))
        out.append(TileStagedStore(s.slice, lay, row0, col0, low.T, elem, nbytes, s.span))  # type: ignore[arg-type]
        return out

    return run


def _eval_into(low: Any, dest: _Frag, value: Any, out: list[ir.Stmt]) -> None:
    """A fragment loop setting `dest`'s registers to element-wise tree `value` (reading register
    tiles at the element being computed only, so in place)."""
    tree = low.prep(value, out)
    out += _fragment_assign(low, tree, dest)


def _row_regs(low: Any, name: str, ty: TileTy) -> list[str] | None:
    """The registers of row tile `name` where the plan holds it in registers, else None."""
    hit = low.registers.get(name)
    return list(hit.regs) if hit is not None and hit.ty == ty else None


def row_reduce(low: Any, x: TileReduce, out: list[ir.Stmt]) -> _Frag:
    """An axis-1 reduction of a register tile (the plan's `row_reduces`) into a row tile: each
    thread combines its registers of each of its rows, then the quad's four lanes theirs
    (`shfl.xor` 1 and 2), every lane ending with the row's value."""
    src = low.prep(x.value, out)
    vty: TileTy = x.value.ty  # type: ignore[assignment]
    if not isinstance(src, _Frag):
        src = registers_of(low, low.fresh("rv"), vty)
        _eval_into(low, src, x.value, out)
    full = src.layout
    dest = registers_of(low, low.fresh("row"), x.ty)
    elem = x.ty.elem
    op = {"sum": "+", "max": "max", "min": "min"}[x.op]
    for j in range(dest.layout.count):
        mi, h = divmod(j, 2)
        vals: list[ir.Expr] = [ir.Local(src.regs[(mi * full.nt + ni) * 4 + 2 * h + e], elem) for ni in range(full.nt) for e in (0, 1)]
        while len(vals) > 1:  # a balanced tree: short dependency chains
            vals = [_bin(op, vals[t], vals[t + 1], elem) if t + 1 < len(vals) else vals[t] for t in range(0, len(vals), 2)]
        out.append(ir.Assign(dest.regs[j], vals[0]))
    for mask in (1, 2):
        for r in dest.regs:
            out.append(ir.Assign(r, _bin(op, ir.Local(r, elem), ir.WarpOp("shfl_xor", (ir.Local(r, elem), _c(mask, I32)), elem), elem)))
    low.uses_warp = True
    return dest


def mma_sync_k_step(m: int, n: int, warps: int, k_tile: int, row_mode: bool) -> int:
    """The K step of an mma.sync mainloop whose operands both come through the cp.async ring:
    32 where the plan's 64 would sit beside an accumulator of 32 or more registers a thread
    (ptxas keeps a 64-wide step's ldmatrix fragments live beside it: 128x64 over 4 warps took
    255 registers and spilled 24 bytes, 64x128 over 8 warps 216; at 32, 208 and 118, no spills);
    row mode (attention by operations) and register or resident A operands keep the plan's."""
    if k_tile != 64 or m * n // (32 * warps) < 32 or row_mode:
        return k_tile
    return 32 if mma_k_tile(m, n, 32, warps) == 32 else k_tile


def _mma(low: Any, site: MmaSite, trips: ir.Expr) -> list[ir.Stmt]:
    """The `TileMma` of a tensor-core matmul over `trips` steps of its K."""
    k = low.k
    name = site.stmt.name
    ty: TileTy = site.stmt.value.ty  # type: ignore[assignment]
    dest = registers_of(low, name, ty)
    out: list[ir.Stmt] = []
    acc_out: list[ir.Stmt] = []
    if site.stmt.value.acc is None:  # type: ignore[union-attr]
        acc_out += [ir.Assign(r, ir.Const(0.0, F32)) for r in dest.regs]
    elif site.acc is not None:  # `acc * alpha`: into the target's registers
        lazy = rescale_condition(name, site.acc, lambda n, t: _row_regs(low, n, t)) if lazy_rescale() else None
        if lazy is None:
            _eval_into(low, dest, site.acc, acc_out)
        else:  # skipped where every alpha is exactly 1.0 (mask_skip.py, lazy rescale)
            rescale: list[ir.Stmt] = []
            _eval_into(low, dest, site.acc, rescale)
            acc_out.append(ir.If(lazy, tuple(rescale), ()))
            low.uses_warp = True
    a_regs: tuple[str, ...] = ()
    a_out: list[ir.Stmt] = []
    if site.x.load is None:  # `p.astype(f16)`: its (M, K) registers are the A fragments
        held = low.prep(site.x.regs, a_out)
        if is_register_tile(held):  # a register tile itself (`qt` held across the loop): its registers
            a_regs = tuple(held.regs)
        else:
            a_ty: TileTy = site.x.regs.ty
            a = registers_of(low, low.fresh("opa"), a_ty)
            _eval_into(low, a, site.x.regs, a_out)
            a_regs = tuple(a.regs)
    # an A expression reading the target (`acc = tile.matmul(acc.astype(f16), w)`) is evaluated
    # before the target's registers are overwritten; else after (the order the GPU verified)
    reads_target = site.x.regs is not None and any(isinstance(e, ir.Local) and e.name == name for e in walk(site.x.regs))
    out += [*a_out, *acc_out] if reads_target else [*acc_out, *a_out]
    m, n, kk = site.shape
    warps = low.T // 32
    lay = dest.layout
    # A staged once before its loop and read from shared memory (codegen/tile/prefetch.py, resident A)
    resident = site.x.load is not None and id(site.stmt) in low.prefetch
    engine = "mma"
    if low.wgmma and lay.wn == 1 and (wgmma_shape_ok(m, n, warps) or lay.stacked) and not a_regs and not resident:
        engine = "wgmma"
    ops = [None if op.load is None or (resident and op is site.x) else
           MmaOperandIR(op.load.slice, tuple(low.scalar(o) for o in op.load.offset),
                        (op.load.ty.shape[0], op.load.ty.shape[1]), op.trans) for op in (site.x, site.y)]
    kt = mma_sync_k_step(m, n, warps, site.k_tile, bool(a_regs or resident or low.plan.rows))
    stage = (m + n) * (64 if engine == "wgmma" else kt) * 2
    budget = max(low.shared_limit - tile_storage_bound(k), 2 * stage)
    stages = next(st for st in ((4, 3) if engine == "wgmma" else (4, 3, 2)) if st * stage <= budget or st == 2)
    if engine == "wgmma" and stages * stage > budget:
        assert not lay.stacked, "a stacked wgmma layout whose ring does not fit (plan_for checks it)"
        engine, stage = "mma", (m + n) * kt * 2
        stages = next(st for st in (4, 3, 2) if st * stage <= budget or st == 2)
    if engine == "mma" and stages == 4 and lay.count >= 128:
        stages = 3
    want = getattr(k, "tile_stages", 0)  # an autotuning configuration's `num_stages` (anodize/autotuning.py)
    if want in ((4, 3) if engine == "wgmma" else (4, 3, 2)) and want * stage <= budget:
        stages = want
    elif engine == "wgmma":  # the compiler's own choice: two blocks an SM where a ring allows it
        two = two_blocks_stages(lay, low.T, low.shared_limit, tile_storage_bound(k))
        if two is not None:
            stages = two
    forced = env_int("ANODIZE_TILE_STAGES")  # (benchmarking: any ring depth that fits)
    if forced in ((3, 4, 5, 6) if engine == "wgmma" else (2, 3, 4, 5)) and forced * stage <= budget:
        stages = forced
    dyn = smem_bytes(lay, stages) if engine == "wgmma" else stages * stage
    pf = None
    if a_regs or resident:  # B's whole K x N tile, one stage (or its loop's two slots: codegen/tile/prefetch.py)
        stages, dyn = 1, kk * n * 2
        pf, total = low.prefetch.get(id(site.stmt), (None, 0))
        if pf is not None:
            stages, dyn = 2, total
            engine = "wgmma" if pf.wgmma else "mma"  # (codegen/tile/attn_wgmma.py)
    site_i = len(k.fault_sites)
    span = site.stmt.span
    low.k = replace(k, fault_sites=(*k.fault_sites, ir.FaultSite(
        k.path, span.line if span is not None else k.line, 1,
        "matmul: a tile matmul on tensor cores takes operands of fewer than 2**31 - 4096 rows and columns", "")))
    low.uses_barrier = True
    low.pending = {}  # the statement ends with a barrier
    out.append(TileMma(tuple(dest.regs), lay, ops[0], ops[1], kk, trips, kt, site.elem, warps, stages,
                       engine, site_i, dyn, span, a_regs, pf))  # type: ignore[arg-type]
    return out


def prefetching_loop(low: Any, loop: ir.ForRange) -> list[ir.Stmt] | None:
    """`loop` with its register-A matmuls' B tiles prefetched across iterations (codegen/tile/prefetch.py),
    or None when it does not qualify."""
    if not low.prefetch_ok:
        return None
    sites = prefetched_sites(low, loop)
    return None if sites is None else prefetch_loop(low, loop, sites)


def pipelined_loop(low: Any, loop: ir.ForRange) -> list[ir.Stmt]:
    """A loop of tensor-core matmuls only: one `TileMma` per matmul over the loop's K range."""
    start, stop = low.scalar(loop.start), low.scalar(loop.stop)
    step = int(loop.step.value)  # type: ignore[union-attr, arg-type]  # (a positive int: tile_plan._pipelines)
    vty = dict(low.locals).get(loop.var, I64)
    s0 = low.local(vty, "lo")
    s1 = low.local(vty, "hi")
    out: list[ir.Stmt] = [ir.Assign(s0.name, start), ir.Assign(s1.name, stop), ir.Assign(loop.var, s0)]
    trips = _bin("//", _bin("+", _bin("-", s1, s0, vty), _c(step - 1, vty), vty), _c(step, vty), vty)
    trips64 = trips if vty == I64 else ir.Cast(trips, I64)
    for s in loop.body:
        out += _mma(low, low.plan.sites[id(s)], trips64)
        low.release()
    last = _bin("+", s0, _bin("*", _bin("//", _bin("-", _bin("-", s1, s0, vty), _c(1, vty), vty), _c(step, vty), vty),
                                   _c(step, vty), vty), vty)
    out.append(ir.If(ir.Compare(("<",), (s0, s1), BOOL, None, (vty,)), (ir.Assign(loop.var, last),), ()))
    return out

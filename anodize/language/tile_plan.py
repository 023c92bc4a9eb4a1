"""Where a tile kernel's tiles live on a GPU with tensor cores: the layout plan, decided from
operations (never from the shape of a whole kernel body), in the language so that the on-chip
bound (language/tile_storage.py) and the lowering (codegen/tile/) read one decision.

Two kinds of tile value exist after planning:

- **register tiles** live in the tensor-core accumulator layout: every thread holds
  `M * N / threads` elements in registers, at the (row, col) the mma/wgmma fragment layout
  gives it (codegen/tile/layout.py).  A tile local is a register tile when its shape is the
  result shape of a tensor-core matmul of the kernel and every use of it is one the layout
  serves: the accumulator of such a matmul into itself, or an element-wise expression
  (casts, arithmetic, broadcasts of loads or other tiles, `tile.where`) whose result is a
  register tile of the same shape or is stored.  A transpose, a reduction or a matmul operand
  of it would need a conversion to another layout: the local stays in shared memory then.
- **everything else** lives where the generic lowering puts it (codegen/tile/plain.py:
  block shared memory, element loops).

A **tensor-core matmul** (`mma_sites`) is an assignment `acc = tile.matmul(x, y, acc)` (or
`acc = tile.matmul(x, y)`) whose target is a register tile, whose operands are each a
`tile.load` of a 2-D input slice (or its `.T`: the transposed operand path, never a copy) of
f16 or bf16 (both the same), reading zero past the slice, with a tile shape the tensor-core
routines take (`mma_tile_problem`) and an accumulator that fits a thread's registers
(`accumulator_fits`).  Its operands are staged in shared memory the routine owns (dynamic, up
to `STAGING_LIMIT`: the least a block may opt into on any arch with tensor cores), so neither
the operands nor the register tiles count toward the 48 KiB static bound.

A `for` loop whose body is only tensor-core matmuls, each with its operands' K offset advancing
by exactly the tile's K per iteration (an affine offset of the loop variable) and its other
offsets fixed, is **pipelined** (`pipelined_loops`): each matmul becomes one pass over the whole
K range the loop covers, with a multi-stage cp.async ring (codegen/tile/mma.py).

The plan reads the kernel with its matmuls hoisted out of element-wise expressions
(language/tile_anf.py; `TilePlan.kernel`).  An operand may also be a local assigned once from
such a load (staged again at the matmul), and the A operand an element-wise f16/bf16
expression (`p.astype(f16)`) held in registers; the accumulator argument may be an
element-wise expression of the target (`acc * alpha`).  Where a register A operand or an axis-1
reduction of a register tile needs it, the plan is in **row mode** (docs/tiles.md, "Attention
by operations"): every register tile over a (warps, 1) grid, (M, 1) tiles in registers in the
row slice of that layout, axis-1 reductions of register tiles done there (`row_reduces`).
"""

from __future__ import annotations

from typing import Any

from anodize.language import ir
from anodize.language.ir_walk import node_fields, walk
from anodize.language.records import dataclass
from anodize.language.tile_anf import hoist_matmuls
from anodize.language.tile_ir import TileElem, TileLoad, TileMatmul, TileReduce, TileStore, TileTrans, TileTy

__all__ = ["ACC_HEADROOM", "STAGING_LIMIT", "MmaOperand", "MmaSite", "TilePlan", "accumulator_fits", "affine_coef",
           "gemm_warp_grid", "mma_k_tile", "mma_tile_problem", "plan_tiles", "row_mode_ok", "staging_bytes"]

# the smallest shared memory a block may opt into on an arch with tensor cores (sm_86/89: 99 KiB;
# sm_80/87: 163; sm_90: 227): a matmul's two-stage operand ring plus the kernel's other tiles fit in it
STAGING_LIMIT = 99 * 1024
# a two-stage ring of every tensor-core matmul fits beside the kernel's static tiles (at most 48 KiB,
# language/tile_storage.py) in that least opt-in: the plan never depends on the other tiles
RING_LIMIT = STAGING_LIMIT - 48 * 1024
ACC_HEADROOM = 32  # registers a thread needs beside its register tiles (addresses, fragments, the pipeline)
TC_ELEMS = ("f16", "bf16")


@dataclass(frozen=True)
class MmaOperand:
    """A matmul operand: the loaded tile (its shape as loaded) and whether the matmul reads it
    transposed (`.T`); `local`: the tile local the matmul names, assigned once from that load
    (the routine stages the load again at the matmul); or, `load` None, `regs`: an element-wise
    expression (the A operand `p.astype(f16)`) whose accumulator-layout registers are the mma
    A fragments themselves."""

    load: TileLoad | None
    trans: bool
    local: str = ""
    regs: Any = None


@dataclass(frozen=True)
class MmaSite:
    stmt: ir.Assign
    x: MmaOperand
    y: MmaOperand
    shape: tuple[int, int, int]  # (M, N, K)
    elem: str
    k_tile: int  # the routine's K step (a multiple of 16)
    acc: Any = None  # the accumulator when it is an expression of the target (`acc * alpha`), not the target itself


@dataclass(frozen=True)
class TilePlan:
    registers: dict[str, tuple[int, int]]  # register tile -> its shape (the layout's)
    sites: dict[int, MmaSite]  # id(Assign) -> the tensor-core matmul
    pipelined: dict[int, ir.ForRange]  # id(ForRange) -> a loop of tensor-core matmuls only
    generic: tuple[tuple[Any, str], ...]  # (span, why) of each matmul left on the generic path (compile -v)
    kernel: Any = None  # the kernel planned: its matmuls hoisted into statements (language/tile_anf.py)
    rows: bool = False  # row mode: every register tile over a (warps, 1) grid, (M, 1) row tiles in registers
    row_reduces: frozenset[int] = frozenset()  # ids of the axis-1 reductions of register tiles (in registers)
    staged: frozenset[str] = frozenset()  # tile locals only ever read as tensor-core operands: never materialised

    def staging(self) -> int:
        """The largest two-stage operand ring of the kernel's tensor-core matmuls (bytes)."""
        return max((staging_bytes(s) for s in self.sites.values()), default=0)


def gemm_warp_grid(bm: int, bn: int, warps: int) -> tuple[int, int] | None:
    """(warps along M, warps along N) of the mma.sync layout: the one with the fewest ldmatrix a
    k-step, ties to taller; None when no layout fits."""
    best: tuple[int, int, int] | None = None
    for wm in range(1, warps + 1):
        if warps % wm:
            continue
        wn = warps // wm
        if bm % (wm * 16) or bn % (wn * 16):
            continue
        cost = bm // wm // 16 + bn // wn // 16
        if best is None or cost < best[0] or (cost == best[0] and wm < best[1]):
            best = (cost, wm, wn)
    return None if best is None else (best[1], best[2])


def _splits(rows: int, cols: int, threads: int) -> bool:
    return cols >= 8 and (rows * cols // 8) % threads == 0


def mma_k_tile(m: int, n: int, k: int, warps: int) -> int | None:
    """The routine's K step for an (m, n, k) matmul over `warps` warps: a multiple of 16 whose A
    and B tiles split into 16-byte copies over the block (either way round) and whose two-stage
    ring fits in `RING_LIMIT`, at most 64 and at most k where k allows; None when none does."""
    threads = warps * 32
    for tk in (min(k, 64), 32, 16):
        if tk % 16 == 0 and tk > 0 and _splits(m, tk, threads) and _splits(tk, n, threads) and _splits(n, tk, threads) \
                and _splits(tk, m, threads) and 2 * (m + n) * tk * 2 <= RING_LIMIT:
            return tk
    return None


def mma_tile_problem(m: int, n: int, k: int, warps: int) -> str | None:
    """Why the tensor-core routines cannot take an (m, n, k) matmul over `warps` warps, or None."""
    if k % 16 or k < 16:
        return "its K extent must be a multiple of 16"
    for name, v in (("M", m), ("N", n)):
        if v <= 0 or v & (v - 1):
            return f"its {name} extent must be a power of two, not {v}"
    if gemm_warp_grid(m, n, warps) is None:
        return f"no layout of {warps} warps over a {m}x{n} accumulator in 16x16 steps"
    if mma_k_tile(m, n, k, warps) is None:
        return f"its operand tiles do not split into 16-byte copies over {warps * 32} threads in a ring of {RING_LIMIT} bytes"
    if not accumulator_fits(m, n, warps):
        more = next((w for w in (8, 16, 32) if w > warps and accumulator_fits(m, n, w)), None)
        fix = f"`num_warps={more}` would share it" if more else "no warp count of a block holds it: a smaller tile"
        return f"a {m}x{n} f32 accumulator over {warps} warps leaves a thread no registers ({fix})"
    return None


def accumulator_fits(bm: int, bn: int, warps: int) -> bool:
    """Do a thread's accumulator registers (BM * BN / threads f32) leave room (`ACC_HEADROOM`)
    within a thread's registers (255, and 64K a block)?"""
    threads = warps * 32
    return bm * bn // threads + ACC_HEADROOM <= min(255, 65536 // threads)


def staging_bytes(site: MmaSite, stages: int = 2) -> int:
    m, n, k = site.shape
    if site.x.load is None:  # A in registers: B's whole K x N tile, one stage
        return k * n * 2
    return stages * (m + n) * site.k_tile * 2


# ---- the plan --------------------------------------------------------------------------------


def _operand(e: Any, loaded: dict[str, TileLoad]) -> MmaOperand | None:
    trans = False
    if isinstance(e, TileTrans):
        e, trans = e.value, True
    local = ""
    if isinstance(e, ir.Local) and e.name in loaded:
        local, e = e.name, loaded[e.name]
    if not isinstance(e, TileLoad):
        return None
    kind = e.slice.ty.kind
    if kind.output or kind.disjoint or e.slice.ty.rank != 2 or e.ty.elem.name not in TC_ELEMS or not _is_zero(e.other):
        return None
    return MmaOperand(e, trans, local)


def _register_operand(e: Any) -> MmaOperand | None:
    """An A operand computed element-wise (`p.astype(f16)`): in registers, in the accumulator
    layout of its (M, K) shape, which is the mma A fragment layout (row mode's (warps, 1) grid)."""
    if isinstance(e, TileElem) and e.ty.rank == 2 and e.ty.elem.name in TC_ELEMS:
        return MmaOperand(None, False, regs=e)
    return None


def _loaded_locals(k: ir.KernelIR) -> dict[str, TileLoad]:
    """Tile locals assigned exactly once, by a statement of the kernel's top level, from a
    `tile.load` whose offsets read only locals assigned at most once, at the top level: the same
    load anywhere after that statement gives the same tile (an input slice is never written)."""
    counts: dict[str, int] = {}
    nested: set[str] = set()
    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.Assign):
            counts[s.name] = counts.get(s.name, 0) + 1
        if isinstance(s, ir.ForRange):
            nested.add(s.var)
        if isinstance(s, (ir.If, ir.While, ir.ForRange)):
            nested |= {t.name for t in ir.walk_stmts(s.body) if isinstance(t, ir.Assign)}
            nested |= {t.name for t in ir.walk_stmts(getattr(s, "orelse", ())) if isinstance(t, ir.Assign)}
    out: dict[str, TileLoad] = {}
    for s in k.body:
        if isinstance(s, ir.Assign) and isinstance(s.value, TileLoad) and counts.get(s.name) == 1 and s.name not in nested:
            names = {n.name for n in walk(s.value.offset) if isinstance(n, ir.Local)}
            if all(counts.get(n, 0) <= 1 and n not in nested for n in names):
                out[s.name] = s.value
    return out


def _site(s: ir.Assign, warps: int, loaded: dict[str, TileLoad]) -> MmaSite | str:
    """The tensor-core matmul of assignment `s` (a matmul), or why not."""
    mm = s.value
    assert isinstance(mm, TileMatmul)
    x, y = _operand(mm.x, loaded) or _register_operand(mm.x), _operand(mm.y, loaded)
    if mm.x.ty.elem.name == "f32" or mm.y.ty.elem.name == "f32":
        return "its operands are f32 (tensor cores take f16 and bf16 here; `allow_tf32=True` is not lowered to them yet)"
    if x is None or y is None:
        return ("an operand is not a `tile.load` of an f16/bf16 input (or its `.T`, or a local assigned once from one) "
                "reading zero past the edges, nor (the first) an element-wise f16/bf16 expression")
    if mm.x.ty.elem != mm.y.ty.elem:
        return "its operands have different element types"
    acc = None
    if mm.acc is not None and not (isinstance(mm.acc, ir.Local) and mm.acc.name == s.name):
        if not (isinstance(mm.acc, TileElem) and mm.acc.ty.shape == mm.ty.shape and mm.ty.elem.name == "f32"):
            return "its accumulator is neither the variable it assigns nor an element-wise expression of its shape"
        acc = mm.acc
    m, k = mm.x.ty.shape
    n = mm.y.ty.shape[1]
    problem = mma_tile_problem(m, n, k, warps)
    if problem is not None:
        return problem
    tk = mma_k_tile(m, n, k, warps)
    assert tk is not None
    if x.load is None:
        if not _splits(k, n, warps * 32) or k * n * 2 > RING_LIMIT:
            return f"its {k}x{n} B tile does not split into 16-byte copies over {warps * 32} threads within {RING_LIMIT} bytes"
        tk = k
    return MmaSite(s, x, y, (m, n, k), mm.x.ty.elem.name, tk, acc)


A_HELD_LIMIT = 64  # 16-bit elements a thread may hold of an A operand kept in registers across a loop


def _held_a(c: MmaSite, warps: int) -> MmaSite | None:
    """Site `c` with its A operand, a local loaded once (not transposed), held in registers in
    the accumulator layout of its (M, K) shape instead of staged again at each matmul: when
    that layout is row mode's and a thread's share is at most `A_HELD_LIMIT` elements."""
    m, n, k = c.shape
    if not c.x.local or c.x.trans or c.x.load is None or m % (16 * warps) or k % 16:
        return None
    if m * k // (warps * 32) > A_HELD_LIMIT or not _splits(k, n, warps * 32) or k * n * 2 > RING_LIMIT:
        return None
    return MmaSite(c.stmt, MmaOperand(None, False, regs=ir.Local(c.x.local, c.x.load.ty)), c.y, c.shape, c.elem, k, c.acc)


def row_mode_ok(shapes: set[tuple[int, int]], warps: int) -> bool:
    """Can every register shape take the (warps, 1) grid (each warp whole rows: row tiles and
    register A operands need it)?"""
    return all(m % (16 * warps) == 0 and n % 16 == 0 for m, n in shapes)


def plan_tiles(k: ir.KernelIR) -> TilePlan:
    """The layout plan of tile kernel `k` on a GPU with tensor cores (the module's docstring)."""
    k = hoist_matmuls(k)
    warps = max(getattr(k, "tile_warps", 0), 1)
    assigns = [s for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign)]
    why: dict[int, tuple[Any, str]] = {}
    cands: dict[int, MmaSite] = {}
    dynamic = any(getattr(t, "dynamic", False) for _, t in k.shared)
    loaded = _loaded_locals(k)
    for s in assigns:
        if isinstance(s.value, TileMatmul):
            got = _site(s, warps, loaded)
            if dynamic and isinstance(got, MmaSite):
                got = "the kernel declares a dynamic shared array of its own (the routine's ring would alias it)"
            if isinstance(got, str):
                why[id(s)] = (s.value.span or s.span, got)
            else:
                cands[id(s)] = got
    shapes = {(c.shape[0], c.shape[1]) for c in cands.values()}
    a_shapes = {(c.shape[0], c.shape[2]) for c in cands.values() if c.x.load is None}
    reduced = any(isinstance(n, TileReduce) and n.axes == (1,) and getattr(n.value.ty, "shape", None) in shapes for n in walk(k.body))
    rows = bool(a_shapes or reduced) and row_mode_ok(shapes | a_shapes, warps)
    if rows:  # an A operand loaded once (`qt` before the loop) is held in registers, its fragments loaded once
        for key, c in list(cands.items()):
            held = _held_a(c, warps)
            if held is not None:
                cands[key] = held
                a_shapes.add((c.shape[0], c.shape[2]))
    for key, c in list(cands.items()):
        if c.x.load is None and not rows:
            why[key] = (c.stmt.value.span or c.stmt.span, f"its A operand in registers needs every register tile over a "
                        f"({warps}, 1) grid of warps (M a multiple of {16 * warps}, N and K of 16)")
            del cands[key]
    shapes = {(c.shape[0], c.shape[1]) for c in cands.values()}
    a_shapes = {(c.shape[0], c.shape[2]) for c in cands.values() if c.x.load is None}
    operand_locals = {op.local for c in cands.values() for op in (c.x, c.y) if op.local}
    regs: dict[str, tuple[int, int]] = {n: (t.shape[0], t.shape[1]) for n, t in k.locals
            if isinstance(t, TileTy) and t.rank == 2 and n not in operand_locals
            and (t.shape in shapes or (rows and t.shape in a_shapes) or (rows and t.shape[1] == 1 and any(t.shape[0] == m for m, _ in shapes)))}
    found: set[int] = set()
    while True:
        found = set()
        bad = _misused(k.body, regs, cands, shapes | a_shapes if rows else shapes, rows, found)
        if not bad:
            break
        for n in bad:
            regs.pop(n, None)
    sites = {}
    for key, c in cands.items():
        if c.stmt.name in regs:
            sites[key] = c
        else:
            why[key] = (c.stmt.value.span or c.stmt.span, f"`{c.stmt.name}` is also used where the accumulator layout "
                        "cannot serve it (a transpose, a reduction or a matmul operand of it)")
    site_values = {id(c.stmt.value) for c in cands.values()} | {id(s.value) for s in assigns if id(s) in why}
    for node in walk(k.body):
        if isinstance(node, TileMatmul) and id(node) not in site_values:
            why[id(node)] = (node.span, "it is not assigned to a variable (`acc = tile.matmul(x, y, acc)`)")
    if not sites:  # (nothing on tensor cores: no tile needs their layout)
        regs, found = {}, set()
    pipelined = {id(s): s for s in ir.walk_stmts(k.body) if isinstance(s, ir.ForRange) and _pipelines(s, sites)}
    # (a kernel with nothing in the row slice keeps the GEMM's layouts: fewest ldmatrix a k-step)
    rows = rows and (any(c.x.load is None for c in sites.values()) or bool(found) or any(sh[1] == 1 for sh in regs.values()))
    return TilePlan(regs, sites, pipelined, tuple(why.values()), k, rows, frozenset(found), _staged_locals(k, sites))


def _staged_locals(k: ir.KernelIR, sites: dict[int, MmaSite]) -> frozenset[str]:
    """Tile locals read only as tensor-core operands (each matmul stages its load again): never
    materialised."""
    used = {op.local for c in sites.values() for op in (c.x, c.y) if op.local}
    if not used:
        return frozenset()
    as_operand: dict[str, int] = {}
    for c in sites.values():
        for e in (c.stmt.value.x, c.stmt.value.y):  # type: ignore[union-attr]
            while isinstance(e, TileTrans):
                e = e.value
            if isinstance(e, ir.Local):
                as_operand[e.name] = as_operand.get(e.name, 0) + 1
    reads: dict[str, int] = {}
    for n in walk(k.body):
        if isinstance(n, ir.Local) and n.name in used:
            reads[n.name] = reads.get(n.name, 0) + 1
    return frozenset(n for n in used if reads.get(n, 0) == as_operand.get(n, 0))


def _misused(body: Any, regs: dict[str, tuple[int, int]], cands: dict[int, MmaSite], full: set[tuple[int, int]],
             rows: bool, found: set[int]) -> set[str]:
    """Register-tile candidates used where the accumulator layout (or, in row mode, its row
    slice) cannot serve them; the axis-1 reductions it serves go to `found`."""
    bad: set[str] = set()

    def reads(e: Any) -> set[str]:
        return {n.name for n in walk(e) if isinstance(n, ir.Local) and n.name in regs}

    def ok(e: Any, shape: tuple[int, ...]) -> bool:
        """Can tree `e` be evaluated at each element a thread holds of a register tile of `shape`
        (`e`'s own shape, or in row mode (M, 1) broadcast along the rows of an (M, N) `shape`)?"""
        if not reads(e):
            return True
        es = e.ty.shape
        if es != shape and not (rows and len(shape) == 2 and es == (shape[0], 1)):
            return False
        if isinstance(e, ir.Local):
            return e.name in regs
        if isinstance(e, TileElem):
            return all(ok(v, es) for _, v in e.inputs)
        if rows and isinstance(e, TileReduce) and e.axes == (1,) and len(es) == 2 and es[1] == 1 \
                and getattr(e.value.ty, "shape", None) in full and e.op in ("sum", "max", "min") and ok(e.value, e.value.ty.shape):  # type: ignore[union-attr]
            found.add(id(e))
            return True
        return False

    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Assign) and isinstance(getattr(s.value, "ty", None), TileTy):
            used = reads(s.value)
            if s.name in regs:
                c = cands.get(id(s))
                if c is not None:
                    for e in (c.x.regs, c.acc):
                        if e is not None and not ok(e, e.ty.shape):
                            bad |= reads(e) | {s.name}
                    continue
                if not ok(s.value, regs[s.name]):
                    bad |= used | {s.name}
            elif used:
                bad |= used  # a shared tile computed from a register tile: a conversion
        elif isinstance(s, TileStore):
            used = reads(s.value)
            if used and not (isinstance(s.value.ty, TileTy) and s.value.ty.shape in full and ok(s.value, s.value.ty.shape)):
                bad |= used
        else:
            for e in _exprs(s):
                bad |= reads(e)
    return bad


def _pipelines(loop: ir.ForRange, sites: dict[int, MmaSite]) -> bool:
    """Is `loop` a loop of tensor-core matmuls only, each reading tiles that advance along K by
    exactly its K extent per iteration (a positive constant step) and stay put along M and N?"""
    if not loop.body or not isinstance(loop.step, ir.Const) or not isinstance(loop.step.value, int) or loop.step.value <= 0:
        return False
    step = loop.step.value
    for s in loop.body:
        site = sites.get(id(s))
        if site is None or site.x.load is None or site.y.load is None or site.acc is not None:
            return False
        kk = site.shape[2]
        for op, k_axis in ((site.x, 0 if site.x.trans else 1), (site.y, 1 if site.y.trans else 0)):
            assert op.load is not None
            for axis, off in enumerate(op.load.offset):
                coef = affine_coef(off, loop.var)
                if coef is None or (axis == k_axis and coef * step != kk) or (axis != k_axis and coef != 0):
                    return False
    return True


def affine_coef(e: Any, var: str) -> int | None:
    """The coefficient c of `e = base + c * var` (base not naming `var`), or None when `e` is not
    affine in `var` that way."""
    while isinstance(e, ir.Cast):
        e = e.value
    if isinstance(e, ir.Local) and e.name == var:
        return 1
    if not _mentions(e, var):
        return 0
    if isinstance(e, ir.BinOp) and e.op in ("+", "-"):
        a, b = affine_coef(e.left, var), affine_coef(e.right, var)
        if a is None or b is None:
            return None
        return a + b if e.op == "+" else a - b
    if isinstance(e, ir.BinOp) and e.op == "*":
        for x, y in ((e.left, e.right), (e.right, e.left)):
            while isinstance(y, ir.Cast):
                y = y.value
            if isinstance(y, ir.Const) and isinstance(y.value, int) and not isinstance(y.value, bool):
                c = affine_coef(x, var)
                return None if c is None else c * y.value
    return None


# ---- tree helpers ----------------------------------------------------------------------------


def _exprs(s: Any) -> list[Any]:
    """The expressions of statement `s` itself (not of nested statement bodies)."""
    return [getattr(s, f) for f in node_fields(s.__class__) if f not in ("body", "orelse")]


def _mentions(e: Any, name: str) -> bool:
    return any(isinstance(n, ir.Local) and n.name == name for n in walk(e))


def _is_zero(e: Any) -> bool:
    while isinstance(e, ir.Cast):
        e = e.value
    return isinstance(e, ir.Const) and e.value == 0 and not isinstance(e.value, bool)


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
"""

from __future__ import annotations

from typing import Any

from anodize.language import ir
from anodize.language.ir_walk import node_fields, walk
from anodize.language.records import dataclass
from anodize.language.tile_ir import TileElem, TileLoad, TileMatmul, TileStore, TileTrans, TileTy

__all__ = ["ACC_HEADROOM", "STAGING_LIMIT", "MmaOperand", "MmaSite", "TilePlan", "accumulator_fits", "affine_coef",
           "gemm_warp_grid", "mma_k_tile", "mma_tile_problem", "plan_tiles", "staging_bytes"]

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
    transposed (`.T`)."""

    load: TileLoad
    trans: bool


@dataclass(frozen=True)
class MmaSite:
    stmt: ir.Assign
    x: MmaOperand
    y: MmaOperand
    shape: tuple[int, int, int]  # (M, N, K)
    elem: str
    k_tile: int  # the routine's K step (a multiple of 16)


@dataclass(frozen=True)
class TilePlan:
    registers: dict[str, tuple[int, int]]  # register tile -> its shape (the layout's)
    sites: dict[int, MmaSite]  # id(Assign) -> the tensor-core matmul
    pipelined: dict[int, ir.ForRange]  # id(ForRange) -> a loop of tensor-core matmuls only
    generic: tuple[tuple[Any, str], ...]  # (span, why) of each matmul left on the generic path (compile -v)

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
        return f"a {m}x{n} f32 accumulator over {warps} warps leaves a thread no registers"
    return None


def accumulator_fits(bm: int, bn: int, warps: int) -> bool:
    """Do a thread's accumulator registers (BM * BN / threads f32) leave room (`ACC_HEADROOM`)
    within a thread's registers (255, and 64K a block)?"""
    threads = warps * 32
    return bm * bn // threads + ACC_HEADROOM <= min(255, 65536 // threads)


def staging_bytes(site: MmaSite, stages: int = 2) -> int:
    m, n, _ = site.shape
    return stages * (m + n) * site.k_tile * 2


# ---- the plan --------------------------------------------------------------------------------


def _operand(e: Any) -> MmaOperand | None:
    trans = False
    if isinstance(e, TileTrans):
        e, trans = e.value, True
    if not isinstance(e, TileLoad):
        return None
    kind = e.slice.ty.kind
    if kind.output or kind.disjoint or e.slice.ty.rank != 2 or e.ty.elem.name not in TC_ELEMS or not _is_zero(e.other):
        return None
    return MmaOperand(e, trans)


def _site(s: ir.Assign, warps: int) -> MmaSite | str:
    """The tensor-core matmul of assignment `s` (a matmul), or why not."""
    mm = s.value
    assert isinstance(mm, TileMatmul)
    x, y = _operand(mm.x), _operand(mm.y)
    if mm.x.ty.elem.name == "f32" or mm.y.ty.elem.name == "f32":
        return "its operands are f32 (tensor cores take f16 and bf16 here; `allow_tf32=True` is not lowered to them yet)"
    if x is None or y is None:
        return "an operand is not a `tile.load` of an f16/bf16 input (or its `.T`) reading zero past the edges"
    if x.load.ty.elem != y.load.ty.elem:
        return "its operands have different element types"
    if mm.acc is not None and not (isinstance(mm.acc, ir.Local) and mm.acc.name == s.name):
        return "its accumulator is not the variable it assigns (`acc = tile.matmul(x, y, acc)`)"
    m, k = mm.x.ty.shape
    n = mm.y.ty.shape[1]
    problem = mma_tile_problem(m, n, k, warps)
    if problem is not None:
        return problem
    tk = mma_k_tile(m, n, k, warps)
    assert tk is not None
    return MmaSite(s, x, y, (m, n, k), x.load.ty.elem.name, tk)


def plan_tiles(k: ir.KernelIR) -> TilePlan:
    """The layout plan of tile kernel `k` on a GPU with tensor cores (the module's docstring)."""
    warps = max(getattr(k, "tile_warps", 0), 1)
    assigns = [s for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign)]
    why: dict[int, tuple[Any, str]] = {}
    cands: dict[int, MmaSite] = {}
    dynamic = any(getattr(t, "dynamic", False) for _, t in k.shared)
    for s in assigns:
        if isinstance(s.value, TileMatmul):
            got = _site(s, warps)
            if dynamic and isinstance(got, MmaSite):
                got = "the kernel declares a dynamic shared array of its own (the routine's ring would alias it)"
            if isinstance(got, str):
                why[id(s)] = (s.value.span or s.span, got)
            else:
                cands[id(s)] = got
    shapes = {(c.shape[0], c.shape[1]) for c in cands.values()}
    regs = {n: t.shape for n, t in k.locals if isinstance(t, TileTy) and t.rank == 2 and t.shape in shapes}
    while True:
        bad = _misused(k.body, regs, cands)
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
    pipelined = {id(s): s for s in ir.walk_stmts(k.body) if isinstance(s, ir.ForRange) and _pipelines(s, sites)}
    return TilePlan(regs, sites, pipelined, tuple(why.values()))


def _misused(body: Any, regs: dict[str, tuple[int, int]], cands: dict[int, MmaSite]) -> set[str]:
    """Register-tile candidates used where the accumulator layout cannot serve them."""
    bad: set[str] = set()

    def reads(e: Any) -> set[str]:
        return {n.name for n in walk(e) if isinstance(n, ir.Local) and n.name in regs}

    def elementwise(e: Any, shape: tuple[int, ...]) -> bool:
        """Can tree `e` (of `shape`, the layout's) be evaluated at each element a thread holds?"""
        if not reads(e):
            return True
        if isinstance(e, ir.Local):
            return e.ty.shape == shape  # type: ignore[union-attr]
        if isinstance(e, TileElem) and e.ty.shape == shape:
            return all(elementwise(v, shape) for _, v in e.inputs)
        return False

    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Assign) and isinstance(getattr(s.value, "ty", None), TileTy):
            used = reads(s.value)
            if s.name in regs:
                if id(s) in cands:
                    continue
                if not elementwise(s.value, regs[s.name]):
                    bad |= used | {s.name}
            elif used:
                bad |= used  # a shared tile computed from a register tile: a conversion
        elif isinstance(s, TileStore):
            used = reads(s.value)
            if used and not (isinstance(s.value.ty, TileTy) and elementwise(s.value, s.value.ty.shape)):
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
        if site is None:
            return False
        kk = site.shape[2]
        for op, k_axis in ((site.x, 0 if site.x.trans else 1), (site.y, 1 if site.y.trans else 0)):
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


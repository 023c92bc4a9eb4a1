"""The tensor-core GEMM form of a tile kernel, decided in one place.

    acc = tile.zeros((BM, BN), f32)
    for k in range(0, K, BK):
        acc = tile.matmul(tile.load(a, (pid.row * BM, k), (BM, BK)), tile.load(b, (k, pid.col * BN), (BK, BN)), acc)
    tile.store(out, pid, acc)                             # or acc.astype(f16 / bf16)

It is part of the language because it decides where a tile lives: on a GPU with tensor cores
(sm_80 and later) the form's accumulator lives in registers and its operands are staged in
memory the tensor-core routine owns, so the on-chip bound (language/tile_storage.py) does
not count them.  The recogniser therefore holds every condition the lowering
(codegen/tile_gemm.py) needs that does not depend on the target: when `tensor_core_gemms`
names a form, every GPU with tensor cores lowers it onto them (a lowering that declines it
there is a bug in anodize, `az-internal`).  On a GPU without tensor cores (below sm_80)
the accumulator is counted at compile time (`tile_storage.fits_without_tensor_cores`).

`match_gemm` finds the loop-and-store part in a statement list (also used where the
accumulator does not start at zero); `tensor_core_gemms` adds the zero start and the
target-independent conditions: domain 2, the same f16/bf16 element for both operands, loads
from inputs at `(pid.row * BM, k)` / `(k, pid.col * BN)` reading zero past the edges, a K
loop from 0, the accumulator and loop variable unused after the store, a tile shape the
routine supports (`gemm_tile_problem`) with the accumulator in a thread's registers
(`accumulator_fits`), and its two-stage operand ring fitting in
`STAGING_LIMIT` beside the kernel's other tiles.  At most one form per kernel is taken.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from anodize.language import ir
from anodize.language.records import dataclass
from anodize.language.tile_ir import TileElem, TileFull, TileIdPart, TileLoad, TileMatmul, TileStore, TileTy

__all__ = ["STAGING_LIMIT", "GemmForm", "gemm_staging_bytes", "gemm_tile_problem", "gemm_warp_grid", "match_gemm",
           "tensor_core_gemm_at", "tensor_core_gemms"]

# the smallest shared memory a block may opt into on an arch with tensor cores (sm_86/89: 99 KiB;
# sm_80/87: 163; sm_90: 227): the form's operand ring plus the kernel's other tiles fit in it
STAGING_LIMIT = 99 * 1024
ACC_HEADROOM = 32  # registers a thread needs beside its accumulator (measured: 36 on wgmma at 128 x 256 x 8 warps)


@dataclass(frozen=True)
class GemmForm:
    loop: ir.ForRange  # the K loop
    acc: str  # the accumulator variable (f32, (BM, BN))
    a: TileLoad  # (BM, BK) tile of A at (row, k)
    b: TileLoad  # (BK, BN) tile of B at (k, col)
    store: TileStore  # of `acc` or `acc.astype(T)`
    out_elem: str  # the stored element type ("f32", "f16", "bf16")
    allow_tf32: bool
    start: int  # index of the loop in the statement list
    end: int  # index just past the store
    k_var: str = ""  # the loop variable (the K offset of both loads)
    a_row: ir.Expr | None = None  # A's row offset (independent of the loop)
    b_col: ir.Expr | None = None  # B's column offset (independent of the loop)

    @property
    def shape(self) -> tuple[int, int, int]:
        m, k = self.a.ty.shape
        return m, self.b.ty.shape[1], k


def match_gemm(body: tuple[ir.Stmt, ...], i: int, lowering: Any = None) -> GemmForm | None:
    """The GEMM loop-and-store starting at `body[i]` (the K loop), else None."""
    loop = body[i]
    if not isinstance(loop, ir.ForRange) or len(loop.body) != 1 or i + 1 >= len(body):
        return None
    s = loop.body[0]
    if not (isinstance(s, ir.Assign) and isinstance(s.value, TileMatmul)):
        return None
    mm = s.value
    if not (isinstance(mm.x, TileLoad) and isinstance(mm.y, TileLoad) and _is_acc(mm.acc, s.name)):
        return None
    if mm.x.slice.ty.kind.disjoint or mm.y.slice.ty.kind.disjoint:
        return None
    a, b, k = mm.x, mm.y, loop.var
    # A at (row, k), B at (k, col): the loop variable is exactly the K offset of both, the step
    # is BK, and the other offsets do not move with the loop
    if not (_is_var(a.offset[1], k) and _is_var(b.offset[0], k) and not _mentions(a.offset[0], k) and not _mentions(b.offset[1], k)):
        return None
    if not (isinstance(loop.step, ir.Const) and loop.step.value == a.ty.shape[1]):
        return None
    st = body[i + 1]
    if not isinstance(st, TileStore):
        return None
    v = st.value
    if _is_acc(v, s.name):
        out = "f32"
    elif isinstance(v, TileElem) and len(v.inputs) == 1 and _is_acc(v.inputs[0][1], s.name) and isinstance(v.template, ir.Cast):
        out = v.ty.elem.name
    else:
        return None
    return GemmForm(loop, s.name, a, b, st, out, mm.allow_tf32, i, i + 2, k, a.offset[0], b.offset[1])


def gemm_warp_grid(bm: int, bn: int, warps: int) -> tuple[int, int] | None:
    """(warps along M, warps along N) of the mma.sync routine's layout: the one with the fewest
    ldmatrix a k-step, ties to taller; None when no layout fits."""
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


def gemm_tile_problem(bm: int, bn: int, bk: int, warps: int, b_trans: bool = False) -> str | None:
    """Why the mma.sync routine cannot take a (bm, bn, bk) tile over `warps` warps, or None."""
    if bk % 16 or bk < 16:
        return "tile_k must be a multiple of 16"
    for name, v in (("tile_m", bm), ("tile_n", bn), ("tile_k", bk)):
        if v <= 0 or v & (v - 1):
            return f"{name} must be a power of two, not {v}"
    if gemm_warp_grid(bm, bn, warps) is None:
        return f"no layout of {warps} warps over a {bm}x{bn} tile"
    threads = warps * 32
    for rows, cols in ((bm, bk), (bn, bk) if b_trans else (bk, bn)):
        if (rows * cols // 8) % threads:
            return f"a {rows}x{cols} tile does not split into 16-byte copies over {threads} threads"
    return None


def gemm_staging_bytes(*, tile_m: int = 128, tile_n: int = 128, tile_k: int = 32, stages: int = 3, **_: object) -> int:
    """Shared bytes of the mma.sync routine's operand ring for this tile shape (2-byte operands)."""
    return stages * (tile_m * tile_k + tile_k * tile_n) * 2


def tensor_core_gemm_at(k: ir.KernelIR, i: int) -> GemmForm | None:
    """The form at the kernel's top-level statement `i` (`acc = tile.zeros(...)`, then the K
    loop and the store) when its target-independent conditions hold (the module's docstring),
    the staging fit aside; else None."""
    body = k.body
    init = body[i]
    if not (isinstance(init, ir.Assign) and isinstance(init.value, TileFull) and _is_zero(init.value.value)):
        return None
    if i + 1 >= len(body):
        return None
    form = match_gemm(body, i + 1)
    if form is None or form.acc != init.name or k.domain != 2:
        return None
    a, b, st = form.a, form.b, form.store
    elems = {a.slice.ty.elem.name, b.slice.ty.elem.name}
    if len(elems) != 1 or not elems <= {"f16", "bf16"}:
        return None
    if a.slice.ty.kind.output or b.slice.ty.kind.output or a.slice.ty.rank != 2 or b.slice.ty.rank != 2:
        return None
    if st.slice.ty.rank != 2 or st.slice.ty.elem.name != form.out_elem or form.out_elem not in ("f16", "bf16", "f32"):
        return None
    if not (_is_zero(a.other) and _is_zero(b.other) and _is_zero(form.loop.start)):
        return None
    bm, bn, bk = form.shape
    if not (_pid_times(form.a_row, 0, bm) and _pid_times(form.b_col, 1, bn)):
        return None
    rest = body[form.end:]
    if any(_uses(s, form.acc) or _uses(s, form.k_var) for s in rest) or _uses(form.loop.stop, form.k_var):
        return None
    warps = max(k.tile_warps, 1)
    if gemm_tile_problem(bm, bn, bk, warps) is not None or not accumulator_fits(bm, bn, warps):
        return None
    return form


def accumulator_fits(bm: int, bn: int, warps: int) -> bool:
    """Do a thread's accumulator registers (BM * BN / threads f32) leave the routines room
    (`ACC_HEADROOM` for addresses, fragments, the pipeline) within a thread's registers (255,
    and 64K a block)?  128 x 256 over 8 warps: 128 of 255 (the routines take 164 on wgmma, 254
    on mma.sync); 256 x 256 over 16 warps: 128 of 128, which ptxas cannot assemble."""
    threads = warps * 32
    return bm * bn // threads + ACC_HEADROOM <= min(255, 65536 // threads)


def tensor_core_gemms(k: ir.KernelIR, other_tiles: Any = None) -> list[GemmForm]:
    """The kernel's tensor-core GEMM form: at most one (a second one keeps both on the generic
    lowering), at the top level, whose two-stage operand ring fits in `STAGING_LIMIT` beside
    `other_tiles(accumulators)` bytes (the kernel's other tiles, language/tile_storage.py)."""
    if not getattr(k, "tile_warps", 0):
        return []
    forms = [f for f in (tensor_core_gemm_at(k, i) for i in range(len(k.body))) if f is not None]
    if len(forms) != 1:
        return []
    f = forms[0]
    bm, bn, bk = f.shape
    if any(getattr(t, "dynamic", False) for _, t in k.shared):
        return []  # the routine's dynamic ring would alias the kernel's own dynamic array
    others = other_tiles({f.acc}) if other_tiles is not None else 0
    if others + gemm_staging_bytes(tile_m=bm, tile_n=bn, tile_k=bk, stages=2) > STAGING_LIMIT:
        return []
    return [f]


# ---- expression predicates ---------------------------------------------------------------------


def _is_acc(e: Any, name: str) -> bool:
    return isinstance(e, ir.Local) and e.name == name and isinstance(e.ty, TileTy)


def _is_var(e: Any, name: str) -> bool:
    while isinstance(e, ir.Cast):
        e = e.value
    return isinstance(e, ir.Local) and e.name == name


def _mentions(e: Any, name: str) -> bool:
    if isinstance(e, ir.Local):
        return e.name == name
    if not is_dataclass(e):
        return False
    for f in fields(e):
        v = getattr(e, f.name)
        for x in v if isinstance(v, tuple) else (v,):
            if hasattr(x, "ty") and _mentions(x, name):
                return True
    return False


def _is_zero(e: Any) -> bool:
    while isinstance(e, ir.Cast):
        e = e.value
    return isinstance(e, ir.Const) and e.value == 0 and not isinstance(e.value, bool)


def _pid_times(e: Any, axis: int, n: int) -> bool:
    """Is `e` the program id's `axis` times `n` (`pid.row * BM`)?"""
    while isinstance(e, ir.Cast):
        e = e.value
    if not (isinstance(e, ir.BinOp) and e.op == "*"):
        return False
    for x, y in ((e.left, e.right), (e.right, e.left)):
        while isinstance(x, ir.Cast):
            x = x.value
        if isinstance(x, TileIdPart) and x.rank == 2 and x.axis == axis and isinstance(y, ir.Const) and y.value == n:
            return True
    return False


def _uses(node: Any, name: str) -> bool:
    """Does `node` (a statement or expression, nested bodies included) name local `name`?"""
    if isinstance(node, ir.Local):
        return node.name == name
    if isinstance(node, tuple):
        return any(_uses(x, name) for x in node)
    if not is_dataclass(node):
        return False
    for f in fields(node):
        v = getattr(node, f.name)
        if (isinstance(v, str) and v == name and f.name in ("name", "var")) or _uses(v, name):
            return True
    return False

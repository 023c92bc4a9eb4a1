"""Cross-iteration prefetch of the B tiles of a loop's register-A matmuls (an attention loop's
K and V tiles): while iteration i computes, iteration i + 1's tiles are already on their way.

A loop qualifies (`prefetched_sites`) when every tensor-core matmul in it is a statement of its
body itself (not under an `if` or an inner loop), takes A from registers (codegen/tile/mma_regs.py),
and reads a B tile whose offsets are the same expressions every iteration but for the loop
variable (no local they read, nor the variable, is assigned in the body) and read nothing (no
slice element, no call, no division by a variable: they are evaluated one iteration past the
last, `_faultless`), and the body has no
`break`, `continue` or `return`, nor a tile store while stores are staged (the staged tile
takes the same buffer).  Each such matmul gets two slots of the compiler's dynamic
shared buffer (`region`, from offset 0: no other tensor-core statement runs during the loop, and
the statements around it drain their copies before and after).  The protocol, for the loop's
n matmuls in body order:

- before the loop (`TileCopy`): each matmul's B tile at the first iteration into its slot 0,
  one cp.async group each;
- at a matmul in iteration i (`TileMma.prefetch`): wait until at most n - 1 groups are pending
  (its own group, issued one iteration earlier or before the loop, is the oldest), a barrier
  (every thread's copies visible), the mma.sync over slot `i % 2`; then its tile of iteration
  i + 1 (offsets with the variable advanced by the step: read zero past the slice as always,
  so one past the last iteration is harmless) into slot `(i + 1) % 2`, one group.  That slot
  was last read at iteration i - 1, before this iteration's barrier;
- after the loop (`TileDrain`): wait for every group and a barrier.

**Resident A** (on by default, `ANODIZE_TILE_A_RESIDENT=0` off; `resident_ok`): a matmul of
such a loop may also take an A operand that is a tile local loaded once before the loop (not
`.T`: Q of an attention too large to hold in registers, the plan staging it again at each
matmul) when the loop is in row mode (every warp owns whole rows).  Its (M, K) tile is copied
once, before the loop (its own group, before the B tiles' first copies: the first matmul's
wait covers it), into a region after the B slots, and every iteration reads its A fragments
from there with ldmatrix (codegen/tile/mma_regs.py): no copy of A in the loop.

**One wait** (`ANODIZE_TILE_ONE_WAIT=1`, off until a GPU run has checked it): with two or more
prefetching matmuls, the loop's first matmul waits for every group (`cp.async.wait_group 0`: the
iteration's tiles of all of them), takes the one barrier, and after its mma issues every matmul's
tile of iteration i + 1 (into each one's other slot, last read at iteration i - 1, before this
barrier) as one group; the later matmuls neither wait nor sync nor copy.  (Issued before the
first mma, as the form does, ptxas spills 4/8 bytes at d64 / 4 warps and 140 more at d128.)  So an iteration has
one wait, one barrier and one commit (the recognised attention form's protocol), and iteration
i + 1's V has all of iteration i to arrive instead of its S matmul.  The next tiles' offsets read
only the loop variable and locals the body does not assign (the qualifying rule), so they are the
same values at the first matmul as at their own.  With `ANODIZE_TILE_COPY_FIRST=1`
(codegen/tile/mma_regs.py `copy_first`) the group is issued after the barrier and before the mma.

**wgmma** (`ANODIZE_TILE_ATTN_WGMMA`, codegen/tile/attn_wgmma.py): a matmul of such a loop
whose B tile a wgmma descriptor can read (`_engines`) keeps its two slots in wgmma's layout
(`TileCopy.wg`, `NextCopy.wg`), every region of the loop counts from the buffer's address
rounded up to 1024 bytes (`base1024`, 1024 bytes more taken), each wait is followed by a proxy
fence, and a resident A read only by such matmuls is copied in wgmma's row order (`a_rows`).

**Aligned version** (on by default, `ANODIZE_TILE_LOOP_VERSIONS=0` off; `loop_versions`): each
copy picks, at run time, 16-byte cp.async copies where its rows are 16-byte aligned, else
predicated 2-byte loads.  Where every B tile's column offset is `c0 + c * var` with `c * step`
a multiple of 8 (the test is the same at every iteration), the loop is emitted twice: one copy
with only cp.async copies, taken when a test before the loop (`TileCopyAlignedFlag`: each B
slice's row length, its address and `c0` at the first iteration) says every copy is aligned, the other
as before.  So the loop that runs carries one copy path, not both.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from anodize.language import ir
from anodize.language.ir_walk import map_children, walk
from anodize.language.records import dataclass
from anodize.language.tile_storage import tile_storage_bound
from anodize.language.tile_ir import TileStore
from anodize.language.tile_plan import affine_coef
from anodize.language.types import BOOL, I32, I64

from ..llvm.registry import lowers
from ..tensorcore import inline_ptx as P
from ..tensorcore.inline_ptx import I64 as I64LL
from .compute import _bin, _c
from .epilogue import staged_epilogue
from .mma import MmaOperandIR
from .attn_wgmma import engine_for
from .mma_regs import issue_copy

if TYPE_CHECKING:
    from ..llvm.lower import Lowerer

__all__ = ["NextCopy", "Prefetch", "TileCopyAlignedFlag", "TileCopy", "TileDrain", "loop_versions", "one_wait", "prefetch_loop",
           "prefetched_sites", "resident_ok"]


@dataclass(frozen=True)
class Prefetch:
    """A register-A `TileMma`'s part in its loop's prefetch (the module docstring)."""

    slot: Any  # i64 expression: the iteration's slot (its low bit)
    region: int  # bytes into the dynamic buffer of the matmul's two slots
    next: tuple[Any, ...]  # B's offsets at the next iteration (i64 plain IR)
    waits: int  # groups that may stay pending at its wait (the loop's other prefetching matmuls)
    a_region: int = -1  # a resident A (the module docstring): bytes into the buffer of its (M, K) tile; -1 none
    aligned: bool = False  # in the aligned version of the loop: the next tile's copy is cp.async only
    group: tuple[NextCopy, ...] = ()  # one wait (the module docstring): the first matmul issues every matmul's next tile
    waitless: bool = False  # one wait: a later matmul, its tile complete at the first one's wait
    wgmma: bool = False  # the matmul runs on wgmma, its slots in wgmma's layout (codegen/tile/attn_wgmma.py)
    base1024: bool = False  # regions count from the buffer rounded up to 1024 bytes (some matmul of the loop is on wgmma)
    a_ss: bool = False  # the resident A is in wgmma's layout, read through descriptors (`TileCopy.a_rows`)


@dataclass(frozen=True)
class NextCopy:
    """One matmul's B tile of the next iteration, issued (one wait) by the loop's first matmul into
    the other of its two slots at `region`."""

    op: MmaOperandIR
    region: int
    k: int
    n: int
    warps: int
    site: int
    wg: bool = False  # in wgmma's layout (codegen/tile/attn_wgmma.py)


@dataclass(frozen=True)
class TileCopy:
    """Before a prefetching loop: `op`'s tile (K x N as the matmul reads it, `k` its K) into slot
    0 at `region`, one cp.async group."""

    op: MmaOperandIR
    region: int
    k: int
    n: int
    warps: int
    site: int  # fault site (dimensions too large for 32-bit indices)
    span: Any = None
    wg: bool = False  # in wgmma's layout (codegen/tile/attn_wgmma.py)
    base1024: bool = False  # `region` counts from the buffer rounded up to 1024 bytes
    # a resident A read by wgmma through descriptors: its rows in wgmma's order (staging.py `_Operand`),
    # `a_rows` the row blocks of 16 a warp holds; 0 the row-major tile ldmatrix reads
    a_rows: int = 0


@dataclass(frozen=True)
class TileCopyAlignedFlag:
    """Before an aligned-versioned loop: `flag` (an i32 local) = 1 when every op's rows are
    16-byte aligned (its slice's row length a multiple of 8 elements, its address of 16 bytes,
    its column offset a multiple of 8), else 0."""

    flag: str
    ops: tuple[MmaOperandIR, ...]
    span: Any = None


@dataclass(frozen=True)
class TileDrain:
    """After a prefetching loop: every cp.async group complete, then a barrier."""

    span: Any = None


def _no_jumps(body: tuple[ir.Stmt, ...]) -> bool:
    return not any(isinstance(s, (ir.Break, ir.Continue, ir.Return)) for s in ir.walk_stmts(body))


def prefetched_sites(low: Any, loop: ir.ForRange) -> list[Any] | None:
    """The register-A matmul sites of `loop`, in body order, when it qualifies (the module
    docstring) and their slots fit the block's shared memory; else None."""
    plan = low.plan
    if plan is None or not isinstance(loop.step, ir.Const) or not isinstance(loop.step.value, int) or loop.step.value <= 0:
        return None
    inner = [s for s in ir.walk_stmts(loop.body) if id(s) in plan.sites]
    top = [s for s in loop.body if id(s) in plan.sites]
    if not top or len(inner) != len(top) or not _no_jumps(loop.body):
        return None
    if staged_epilogue() and any(isinstance(s, TileStore) for s in ir.walk_stmts(loop.body)):
        return None  # (a staged store would write the slots' buffer while the next tiles land in it)
    assigned = {s.name for s in ir.walk_stmts(loop.body) if isinstance(s, ir.Assign)}
    assigned |= {s.var for s in ir.walk_stmts(loop.body) if isinstance(s, ir.ForRange)}
    if loop.var in assigned:
        return None
    sites = [plan.sites[id(s)] for s in top]
    for site in sites:
        if site.y.load is None or site.x.load is not None and not _resident(low, site, assigned):
            return None
        names = {n.name for n in walk(site.y.load.offset) if isinstance(n, ir.Local)}
        if names & assigned or not _faultless(site.y.load.offset):
            return None
    total = sum(2 * site.shape[2] * site.shape[1] * 2 for site in sites)
    total += sum(m * k * 2 for m, k in _resident_tiles(sites).values())
    total += 1024 if any(_engines(low, sites)) else 0
    if total > low.shared_limit - tile_storage_bound(low.k):
        return None
    return sites


_READS = (ir.Read, ir.SharedRead, ir.TableRead, ir.LocalArrayRead, ir.TileAt, ir.Call)


def _faultless(offsets: tuple[Any, ...]) -> bool:
    """Can B's offsets be evaluated at an iteration the loop does not run (the next one past the
    last; the first of an empty loop, in the prologue) without a fault or a read: no element read
    (its index may be past the slice there), no call, no division but by a non-zero constant."""
    for n in walk(offsets):
        if isinstance(n, ir.BinOp):
            if n.site >= 0 and not (isinstance(n.right, ir.Const) and n.right.value):
                return False
        elif isinstance(n, _READS) or getattr(n, "site", -1) >= 0:
            return False
    return True


def resident_ok() -> bool:
    """A loop-invariant A operand copied once into shared memory (the module docstring); on by
    default since the H100 checked it (session 15), `ANODIZE_TILE_A_RESIDENT=0` is the way back."""
    return os.environ.get("ANODIZE_TILE_A_RESIDENT", "") != "0"


def _resident(low: Any, site: Any, assigned: set[str]) -> bool:
    """Can `site`'s A operand stay in shared memory across the loop: a local loaded once (not
    `.T`) at offsets the loop does not assign, in row mode, M a multiple of 16 a warp and K of 16
    whose 16-byte chunks a row are a power of two splitting over the block?"""
    x = site.x
    m, _, k = site.shape
    warps = low.T // 32
    if not (resident_ok() and x.local and not x.trans and low.plan.rows) or m % (16 * warps) or k % 16:
        return False
    cpr = k // 8
    if cpr & (cpr - 1) or (m * cpr) % low.T:
        return False
    return not {n.name for n in walk(x.load.offset) if isinstance(n, ir.Local)} & assigned


def _engines(low: Any, sites: list[Any]) -> list[bool]:
    """Which of a prefetching loop's matmuls run on wgmma (codegen/tile/attn_wgmma.py): those the
    switch and the B tile allow whose two slots start a multiple of 1024 bytes into the region."""
    out, region = [], 0
    for site in sites:
        k, n = site.shape[2], site.shape[1]
        out.append(region % 1024 == 0 and engine_for(low.wgmma, low.T // 32, k, n, site.y.trans) == "wgmma")
        region += 2 * k * n * 2
    return out


def _resident_tiles(sites: list[Any]) -> dict[str, tuple[int, int]]:
    """Resident A locals of `sites` (one region a local, however many matmuls read it) -> (M, K)."""
    return {site.x.local: (site.shape[0], site.shape[2]) for site in sites if site.x.load is not None}


def prefetch_loop(low: Any, loop: ir.ForRange, sites: list[Any]) -> list[ir.Stmt]:
    """`loop` lowered with its register-A matmuls' B tiles prefetched (the module docstring)."""
    vty = dict(low.locals).get(loop.var, I64)
    step = int(loop.step.value)  # type: ignore[union-attr]
    it = low.local(I64, "it")

    def at(e: Any, value: Any) -> Any:
        """`e` with the loop variable replaced by `value`."""
        def sub(x: Any) -> Any:
            if isinstance(x, ir.Local) and x.name == loop.var:
                return value
            return map_children(x, sub)
        return low.scalar(sub(e))

    start = low.scalar(loop.start)
    nxt = _bin("+", ir.Local(loop.var, vty), _c(step, vty), vty)
    out: list[ir.Stmt] = [ir.Assign(it.name, _c(0))]
    wgs = _engines(low, sites)
    base1024 = any(wgs)
    region = sum(2 * site.shape[2] * site.shape[1] * 2 for site in sites)  # (the B slots first)
    a_regions: dict[str, int] = {}
    a_ss: set[str] = set()  # resident A tiles every reader of which is a wgmma: in wgmma's layout, read through descriptors
    for name, (m, k) in _resident_tiles(sites).items():  # resident A tiles: copied once, before the B tiles
        site = next(s for s in sites if s.x.local == name and s.x.load is not None)
        ld = site.x.load
        op = MmaOperandIR(ld.slice, tuple(low.scalar(o) for o in ld.offset), (m, k), False)
        if region % 1024 == 0 and k % 64 == 0 and all(wg for s, wg in zip(sites, wgs, strict=True) if s.x.local == name):
            a_ss.add(name)
        out.append(TileCopy(op, region, m, k, low.T // 32, _fault_site(low, site), base1024=base1024,  # type: ignore[arg-type]
                            a_rows=m // (16 * (low.T // 32)) if name in a_ss else 0))
        a_regions[name] = region
        region += m * k * 2
    total = region + (1024 if base1024 else 0)
    region = 0
    regions = []
    for site, wg in zip(sites, wgs, strict=True):
        k, n = site.shape[2], site.shape[1]
        op = site.y
        ld = op.load
        first = MmaOperandIR(ld.slice, tuple(at(o, start) for o in ld.offset), (ld.ty.shape[0], ld.ty.shape[1]), op.trans)
        out.append(TileCopy(first, region, k, n, low.T // 32, _fault_site(low, site), wg=wg, base1024=base1024))  # type: ignore[arg-type]
        regions.append(region)
        region += 2 * k * n * 2
    low.uses_barrier = True
    slot = _bin("%", it, _c(2))
    low.prefetch = {id(site.stmt): (Prefetch(slot, r, tuple(at(o, nxt) for o in site.y.load.offset), len(sites) - 1,
                                             a_regions.get(site.x.local, -1) if site.x.load is not None else -1,
                                             wgmma=wg, base1024=base1024, a_ss=site.x.local in a_ss), total)
                    for site, r, wg in zip(sites, regions, wgs, strict=True)}
    if one_wait() and len(sites) > 1:
        group = tuple(NextCopy(MmaOperandIR(site.y.load.slice, tuple(at(o, nxt) for o in site.y.load.offset),
                                            (site.y.load.ty.shape[0], site.y.load.ty.shape[1]), site.y.trans),
                               r, site.shape[2], site.shape[1], low.T // 32, _fault_site(low, site), wg)
                      for site, r, wg in zip(sites, regions, wgs, strict=True))
        low.prefetch = {key: (replace(pf, waits=0, group=group if i == 0 else (), waitless=i > 0), n)
                        for i, (key, (pf, n)) in enumerate(low.prefetch.items())}
    try:
        *pre, lowered = low.stmt(loop)
        assert isinstance(lowered, ir.ForRange)
        lowered = replace(lowered, body=(*lowered.body, ir.Assign(it.name, _bin("+", it, _c(1)))))
        first = tuple(MmaOperandIR(site.y.load.slice, tuple(at(o, start) for o in site.y.load.offset),
                                   (site.y.load.ty.shape[0], site.y.load.ty.shape[1]), site.y.trans) for site in sites)
        if loop_versions() and all(_column_steps_aligned(site, loop.var, step) for site in sites):
            low.prefetch = {key: (replace(pf, aligned=True), n) for key, (pf, n) in low.prefetch.items()}
            *_, fast = low.stmt(loop)
            assert isinstance(fast, ir.ForRange)
            fast = replace(fast, body=(*fast.body, ir.Assign(it.name, _bin("+", it, _c(1)))))
            flag = low.local(I32, "aligned")
            out.append(TileCopyAlignedFlag(flag.name, first))
            cond = ir.Compare(("!=",), (flag, _c(0, I32)), BOOL, None, (I32,))
            return [*pre, *out, ir.If(cond, (fast,), (lowered,)), TileDrain()]
    finally:
        low.prefetch = {}
    return [*pre, *out, lowered, TileDrain()]


def one_wait() -> bool:
    """`ANODIZE_TILE_ONE_WAIT=1`: one cp.async wait and one barrier an iteration (the module docstring)."""
    return os.environ.get("ANODIZE_TILE_ONE_WAIT", "") == "1"


def loop_versions() -> bool:
    """The aligned version of a prefetching loop (the module docstring); on by default since the
    H100 checked it (session 15), `ANODIZE_TILE_LOOP_VERSIONS=0` is the way back."""
    return os.environ.get("ANODIZE_TILE_LOOP_VERSIONS", "") != "0"


def _column_steps_aligned(site: Any, var: str, step: int) -> bool:
    """Does `site`'s B tile's column offset move by a multiple of 8 elements an iteration (so its
    alignment is the first iteration's)?"""
    coef = affine_coef(site.y.load.offset[1], var)
    return coef is not None and (coef * step) % 8 == 0


def _fault_site(low: Any, site: Any) -> int:
    """A fault site of its own for the prologue's copy (a dimension too large for 32-bit indices)."""
    k = low.k
    span = site.stmt.span
    i = len(k.fault_sites)
    low.k = replace(k, fault_sites=(*k.fault_sites, ir.FaultSite(
        k.path, span.line if span is not None else k.line, 1,
        "matmul: a tile matmul on tensor cores takes operands of fewer than 2**31 - 4096 rows and columns", "")))
    return i


@lowers(TileCopy)
def lower_tile_copy(lw: Lowerer, s: TileCopy) -> None:
    """`s_TileCopy`: the prologue's copy (codegen/tile/mma_regs.py `issue_copy`), one group."""
    issue_copy(lw, s.op, s.k, s.n, s.warps, s.site, P.c32(s.region), False, s.wg or s.a_rows > 0, s.base1024, s.a_rows)
    P.cp_async_commit(lw.b)


@lowers(TileCopyAlignedFlag)
def lower_tile_copy_aligned_flag(lw: Lowerer, s: TileCopyAlignedFlag) -> None:
    """`s_TileCopyAlignedFlag`: the flag of the aligned version (the test `issue_copy` makes at each copy)."""
    b = lw.b
    ok = None
    for op in s.ops:
        sv = lw.frame.slices[op.slice.name]
        ld = b.sext(sv.dims[1], I64LL) if sv.dims[1].type.width < 64 else sv.dims[1]
        col = lw.conv(lw.expr(op.offset[1]), op.offset[1].ty, I64)
        bits = b.or_(b.or_(ld, b.lshr(b.ptrtoint(sv.ptr, I64LL), P.c64(1))), col)
        this = b.icmp_unsigned("==", b.and_(bits, P.c64(7)), P.c64(0))
        ok = this if ok is None else b.and_(ok, this)
    b.store(b.zext(ok, P.I32) if ok is not None else P.c32(1), lw.frame.vars[s.flag][0])


@lowers(TileDrain)
def lower_tile_drain(lw: Lowerer, s: TileDrain) -> None:
    """`s_TileDrain`: every group complete, then a barrier (the buffer is free again)."""
    P.cp_async_wait(lw.b, 0)
    P.barrier(lw.b)

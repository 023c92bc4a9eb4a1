"""Cross-iteration prefetch of the B tiles of a loop's register-A matmuls (an attention loop's
K and V tiles): while iteration i computes, iteration i + 1's tiles are already on their way.

A loop qualifies (`prefetched_sites`) when every tensor-core matmul in it is a statement of its
body itself (not under an `if` or an inner loop), takes A from registers (codegen/tile/mma_regs.py),
and reads a B tile whose offsets are the same expressions every iteration but for the loop
variable (no local they read, nor the variable, is assigned in the body), and the body has no
`break`, `continue` or `return`.  Each such matmul gets two slots of the compiler's dynamic
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
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from anodize.language import ir
from anodize.language.ir_walk import map_children, walk
from anodize.language.records import dataclass
from anodize.language.tile_storage import tile_storage_bound
from anodize.language.types import I64

from ..llvm.registry import lowers
from ..tensorcore import inline_ptx as P
from .compute import _bin, _c
from .mma import MmaOperandIR
from .mma_regs import issue_copy

if TYPE_CHECKING:
    from ..llvm.lower import Lowerer

__all__ = ["Prefetch", "TileCopy", "TileDrain", "prefetch_loop", "prefetched_sites"]


@dataclass(frozen=True)
class Prefetch:
    """A register-A `TileMma`'s part in its loop's prefetch (the module docstring)."""

    slot: Any  # i64 expression: the iteration's slot (its low bit)
    region: int  # bytes into the dynamic buffer of the matmul's two slots
    next: tuple[Any, ...]  # B's offsets at the next iteration (i64 plain IR)
    waits: int  # groups that may stay pending at its wait (the loop's other prefetching matmuls)


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
    assigned = {s.name for s in ir.walk_stmts(loop.body) if isinstance(s, ir.Assign)}
    assigned |= {s.var for s in ir.walk_stmts(loop.body) if isinstance(s, ir.ForRange)}
    if loop.var in assigned:
        return None
    sites = [plan.sites[id(s)] for s in top]
    for site in sites:
        if site.x.load is not None or site.y.load is None:
            return None
        names = {n.name for n in walk(site.y.load.offset) if isinstance(n, ir.Local)}
        if names & assigned:
            return None
    total = sum(2 * site.shape[2] * site.shape[1] * 2 for site in sites)
    if total > low.shared_limit - tile_storage_bound(low.k):
        return None
    return sites


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
    region = 0
    regions = []
    for site in sites:
        k, n = site.shape[2], site.shape[1]
        op = site.y
        ld = op.load
        first = MmaOperandIR(ld.slice, tuple(at(o, start) for o in ld.offset), (ld.ty.shape[0], ld.ty.shape[1]), op.trans)
        out.append(TileCopy(first, region, k, n, low.T // 32, _fault_site(low, site)))  # type: ignore[arg-type]
        regions.append(region)
        region += 2 * k * n * 2
    low.uses_barrier = True
    slot = _bin("%", it, _c(2))
    low.prefetch = {id(site.stmt): (Prefetch(slot, r, tuple(at(o, nxt) for o in site.y.load.offset), len(sites) - 1), region)
                    for site, r in zip(sites, regions, strict=True)}
    try:
        *pre, lowered = low.stmt(loop)
    finally:
        low.prefetch = {}
    assert isinstance(lowered, ir.ForRange)
    body = (*lowered.body, ir.Assign(it.name, _bin("+", it, _c(1))))
    return [*pre, *out, replace(lowered, body=body), TileDrain()]


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
    issue_copy(lw, s.op, s.k, s.n, s.warps, s.site, P.c32(s.region))
    P.cp_async_commit(lw.b)


@lowers(TileDrain)
def lower_tile_drain(lw: Lowerer, s: TileDrain) -> None:
    """`s_TileDrain`: every group complete, then a barrier (the buffer is free again)."""
    P.cp_async_wait(lw.b, 0)
    P.barrier(lw.b)

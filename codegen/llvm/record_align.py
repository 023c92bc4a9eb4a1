"""Record slices whose base is aligned: one copy of the body with wide, aligned accesses.

A record's fields are loaded and stored one scalar at a time (`p[i].pos[1]`; a whole record
`q = p[i]` or `out[i] = Rec(...)` is its fields' accesses), each aligned to its own size only,
since the element at `base + size * i` is known aligned only to the record's alignment (4 for a
record of `f32`s).  A 32-byte record read with eight 4-byte loads and written with eight 4-byte
stores runs at ~46% of the copy ceiling on an H200 (numba-cuda's kernel does the same); two
16-byte accesses per record are what the memory system wants.

When a record's size is a multiple of A = 8 or 16 (A above the record's own alignment) and the
slice's base is A-aligned, every element is A-aligned, and a field at offset `off` is aligned to
the largest power of two dividing both A and `off`.  A buffer `dev.empty`/`to_device` allocates
starts 256-aligned, but a view (`buf[3:]`) or a foreign array (CuPy, PyTorch, DLPack) may start
at any multiple of the record's alignment, so the kernel tests its bases at run time: `lower`
emits a uniform branch on `base % A == 0` for every such slice, and lowers the body twice:
once with each slice's `SliceVal.base_align` set to its A (the aligned copy: every field access
carries its alignment, `field_align`), once as before (the scalar copy).  The accesses of the
aligned copy are merged into `ld.global.nc.v4.b32` / `st.global.v4.b32` (v2 for 8 bytes) by
LLVM's load/store vectorizer (NVPTX runs it before instruction selection), which merges a run
of adjacent accesses whose first one is aligned to the run's size: a whole record, or the
adjacent fields a kernel reads.

Only kernels whose threads do not communicate are versioned (no barriers, shared memory, warp
operations, grid sync or waiting loops: the CPU backend splits such bodies at their barriers),
and not a coarsened one (codegen/llvm/coarsen.py: its lanes have their own accesses), and only
while the body is small enough (`MAX_SIZE`) that a second copy costs little compile time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.record_types import RecordTy, record_of_info

from .coarsen import _cost
from .record_warp import lower_warp_copy, warp_plan
from .types import I64T, Frame, SliceVal

if TYPE_CHECKING:
    from .lower import Lowerer

WIDEST = 16  # the widest vector access (v4.b32, v2.b64)
MAX_SIZE = 2500  # `coarsen._cost` of the largest body lowered twice


def _lowbit(n: int) -> int:
    return n & -n


def aligned_records(k: ir.KernelIR) -> dict[str, int]:
    """The record slices of `k` that gain from an aligned base: name -> the base alignment A
    the aligned copy assumes (8 or 16).  Empty when the kernel is not versioned."""
    if k.uses_barrier or k.uses_warp or k.uses_shared or k.grid_sync or k.waits or k.tile_warps:
        return {}
    out: dict[str, int] = {}
    for p in k.params:
        if p.slice_kind is None or p.scalar.kind != "r" or p.slice_kind.atomic:
            continue
        rec = record_of_info(p.scalar)
        a = min(WIDEST, _lowbit(rec.size))
        if a > rec.align:
            out[p.name] = a
    if out and sum(_cost(st) for st in k.body) > MAX_SIZE:
        return {}
    return out


def field_align(sv: SliceVal, offset: int, natural: int) -> int:
    """The alignment of the access `offset` bytes into an element of `sv` whose own alignment
    is `natural`: more where the base is known aligned (`SliceVal.base_align`)."""
    if not sv.base_align or not isinstance(sv.ty.elem, RecordTy):
        return natural
    a = min(sv.base_align, _lowbit(offset)) if offset else sv.base_align
    return max(natural, a)


class _AssumeAligned(llir.instructions.Instruction):  # type: ignore[misc]
    """`call void @llvm.assume(i1 true) [ "align"(ptr %p, i64 A), ... ]`: llvmlite's builder
    has no operand bundles.  It ends the aligned copy (`lower_versioned`)."""

    def __init__(self, parent: llir.Block, fn: llir.Function, facts: list[tuple[llir.Value, int]]):
        super().__init__(parent, llir.VoidType(), "call", [fn] + [p for p, _ in facts])
        self.facts = facts

    def descr(self, buf: list[str]) -> None:
        bundles = ", ".join(f'"align"({p.type} {p.get_reference()}, i64 {a})' for p, a in self.facts)
        buf.append(f"call void @llvm.assume(i1 true) [ {bundles} ]\n")


def lower_versioned(lw: Lowerer, aligned: dict[str, int]) -> None:
    """Lower the kernel's body as the aligned copy, taken when every base in `aligned` is
    aligned, and the scalar copy otherwise (the module doc)."""
    b = lw.b
    one = lw.frame
    ok: llir.Value = llir.Constant(llir.IntType(1), 1)
    for name, a in aligned.items():
        low = b.and_(b.ptrtoint(one.slices[name].ptr, I64T), llir.Constant(I64T, a - 1))
        ok = b.and_(ok, b.icmp_unsigned("==", low, llir.Constant(I64T, 0)))
    fast = lw.fn.append_basic_block("rec.aligned")
    slow = lw.fn.append_basic_block("rec.scalar")
    b.cbranch(ok, fast, slow).set_weights([64, 1])
    wide = dict(one.slices)
    for name, a in aligned.items():
        sv = one.slices[name]
        wide[name] = SliceVal(sv.name, sv.ty, sv.ptr, sv.dims, a)
    before = lw.checks
    b.position_at_end(fast)
    done = lw.fn.append_basic_block("rec.return")
    lw.frame = Frame(vars=dict(one.vars), slices=wide, exit=done)
    try:
        plan = warp_plan(lw.k, aligned) if lw.t.warp_records else None
        if plan is not None:  # whole warps of records moved lane-contiguously (record_warp.py)
            lower_warp_copy(lw, plan, done)
        lw.stmts(lw.k.body)
    finally:
        lw.frame = one
    if not lw.b.block.is_terminated:
        lw.b.branch(done)
    # the copies end alike (`out[i].last = v`); LLVM would sink that common tail into one block
    # after both, splitting the aligned copy's run of stores before the vectorizer sees it.  The
    # aligned copy returns on its own, after an assumption the scalar copy lacks (restating, at
    # no cost, what the branch proved).
    lw.b.position_at_end(done)
    fn = lw.declare("llvm.assume", llir.VoidType(), [llir.IntType(1)])
    lw.b._insert(_AssumeAligned(lw.b.block, fn, [(one.slices[n].ptr, a) for n, a in aligned.items()]))
    lw.b.ret_void()
    lw.checks = before  # `bounds_checks` counts the checks of one copy of the body: the scalar one
    lw.b.position_at_end(slow)
    lw.stmts(lw.k.body)

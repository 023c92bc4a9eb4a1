"""The region-split CPU backend's launcher and Python entry (the lowering: regions.py).

`__az_launch(grid, block, argv, fault, rank, shared, shared_bytes, frame, dyn_shared)` runs
the blocks in order (z, y, x), zeroing the block's shared memory (the kernel zeroes the
context slots of user locals) before each, and returns 0 or 1 + the linear index of a
diverged block, which `RegionModule` raises as a RuntimeError naming the block.
"""

from __future__ import annotations

import llvmlite.ir as llir

from anodize.codegen.artifact import flat_abi

from . import split as cs
from .backend import _decode, block_range
from .engine import LAUNCH
from .regions import CTX_BYTES, OFF_ERROR, OFF_FRAME, OFF_SHARED, RegionLowerer, SplitTarget, _c32, _c64
from ..llvm.types import I1, I8, I32T, I64T
from ..lowerings import REGISTERING  # noqa: F401  (the node lowerings the region lowerer dispatches to)


def add_launcher(lw: RegionLowerer) -> None:
    """Append `__az_launch` (see the module docstring): one call of the kernel per block."""
    ptr = llir.PointerType()
    fty = llir.FunctionType(I32T, [ptr, ptr, ptr, ptr, I32T, ptr, I64T, ptr, I32T])
    f = llir.Function(lw.module, fty, LAUNCH)
    grid, block, argv, fault, rank, shared, shared_bytes, frame, dyn = f.args
    b = llir.IRBuilder(f.append_basic_block("entry"))
    ctx = b.inttoptr(b.ptrtoint(b.alloca(I64T, size=_c32(CTX_BYTES // 8), name="ctx"), I64T), ptr)  # an untyped pointer

    def at(off: int) -> llir.Value:
        return b.gep(ctx, [_c64(off)], inbounds=True, source_etype=I8)

    def dim(p: llir.Value, i: int) -> llir.Value:
        return b.load(b.gep(p, [_c64(i)], source_etype=I32T), typ=I32T)

    g = [dim(grid, i) for i in range(3)]
    for i in range(3):
        b.store(dim(block, i), at(4 * (6 + i)))
        b.store(g[i], at(4 * (9 + i)))
    b.store(dyn, at(52))
    b.store(b.ptrtoint(shared, I64T), at(OFF_SHARED))
    b.store(b.ptrtoint(frame, I64T), at(OFF_FRAME))
    b.store(_c32(0), at(OFF_ERROR))
    args = [_decode(b, b.load(b.gep(argv, [_c64(i)], source_etype=I64T), typ=I64T), kind) for i, kind in enumerate(flat_abi(lw.k.params))]
    memset = lw.declare("llvm.memset.p0.i64", llir.VoidType(), [ptr, I8, I64T, I1])
    count = b.alloca(I32T, name="blocks")
    b.store(_c32(0), count)
    done = f.append_basic_block("done")
    failed = f.append_basic_block("failed")

    def one(bx: llir.Value) -> None:
        b.store(bx, at(12))
        with b.if_then(b.icmp_unsigned("!=", shared_bytes, _c64(0))):
            b.call(memset, [shared, llir.Constant(I8, 0), shared_bytes, llir.Constant(I1, 0)])
        b.call(lw.fn, args + [fault, rank, ctx])
        b.store(b.add(b.load(count, typ=I32T), _c32(1)), count)
        ok = f.append_basic_block("ok")
        b.cbranch(b.icmp_unsigned("!=", b.load(at(OFF_ERROR), typ=I32T), _c32(0)), failed, ok)
        b.position_at_end(ok)

    def one_block(bxyz: tuple[llir.Value, llir.Value, llir.Value]) -> None:
        b.store(bxyz[1], at(16))
        b.store(bxyz[2], at(20))
        one(bxyz[0])

    block_range(b, f, grid, g, one_block)  # the chunk of blocks `run_in_chunks` gives this call
    b.branch(done)
    b.position_at_end(done)
    b.ret(_c32(0))
    b.position_at_end(failed)
    b.ret(b.load(count, typ=I32T))


def compile_regions(plan: cs.Plan, *, bounds_checks: bool = True) -> tuple[RegionLowerer, SplitTarget]:
    target = SplitTarget(plan.kernel)
    lw = RegionLowerer(plan, target, bounds_checks=bounds_checks)
    lw.lower()
    add_launcher(lw)
    return lw, target

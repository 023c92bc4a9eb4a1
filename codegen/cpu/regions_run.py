"""The region-split CPU backend's launcher and Python entry (the lowering: regions.py).

`__az_launch(grid, block, argv, fault, rank, shared, shared_bytes, frame, dyn_shared)` runs
the blocks in order (z, y, x), zeroing the block's shared memory (the kernel zeroes the
context slots of user locals) before each, and returns 0 or 1 + the linear index of a
diverged block, which `RegionModule` raises as a RuntimeError naming the block.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import llvmlite.ir as llir
import numpy as np

from anodize.codegen.artifact import ParamSpec, flat_abi

from . import printf, split as cs
from .backend import LAUNCH, _decode, _encode, _lock, block_range, JitEngine, run_in_chunks
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


class RegionModule:
    """A JIT-compiled region-split kernel; `__call__` has `CpuModule`'s signature."""

    threaded = False

    def __init__(self, llvm_ir: str, params: tuple[ParamSpec, ...], entry: str, *, static_shared: int,
                 frame_per_thread: int, min_threads: int, block: tuple[int, ...] | None = None, isa: str = "host",
                 obj: bytes | None = None):
        """`obj`: the object file of an earlier compile of the same module (machine_code.py), loaded instead."""
        printf.register_symbols()
        self.recipe = {"module": "regions", "entry": entry, "isa": isa, "static_shared": static_shared,
                       "frame_per_thread": frame_per_thread, "min_threads": min_threads, "block": list(block) if block else None}
        self.static_shared = static_shared
        self.frame_per_thread = frame_per_thread
        self.min_threads = min_threads
        self.block = block
        with _lock:
            self._jit = JitEngine(llvm_ir, isa, LAUNCH, obj)
            addr = self._jit.address(LAUNCH)
        self.optimized_ir = self._jit.optimized_ir
        vp = ctypes.c_void_p
        self._fn = ctypes.CFUNCTYPE(ctypes.c_int32, vp, vp, vp, vp, ctypes.c_int32, vp, ctypes.c_int64, vp, ctypes.c_int32)(addr)
        self.kinds = flat_abi(params)
        self.entry = entry

    def __call__(self, grid_xyz: Sequence[int], block_xyz: Sequence[int], flat_args: Sequence[Any], fault_address: int,
                 launch_rank: int, dynamic_shared: int = 0) -> None:
        if len(flat_args) != len(self.kinds):
            raise TypeError(f"`{self.entry}` takes {len(self.kinds)} flattened arguments {self.kinds}, got {len(flat_args)}")
        g = (tuple(int(x) for x in grid_xyz) + (1, 1, 1))[:3]
        bl = (tuple(int(x) for x in block_xyz) + (1, 1, 1))[:3]
        if any(x < 0 or x >= 2**31 for x in g + bl) or bl[0] * bl[1] * bl[2] >= 2**31 - 32:
            raise ValueError(f"grid {g} / block {bl} out of range")
        if not 0 <= int(dynamic_shared) < 2**31:
            raise ValueError(f"dynamic shared memory of {dynamic_shared} bytes is out of range")
        argv = (ctypes.c_uint64 * max(1, len(self.kinds)))(*[_encode(v, k) for v, k in zip(flat_args, self.kinds, strict=True)])
        if self.block is not None and bl != self.block:
            raise ValueError(f"`{self.entry}` was compiled for its contract's block {self.block}, launched with {bl}")
        threads = bl[0] * bl[1] * bl[2]
        nalloc = max(-(-threads // 32) * 32, self.min_threads)
        frame = np.zeros(max(16, nalloc * self.frame_per_thread), np.uint8)
        shared_bytes = self.static_shared + int(dynamic_shared)
        shared = np.zeros(max(16, shared_bytes), np.uint8)
        block = (ctypes.c_uint32 * 3)(*bl)
        fn, bp, ap, fa, rk, sp, fp, dyn = (self._fn, ctypes.addressof(block), ctypes.addressof(argv), int(fault_address),
                                           int(launch_rank), shared.ctypes.data, frame.ctypes.data, int(dynamic_shared))
        stopped = run_in_chunks(lambda grid: fn(ctypes.addressof(grid), bp, ap, fa, rk, sp, shared_bytes, fp, dyn), g, threads)
        if stopped:
            start, bad = stopped
            lin = start + bad - 1
            where = (lin % g[0], lin // g[0] % g[1], lin // (g[0] * g[1]))
            raise RuntimeError(
                f"block {where} diverged: its threads disagreed on a condition or trip count around "
                "`az.syncthreads()`, a collective or a warp operation (a barrier under thread-dependent control flow?)"
            )


def compile_regions(plan: cs.Plan, *, bounds_checks: bool = True) -> tuple[RegionLowerer, SplitTarget]:
    target = SplitTarget(plan.kernel)
    lw = RegionLowerer(plan, target, bounds_checks=bounds_checks)
    lw.lower()
    add_launcher(lw)
    return lw, target

"""The CPU backend's execution side: the host's target machines, MCJIT engines, and the kernel
entries that run a grid (`CpuModule`: one loop, or one host thread per GPU thread;
`RegionModule`: one host thread per block, region-split).

The lowering (backend.py, regions.py, split.py) builds a module; this module turns it into
machine code and calls it.  It imports no lowering (no `llvmlite.ir`, no typed IR), so a kernel
loaded from the disk cache (machine_code.py) is ready after llvmlite's binding and this.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import llvmlite.binding as llvm
import numpy as np

from anodize.codegen.artifact import ParamSpec, flat_abi
from anodize.language.halfbits import round_bits

from ..llvm.binding import optimize
from . import printf, threads
from .heap import engine_freed

__all__ = ["CPU_ISA_VAR", "CPU_ISAS", "cpu_isa", "isa_runs_here", "engine_machine", "host_target_machine", "LAUNCH", "THREAD",
           "CHUNK_SECONDS", "grid_words", "run_in_chunks", "JitEngine", "CpuModule", "RegionModule"]

_lock = threading.Lock()
LAUNCH = "__az_launch"
THREAD = "__az_thread"


# The vector ISA the CPU backend optimises for (`ANODIZE_CPU_ISA`): the host's by default, or
# a fixed x86-64 level, so that one machine runs the vectoriser's decisions for another: the
# module is optimised for that level, and executes with its instructions where the host has
# them, else lowered to the host's (the IR's vector widths stay those the level chose).
CPU_ISA_VAR = "ANODIZE_CPU_ISA"
CPU_ISAS: dict[str, tuple[str, str, str]] = {  # name: (LLVM cpu, features, the host feature it needs)
    "sse4.2": ("x86-64-v2", "", "+sse4.2"),
    "avx2": ("x86-64-v3", "", "+avx2"),
    "avx512": ("x86-64-v4", "", "+avx512f"),
}


def cpu_isa() -> str:
    """`ANODIZE_CPU_ISA` ("host", "sse4.2", "avx2", "avx512"); "host" when unset."""
    name = os.environ.get(CPU_ISA_VAR, "").strip() or "host"
    if name != "host" and name not in CPU_ISAS:
        raise ValueError(f"{CPU_ISA_VAR} must be one of host, {', '.join(CPU_ISAS)}; got {name!r}")
    return name


def isa_runs_here(isa: str) -> bool:
    """Whether this host executes `isa`'s instructions (else its modules run lowered to the host's)."""
    if isa == "host":
        return True
    _init()
    return llvm.get_process_triple().startswith("x86_64") and llvm.get_host_cpu_features().get(CPU_ISAS[isa][2][1:], False)


@functools.cache
def _init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # glibc's libm by its soname first: `find_library` runs `ldconfig -p` in a child process
    # (tens of milliseconds of a cached kernel's load)
    for libm in ("libm.so.6", None) if sys.platform.startswith("linux") else (None,):
        libm = libm or ctypes.util.find_library("m")
        try:
            if libm:
                llvm.load_library_permanently(libm)
                return
        except RuntimeError:
            continue


def _new_host_tm(isa: str = "host", *, execute: bool = False) -> llvm.TargetMachine:
    """A machine for `isa`'s level (the host's CPU when "host"); with `execute`, the host's
    wherever the host lacks that level (the module keeps the vector widths it was optimised
    for; the backend splits them into the host's registers)."""
    _init()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    if isa != "host" and not (execute and not isa_runs_here(isa)):
        cpu, features, _ = CPU_ISAS[isa]
        return target.create_target_machine(cpu=cpu, features=features, opt=3, jit=True)
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, jit=True
    )


def engine_machine(isa: str = "host") -> llvm.TargetMachine:
    """The machine of an MCJIT engine for a module optimised for `isa` (the engine owns and frees it)."""
    return _new_host_tm(isa, execute=True)


@functools.cache
def host_target_machine(isa: str = "host") -> llvm.TargetMachine:
    """The shared machine the CPU backend optimises for (the host's, or `isa`'s level)."""
    return _new_host_tm(isa)


# A launcher call runs at most this long (about) before Python runs again: Ctrl-C's latency.
CHUNK_SECONDS = 0.1


def grid_words(g: Sequence[int]) -> Any:
    """The launcher's `grid` argument: three u32 dims, a pad word, then the i64 block range."""
    words = (ctypes.c_uint32 * 8)(*g, 0)
    return words


def run_in_chunks(call: Callable[[Any], Any], g: Sequence[int], threads_per_block: int) -> Any:
    """Run a launcher over the whole grid `g`, a range of blocks per call, sized so each call
    takes about CHUNK_SECONDS: between calls Python runs, so a KeyboardInterrupt (Ctrl-C)
    stops the launch within about that long (after the blocks that ran; a block is never cut
    short).  `call(grid_words)` returns non-zero to stop (its value is returned, with the
    range's start), else None is returned."""
    total = g[0] * g[1] * g[2]
    if total == 0:
        return None
    if total >= 2**62:
        raise ValueError(f"grid {tuple(g)} has too many blocks")
    words = grid_words(g)
    rng = ctypes.cast(ctypes.addressof(words) + 16, ctypes.POINTER(ctypes.c_int64))
    start = 0
    # a small grid is one call; a large one starts with one block (a block of a heavy kernel may
    # take long) and grows the range fourfold while a call is short
    chunk = total if total * threads_per_block <= 4096 else 1
    while start < total:
        end = min(total, start + chunk)
        rng[0], rng[1] = start, end
        t0 = time.perf_counter()
        bad = call(words)
        if bad:
            return start, bad
        dt = time.perf_counter() - t0
        if dt < CHUNK_SECONDS / 4:
            chunk = min(chunk * 4, 1 << 40)
        elif dt > CHUNK_SECONDS:
            chunk = max(1, chunk // 2)
        start = end
    return None


def _encode(value: Any, kind: str) -> int:
    if kind == "ptr":
        if hasattr(value, "ctypes"):
            return int(value.ctypes.data)
        if isinstance(value, ctypes.c_void_p):
            return int(value.value or 0)
        return int(value) & (2**64 - 1)
    if kind == "f32":
        return struct.unpack("<I", struct.pack("<f", float(value)))[0]
    if kind == "f64":
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    if kind == "bool_":
        return 1 if bool(value) else 0
    if kind in ("f16", "bf16", "f8e4m3", "f8e5m2") and not hasattr(type(value), "__index__"):
        return round_bits(float(value), kind)  # a number; an integer is taken as the bit pattern
    return int(value) & (2**64 - 1)


class JitEngine:
    """An MCJIT engine and the LLVM context of its module, freed together, the engine first.

    The module is parsed into a context of its own: the global one never gives back the types,
    constants and metadata a module creates.  The context's own finaliser is turned off
    (`_owned`, as llvmlite does for a module an engine owns) so that a garbage collection that
    finalises both in any order cannot free it under the engine; `__del__` frees the engine,
    then the context, then counts it for `heap.engine_freed`.  Build it
    under `_lock`."""

    def __init__(self, llvm_ir: str, isa: str, entry: str, obj: bytes | None = None) -> None:
        """Parse `llvm_ir`, optimise it (O3, keeping `entry`) for `isa` and JIT it; `object` is
        then the object file MCJIT built (codegen/cpu/machine_code.py caches it).  With `obj`,
        load that object file instead (no IR: `llvm_ir` is not read, `optimized_ir` is "")."""
        self._context = llvm.create_context()
        self._context._owned = True
        self.object: bytes | None = obj
        mod = llvm.parse_assembly("" if obj is not None else llvm_ir, self._context)
        try:
            if obj is None:
                mod.verify()
                optimize(mod, host_target_machine(isa), 3, {entry})
            else:
                mod.triple = llvm.get_process_triple()
            self.optimized_ir = "" if obj is not None else str(mod)
            self._engine = llvm.create_mcjit_compiler(mod, engine_machine(isa))
        except BaseException:
            mod.close()
            raise
        if obj is None:
            self._engine.set_object_cache(self._keep_object, lambda _module: None)
        else:
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self._engine.finalize_object()

    def _keep_object(self, _module: Any, buffer: bytes) -> None:
        self.object = bytes(buffer)

    def address(self, name: str) -> int:
        return int(self._engine.get_function_address(name))

    def __del__(self) -> None:
        if sys.is_finalizing():  # llvmlite's library may be gone: the process gives everything back
            return
        engine = self.__dict__.pop("_engine", None)
        if engine is not None:
            engine.close()
        context = self.__dict__.pop("_context", None)
        if context is not None:
            context._dispose()
            context.detach()
            engine_freed()


class CpuModule:
    """A JIT-compiled kernel; keep it alive as long as its entry may be called."""

    def __init__(self, llvm_ir: str, params: tuple[ParamSpec, ...], entry: str, *, threaded: bool = False, static_shared: int = 0,
                 isa: str = "host", whole_grid: bool = False, obj: bytes | None = None):
        """`isa`: the vector level the module is optimised for (`cpu_isa()`); `whole_grid`: every
        block of the grid runs at once (a kernel with `az.grid.sync()`, threaded); `obj`: the
        object file of an earlier compile of the same module (machine_code.py), loaded instead."""
        self.recipe = {"module": "threaded" if threaded else "loop", "entry": entry, "isa": isa,
                       "static_shared": static_shared, "whole_grid": whole_grid}
        self.threaded = threaded
        self.whole_grid = whole_grid
        self.static_shared = static_shared
        printf.register_symbols()
        if threaded:
            threads.register_symbols()
        with _lock:
            self._jit = JitEngine(llvm_ir, isa, THREAD if threaded else LAUNCH, obj)
            addr = self._jit.address(THREAD if threaded else LAUNCH)
        self.optimized_ir = self._jit.optimized_ir
        if threaded:
            self._fn = threads.thread_proto()(addr)
        else:
            proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)
            self._fn = proto(addr)
        self.kinds = flat_abi(params)
        self.entry = entry

    def __call__(
        self,
        grid_xyz: Sequence[int],
        block_xyz: Sequence[int],
        flat_args: Sequence[Any],
        fault_address: int,
        launch_rank: int,
        dynamic_shared: int = 0,
    ) -> None:
        """Run the whole grid.  `flat_args` has one value per `flat_abi` slot (pointers as ints)."""
        if len(flat_args) != len(self.kinds):
            raise TypeError(f"`{self.entry}` takes {len(self.kinds)} flattened arguments {self.kinds}, got {len(flat_args)}")
        g = (tuple(int(x) for x in grid_xyz) + (1, 1, 1))[:3]
        bl = (tuple(int(x) for x in block_xyz) + (1, 1, 1))[:3]
        if any(x < 0 or x >= 2**31 for x in g + bl):
            raise ValueError(f"grid {g} / block {bl} out of range")
        if not 0 <= int(dynamic_shared) < 2**31:
            raise ValueError(f"dynamic shared memory of {dynamic_shared} bytes is out of range")
        argv = (ctypes.c_uint64 * max(1, len(self.kinds)))(*[_encode(v, k) for v, k in zip(flat_args, self.kinds, strict=True)])
        if self.threaded:
            threads.run_grid(self._fn, g, bl, ctypes.addressof(argv), int(fault_address), int(launch_rank), self.static_shared,
                             int(dynamic_shared), whole_grid=self.whole_grid)
            return
        block = (ctypes.c_uint32 * 3)(*bl)
        fn, bp, ap, fa, rk = self._fn, ctypes.addressof(block), ctypes.addressof(argv), int(fault_address), int(launch_rank)
        run_in_chunks(lambda grid: fn(ctypes.addressof(grid), bp, ap, fa, rk), g, bl[0] * bl[1] * bl[2])


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

"""The compiler's public entry points: a kernel to a `CompiledKernel` for a GPU or the CPU.

The GPU path is imported with this module; the tile compiler (codegen/tile/), the CPU backend
(codegen/cpu/: llvmlite's binding, loaded at import) and the debug device (codegen/debug/) are
each imported where a compile first needs them (`_tile_compiler`, `_cpu_backend`,
`compile_debug`): a SIMT kernel's GPU compile loads none of them, and llvmlite's binding loads
on a background thread meanwhile (runtime/compile.py `_preload_llvm`)."""

from __future__ import annotations

import os
import time
from types import ModuleType, SimpleNamespace
from typing import Any

from anodize.codegen.artifact import CompiledKernel, foreign_links

from anodize.language import ir, messages
from anodize.language.diagnostics import Span
from anodize.language.ir_walk import walk
from anodize.language.errors import CheckError
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, static_shared_bytes as shared_bytes, storage_error_without_tensor_cores
from anodize.language.typer import build_ir

from .gpu import ptx
from .lowerings import lower_kernel
from .toolchain import block_shared_limit, tc_gemm_engine

__all__ = ["compile_gpu", "start_gpu", "compile_cpu", "compile_debug", "static_shared_bytes"]


def _typed(kernel: Any) -> ir.KernelIR:
    """The typed model to lower: given, or the front end's typing of a kernel object
    (codegen alone does not run the checker's rules; the runtime's compile path does)."""
    return kernel if isinstance(kernel, ir.KernelIR) else build_ir(kernel)


def _tiles(k: ir.KernelIR, threads: int, arch: str = "") -> ir.KernelIR:
    """A tile kernel's plain IR for blocks of `threads` threads (codegen/tile/plain.py); `k` itself
    for a SIMT kernel.  `arch`: the GPU's (tensor cores from sm_80: mma.sync, or wgmma on sm_90,
    `toolchain.tc_gemm_engine`), "" elsewhere."""
    if not getattr(k, "tile_warps", 0):
        return k
    engine = tc_gemm_engine(arch) if arch else ""
    if arch and not engine:  # below sm_80 the GEMM form's accumulator is a tile in shared memory too
        diag = storage_error_without_tensor_cores(k)
        if diag is not None:
            raise CheckError([diag])
    out = _tile_compiler().lower_tiles(k, threads, tensor_cores=bool(engine), wgmma=engine == "wgmma",
                      shared_limit=block_shared_limit(arch) if arch else STATIC_SHARED_MAX_BYTES,
                      vectors=bool(arch))
    # the typer refused tiles whose bound (language/tile_storage.py) is over the limit, and the
    # lowering stays within that bound (tensor-core staging goes to dynamic shared memory when it
    # does not fit beside): more static memory here is a bug in the lowering, not the user's
    assert not arch or static_shared_bytes(out) <= STATIC_SHARED_MAX_BYTES, f"tile lowering allocated {static_shared_bytes(out)} bytes"
    return out


def _tile_compiler() -> ModuleType:
    """The tile compiler's entry (codegen/tile/entry.py), imported for tile kernels only; with it
    the lowerings of the nodes it makes register."""
    from .tile import entry

    return entry


def _cpu_backend() -> Any:
    """The CPU backend's modules (codegen/cpu/), imported for a CPU compile only."""
    from .cpu import backend, engine, machine_code, regions_run, split

    return SimpleNamespace(backend=backend, engine=engine, machine_code=machine_code, regions_run=regions_run, split=split)


def static_shared_bytes(k: ir.KernelIR) -> int:
    return shared_bytes(dict(k.shared))


def _artifact(k: ir.KernelIR, arch: str, llvm_ir: str, checks: int, entry: str, host_tiles: bool = False) -> CompiledKernel:
    """`host_tiles`: a tile kernel on the CPU backend, whose tiles' "shared memory" is host
    memory the compiler allocates (no block limit to check at launch: 0 static bytes)."""
    return CompiledKernel(
        name=k.name,
        entry=entry,
        params=k.params,
        contract=k.contract,
        domain=k.domain,
        arch=arch,
        llvm_ir=llvm_ir,
        fault_sites=k.fault_sites,
        bounds_checks=checks,
        uses_barrier=k.uses_barrier,
        static_shared_bytes=0 if host_tiles else static_shared_bytes(k),
        source_path=k.path,
        source_line=k.line,
    )


def compile_gpu(
    kernel: Any,
    arch: str = "sm_90",
    *,
    bounds_checks: bool = True,
    line_info: bool = False,
    opt: int = 3,
    ptxas: bool | None = None,
) -> CompiledKernel:
    """Compile a kernel to PTX for `arch`.

    `ptxas=None` assembles a cubin (and fills `resources`) when ptxas is installed;
    `True` requires it, `False` skips it.  Raises CheckError for a kernel outside the language."""
    pending = start_gpu(kernel, arch, bounds_checks=bounds_checks, line_info=line_info, opt=opt, ptxas=False)
    out = pending.out
    if ptxas is True or (ptxas is None and ptx.find_ptxas() is not None):
        out.cubin, out.resources = ptx.run_ptxas(out.ptx, pending.build, line_info=line_info, opt_level=pending.ptxas_opt,
                                             fast_compile=pending.ptxas_fast, relocatable=bool(out.foreign))
    return pending.result()


# ptxas's `-Ofc` level for the wgmma tile (None: off): see bench/RESULTS.md (2026-12-01, cold compile)
WGMMA_PTXAS_FAST_COMPILE: str | None = None


def ptxas_options(build: str, ptx_text: str) -> tuple[int | None, str | None]:
    """ptxas's (`-O` level, `-Ofc` level) for PTX `ptx_text` built for `build`: -O1 for a kernel
    holding the wgmma tile (its loop is scheduled already, and on the H200 -O1 built it faster,
    128x256: 0.797x of cuBLAS against 0.780x, in ~60% of the time), ptxas's defaults otherwise
    and under `ANODIZE_TILE_PTXAS_O3=1` (a benchmarking switch, codegen/toolchain.py: whether
    that still holds for today's mainloop and tiles)."""
    wgmma = build.endswith("a") and "wgmma.mma_async" in ptx_text
    opt = 1 if wgmma and os.environ.get("ANODIZE_TILE_PTXAS_O3", "") != "1" else None
    return opt, WGMMA_PTXAS_FAST_COMPILE if opt == 1 else None


class PendingGpu:
    """A GPU compile whose ptxas is still running (`start_gpu`): `result()` waits for the cubin
    and gives the CompiledKernel; `cancel()` stops ptxas and drops it."""

    def __init__(self, out: CompiledKernel, job: Any, t0: float, build: str):
        self.out, self.job, self.t0 = out, job, t0
        self.cancelled = False
        self.build = build  # the arch the PTX is for ("sm_90a" when it holds wgmma)
        self.ptxas_opt, self.ptxas_fast = ptxas_options(build, out.ptx)

    def result(self) -> CompiledKernel:
        if self.cancelled:
            raise RuntimeError("a cancelled compile has no result")
        if self.job is not None:
            self.out.cubin, self.out.resources = self.job.result()
            self.job = None
        if self.out.foreign:  # a relocatable object: the loader links the PTX with the foreign functions'
            self.out.cubin = None
        self.out.compile_seconds = time.perf_counter() - self.t0
        return self.out

    def cancel(self) -> None:
        """Stop ptxas and drop the speculative artifact (its PTX with it): `result()` then raises."""
        if self.job is not None:
            self.job.cancel()
            self.job = None
        self.cancelled = True
        self.out = None  # type: ignore[assignment]


def start_gpu(
    kernel: Any,
    arch: str = "sm_90",
    *,
    bounds_checks: bool = True,
    line_info: bool = False,
    opt: int = 3,
    ptxas: bool | None = None,
) -> PendingGpu:
    """`compile_gpu` up to the PTX, with ptxas started in the background (see PendingGpu)."""
    ptx.features_for(arch)  # validate the arch before any work
    t0 = time.perf_counter()
    k = typed = _typed(kernel)
    tile = getattr(k, "tile_warps", 0) > 0
    k = _tiles(k, k.tile_warps * 32, arch)
    dynamic_smem, wgmma = _tile_compiler().tensor_core_shared(k) if tile else (0, False)  # (a SIMT kernel imports no tile code)
    # wgmma is in sm_90a only: a kernel holding it is built for that (it runs on sm_90 parts)
    build = arch + "a" if wgmma and not arch.endswith("a") else arch
    lw = lower_kernel(k, ptx.NVPTXTarget(k.contract, arch), bounds_checks=bounds_checks, line_info=line_info)
    llvm_ir = str(lw.module)
    optimized, ptx_text = ptx.emit_ptx(llvm_ir, lw.entry_name, build, opt)
    # (the typed kernel, not its tile lowering: only the typer makes foreign calls, and the
    # lowered IR of a tile kernel is ~100x its size: this walk was 30 ms of the GELU tile's compile)
    foreign = foreign_calls(typed)
    job = None
    if ptxas is True or (ptxas is None and ptx.find_ptxas() is not None):
        # started as soon as the PTX is there: the artifact and the matmul report are made while it runs
        ptxas_opt, ptxas_fast = ptxas_options(build, ptx_text)
        job = ptx.PtxasJob(ptx_text, build, line_info=line_info, opt_level=ptxas_opt, fast_compile=ptxas_fast,
                           relocatable=bool(foreign))
    try:
        out = _artifact(k, arch, llvm_ir, lw.checks, lw.entry_name)
        out.foreign = foreign
        out.links = foreign_links(getattr(kernel, "fn", None), out.foreign, arch)  # (a typed IR passed itself has none)
        out.coarsen = lw.coarse.factor if lw.coarse is not None else 1
        out.grid_counter = lw.grid_counter
        out.ptx = ptx_text
        out.llvm_ir_optimized = optimized
        out.dynamic_shared_bytes = dynamic_smem
        if tile:
            lines, warnings = _tile_compiler().matmul_report(typed, k, arch, tc_gemm_engine(arch))
            out.matmuls, out.warnings = tuple(lines), tuple(warnings)
    except BaseException:
        if job is not None:  # (a foreign link that fails, say: no ptxas left running)
            job.cancel()
        raise
    return PendingGpu(out, job, t0, build)


def compile_cpu(
    kernel: Any,
    *,
    bounds_checks: bool = True,
    vector_grid_stride: bool = False,
    split_barriers: bool = True,
    coarsen: bool = False,
    align_records: bool = False,
) -> CompiledKernel:
    """Compile a kernel for the CPU backend; `cpu_entry` runs a whole grid on the host.

    `vector_grid_stride=True` maps elementwise grid-stride loops as the GPU does
    (16-byte chunks, `codegen/llvm/gridstride.py`); the default scalar mapping is as valid (any
    disjoint assignment of indices to threads is) and is what the runtime uses.

    A kernel with barriers, shared memory or warp operations runs one host thread per block,
    looping over the block's threads between synchronisation points (codegen/cpu/split.py,
    codegen/cpu/regions.py); `split_barriers=False`, and the few forms `cpu.split` leaves out, run
    one host thread per GPU thread instead (codegen/cpu/threads.py).

    `coarsen=True` coarsens an element-wise kernel as the GPU does (`codegen/llvm/coarsen.py`): its
    `cpu_entry` still takes the user's grid, and runs ceil(grid_x / 4) blocks of it.

    `align_records=True` gives a kernel over record slices the GPU's aligned copy of its body
    (`codegen/llvm/record_align.py`), taken when the slices' bases are aligned; off by default,
    since it doubles the body the JIT compiles and the host gains little from it."""
    cpu = _cpu_backend()
    t0 = time.perf_counter()
    k = _typed(kernel)
    _refuse_foreign(k, "CPU backend")  # CUDA code: nothing to run on the host
    tile = getattr(k, "tile_warps", 0) > 0
    k = _tiles(k, 1)  # a tile kernel: one host thread runs each program
    # a kernel whose `unsafe` code waits on other threads' writes runs one host thread per GPU
    # thread (codegen/cpu/threads.py), never a block's threads in turn: so it ends wherever it ends on a GPU
    threaded = k.uses_barrier or k.uses_warp or k.uses_shared or k.waits
    if threaded and split_barriers and not k.waits and not k.grid_sync:  # a grid barrier: every block at once
        try:
            plan = cpu.split.plan_kernel(k)
        except cpu.split.Unsplittable:  # the few forms the splitter leaves to one host thread per GPU thread
            plan = None
        if plan is not None:
            return _compile_regions(cpu, k, plan, bounds_checks, t0, tile, cpu.engine.cpu_isa())
    target = cpu.backend.CPUTarget(k, threaded=threaded)
    target.vector_grid_stride = vector_grid_stride
    target.coarsen = coarsen and not threaded
    target.align_records = align_records
    lw = lower_kernel(k, target, bounds_checks=bounds_checks)
    if threaded:
        cpu.backend.add_thread_entry(lw)
    else:
        cpu.backend.add_launcher(lw)
    llvm_ir = str(lw.module)
    jit = cpu.engine.CpuModule(llvm_ir, k.params, lw.entry_name, threaded=threaded, static_shared=target.static_shared, isa=cpu.engine.cpu_isa(),
                                  whole_grid=k.grid_sync)
    out = _artifact(k, "cpu", llvm_ir, lw.checks, lw.entry_name, tile)
    out.coarsen = lw.coarse.factor if lw.coarse is not None else 1
    out.llvm_ir_optimized = jit.optimized_ir
    out.cpu_entry = _host_entry(jit, tile)
    out.compile_seconds = time.perf_counter() - t0
    return out


def _host_entry(entry: Any, tile: bool) -> Any:
    """A tile kernel's host entry runs each program on one host thread, whatever block the
    launch names (`cpu.machine_code.ProgramsOnHost`); any other kernel's is `entry` itself."""
    return _cpu_backend().machine_code.ProgramsOnHost(entry) if tile else entry


def _compile_regions(cpu: Any, k: ir.KernelIR, plan: Any, bounds_checks: bool, t0: float, tile: bool = False, isa: str = "host") -> CompiledKernel:
    """A kernel with barriers, shared memory or warp operations: one host thread per block,
    looping over the block's threads between synchronisation points (codegen/cpu/regions.py)."""
    lw, target = cpu.regions_run.compile_regions(plan, bounds_checks=bounds_checks)
    llvm_ir = str(lw.module)
    jit = cpu.engine.RegionModule(llvm_ir, k.params, lw.entry_name, static_shared=target.static_shared,
                       frame_per_thread=lw.frame_per_thread, min_threads=lw.min_threads, block=lw.fixed_block, isa=isa)
    out = _artifact(k, "cpu", llvm_ir, lw.checks, lw.entry_name, tile)
    out.llvm_ir_optimized = jit.optimized_ir
    out.cpu_entry = _host_entry(jit, tile)
    out.compile_seconds = time.perf_counter() - t0
    return out


def foreign_calls(k: ir.KernelIR) -> tuple[tuple[str, str], ...]:
    """(module-level name, PTX symbol) of each foreign device function `k` (and its helpers) calls."""
    return tuple(sorted({(e.binding, e.symbol) for e in walk(k) if isinstance(e, ir.ForeignCall)}))


def _refuse_foreign(k: ir.KernelIR, target: str) -> None:
    """A target without CUDA code (the CPU backend, the debug device) refuses a kernel calling a
    foreign device function, at the call (`az-unsupported`: the checker passes it, a GPU runs it)."""
    for e in walk(k):
        if isinstance(e, ir.ForeignCall):
            raise CheckError([messages.unsupported(e.span or Span.point("<kernel>", 1, 0), "foreign-call-target",
                                                   help="foreign-call-gpu-only", name=e.binding, target=target)])


def compile_debug(kernel: Any) -> CompiledKernel:
    """The debug device's artifact: no machine code; `cpu_entry` interprets the typed IR
    (codegen/debug/interp.py), one Python thread per GPU thread, every access checked."""
    from .debug.run import InterpModule

    t0 = time.perf_counter()
    k = _typed(kernel)
    tile = getattr(k, "tile_warps", 0) > 0
    k = _tiles(k, 1)
    _refuse_foreign(k, "debug device")
    out = _artifact(k, "debug", "", 0, k.name)
    out.cpu_entry = _host_entry(InterpModule(k, out), tile)
    out.compile_seconds = time.perf_counter() - t0
    return out

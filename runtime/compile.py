"""Check, compile and load a kernel, caching each step in memory.

    compile_for_gpu(kernel, arch)      -> CompiledKernel   (checker, then codegen)
    compile_for_device(kernel, device) -> LoadedKernel     (the above, loaded on the device)

The checker gates codegen: a kernel (or a helper it calls) with an error never
gets an artifact, and the checker's error is what the caller sees.  The checker
hands back the kernel's typed model (the one typing of the module's one front,
`anodize/language/front.py`), and codegen lowers exactly that.

The artifact cache lives on the kernel object (its `KernelStore`, runtime/kernel_store.py) and is
keyed by the kernel's source hash, the target and the options, so an edited and re-decorated
kernel compiles again while a repeated launch does not.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from anodize.codegen import toolchain
from anodize.codegen.artifact import CompiledKernel
from anodize.language.records import dataclass
from anodize.language.sources import module_source, spec_repr
from anodize.language.syntax import collector_paused
from anodize.runtime import artifact_store, diskcache, lazy
from anodize.runtime.faults import can_fault
from anodize.runtime.probe import gpu_available

if TYPE_CHECKING:
    from anodize.runtime.device import Device
    from anodize.runtime.kernel_store import RuntimeKernel as Kernel

__all__ = ["compile_for_gpu", "compile_for_cpu", "compile_for_device", "LoadedKernel", "default_arch", "overlap_enabled"]

DEFAULT_ARCH = "sm_90"


@dataclass(frozen=True)
class LoadedKernel:
    """A compiled kernel ready to launch on one device."""

    compiled: CompiledKernel
    device: Device
    handle: Any  # cuda.core Kernel on a GPU; None on the CPU backend
    fault_address: int  # this kernel's slot in the device's fault arena
    # whether a submission's completion reads the kernel's fault record back: False only for a GPU
    # kernel whose PTX has no `__az_fault`, under ANODIZE_FAULT_READ_SKIP=1 (runtime/faults.py `can_fault`)
    may_fault: bool = True


def source_hash(kernel: Kernel) -> str:
    """SHA-256 of the kernel's module source (its helpers and tables live there too), its
    qualified name and first line (two kernels of one name are two kernels)."""
    cached = kernel.store.source_hash
    if cached is not None:
        return cached

    path, text = module_source(kernel.fn)
    line = getattr(kernel.fn.__code__, "co_firstlineno", 0)
    spec = spec_repr(kernel)
    digest = hashlib.sha256(f"{kernel.__qualname__}\0{line}\0{spec!r}\0{path}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()
    kernel.store.source_hash = digest
    return digest


def _enforce(kernel: Kernel) -> None:
    """The gate: the checker's rules and the typing of the kernel pass, or CheckError."""
    if kernel.store.checked == source_hash(kernel):
        return
    lazy.checker().enforce_kernel(kernel)
    kernel.store.checked = source_hash(kernel)


def _codegen_gpu(kernel: Kernel, arch: str, *, bounds_checks: bool, line_info: bool, opt: int) -> CompiledKernel:
    # `build_ir` returns the typing the checker already did (cached on the module's front)
    return lazy.codegen().compile_gpu(kernel, arch, bounds_checks=bounds_checks, line_info=line_info, opt=opt)


def _codegen_cpu(kernel: Kernel, *, bounds_checks: bool) -> CompiledKernel:
    return lazy.codegen().compile_cpu(kernel, bounds_checks=bounds_checks)


def default_arch() -> str:
    """The first GPU's architecture, else sm_90."""
    if gpu_available():
        from anodize.runtime.device import cuda_device  # (NumPy: loaded only when a GPU is asked for)

        return str(getattr(cuda_device(0), "arch", DEFAULT_ARCH))
    return DEFAULT_ARCH


def compile_for_gpu(
    kernel: Kernel,
    arch: str | None = None,
    *,
    bounds_checks: bool = True,
    line_info: bool = False,
    opt: int = 3,
) -> CompiledKernel:
    """Check `kernel`, then compile it for `arch` (default: the current GPU's, else sm_90)."""
    arch = arch or default_arch()

    # the tensor-core routine of a tile GEMM (mma.sync or wgmma) is the compiler's choice per arch
    # (and `ANODIZE_TC_GEMM`): part of the key, as the code differs
    engine = toolchain.tc_gemm_engine(arch) if getattr(kernel, "num_warps", None) is not None else ""
    key = ("gpu", source_hash(kernel), arch, bool(bounds_checks), bool(line_info), int(opt), engine)
    hit = kernel.store.compiled.get(key)
    if hit is not None:
        return hit
    # The persistent cache: a hit is an artifact that passed the checker and codegen
    # for exactly these sources, target, options and toolchain.
    inputs = None
    if diskcache.enabled():
        options = {"bounds_checks": bool(bounds_checks), "line_info": bool(line_info), "opt": int(opt), "tc_gemm": engine}
        inputs = artifact_store.cache_inputs(kernel, arch, options)
        loaded = artifact_store.load(inputs, kernel)
        if loaded is not None:
            kernel.store.compiled[key] = loaded
            return loaded
    _preload_llvm()
    with gc_paused():
        compiled = _checked_codegen_gpu(kernel, arch, bounds_checks=bounds_checks, line_info=line_info, opt=opt)
    kernel.store.compiled[key] = compiled
    if inputs is not None:
        artifact_store.save(inputs, compiled)
    return compiled


def _preload_llvm() -> None:
    """The first compile of a process loads llvmlite's LLVM library (a large shared object) on a
    background thread, so the load -- outside the GIL -- overlaps the checker and the typing;
    codegen's own `import llvmlite.binding` then waits for it on the import lock."""
    if "llvmlite.binding" in sys.modules:
        return

    threading.Thread(target=__import__, args=("llvmlite.binding",), name="anodize-llvm-load", daemon=True).start()


# Whether a compile pauses Python's cyclic garbage collector (`gc_paused`); tests turn it off.
PAUSE_GC = True


def gc_paused() -> contextlib.AbstractContextManager[None]:
    """Python's cyclic collector off for the span of a compile (language/syntax.py
    `collector_paused`: on again, where it was on, when the last paused block on any thread
    leaves).  A compile makes ~30,000 short-lived objects (the tile lowering's IR, llvmlite's IR
    builder: instructions refer to their blocks and back, so they are cycles), and with
    everything the checker and codegen imported alive, a collection of the oldest generation
    walked all of them: 17-32 ms of a GEMM tile's 270 ms compile, 13-17 ms of its first
    (bench/RESULTS.md, 2026-12-05, session 15).  The compile's cycles are collected by the first
    collection after it.  A collector the caller turned off stays off."""
    return collector_paused() if PAUSE_GC else contextlib.nullcontext()


def overlap_enabled() -> bool:
    """Whether a first compile runs codegen and starts ptxas before the checker's verdict
    (`_checked_codegen_gpu`): on unless `ANODIZE_COMPILE_OVERLAP=0`, and only where ptxas is
    installed (without a background ptxas there is nothing to overlap)."""
    if os.environ.get("ANODIZE_COMPILE_OVERLAP", "1").strip().lower() in ("0", "off", "no", "false"):
        return False

    return toolchain.find_ptxas() is not None


def _checked_codegen_gpu(kernel: Kernel, arch: str, **options: Any) -> CompiledKernel:
    """The checker's verdict, then codegen's artifact of the typed model the checker passed.

    A kernel not checked yet (the first compile) has codegen run to the PTX first, from the same
    typed model the checker reads (the module's one front types it once), and ptxas started
    in the background; the checker then runs to completion while ptxas assembles.  That work
    is speculative: the CompiledKernel leaves here only once the checker passed.  When the
    checker rejects the kernel, ptxas is stopped and the PTX dropped, so a rejected kernel
    never yields an artifact (returned, cached in memory or on disk, or loaded), and the
    checker's CheckError is what the caller sees, the same one as without the overlap; when
    codegen fails, the checker runs first too and its error, if it has one, is the one raised.
    `ANODIZE_COMPILE_OVERLAP=0` runs the checker before codegen instead (docs/performance.md)."""
    if kernel.store.checked == source_hash(kernel) or not overlap_enabled():
        _enforce(kernel)
        return _codegen_gpu(kernel, arch, **options)
    try:
        pending = lazy.codegen().start_gpu(kernel, arch, **options)
    except Exception:
        _enforce(kernel)  # the checker's diagnostics come first
        raise
    try:
        _enforce(kernel)
    except BaseException:
        pending.cancel()  # ptxas stopped, the speculative PTX dropped with `pending`
        raise
    return pending.result()


def compile_for_cpu(kernel: Kernel, *, bounds_checks: bool = True) -> CompiledKernel:
    """Check `kernel`, then compile it for the CPU backend (llvmlite host JIT)."""
    key = ("cpu", source_hash(kernel), bool(bounds_checks), lazy.codegen_cpu().cpu_isa())
    hit = kernel.store.compiled.get(key)
    if hit is not None:
        return hit
    # The persistent cache: the machine code of an earlier process's compile for this host
    inputs = None
    if diskcache.enabled():
        inputs = artifact_store.cpu_cache_inputs(kernel, bounds_checks)
        loaded = artifact_store.load_cpu(inputs, kernel)
        if loaded is not None:
            kernel.store.compiled[key] = loaded
            return loaded
    with gc_paused():
        _enforce(kernel)
        compiled = _codegen_cpu(kernel, bounds_checks=bounds_checks)
    kernel.store.compiled[key] = compiled
    if inputs is not None:
        artifact_store.save_cpu(inputs, compiled)
    return compiled


def compile_for_debug(kernel: Kernel) -> CompiledKernel:
    """Check `kernel`, then make the debug device's artifact (an interpreter of its typed IR).

    Not cached on the kernel: the artifact grows fault sites as the debug device finds
    faults the compiler had no site for, and each loaded copy keeps its own."""
    _enforce(kernel)
    return lazy.codegen().compile_debug(kernel)


def compile_for_device(
    kernel: Kernel,
    device: Device,
    *,
    bounds_checks: bool = True,
    line_info: bool = False,
    opt: int = 3,
) -> LoadedKernel:
    """Compile for `device` and load the result there (once per kernel, device and options).
    A kernel built ahead of time (anodize/built.py) is loaded from its package instead."""
    prebuilt = getattr(kernel, "load_prebuilt", None)
    if prebuilt is not None:
        return prebuilt(device)  # type: ignore[no-any-return]
    engine = ""
    if getattr(kernel, "num_warps", None) is not None and device.kind not in ("cpu", "debug"):
        engine = toolchain.tc_gemm_engine(str(getattr(device, "arch", "")))
    key = ("loaded", id(device), source_hash(kernel), bool(bounds_checks), bool(line_info), int(opt), engine)
    hit = kernel.store.loaded.get(key)
    if hit is not None:
        return hit
    if device.kind == "debug":  # the debug device: the checked typed IR, interpreted (no LLVM)
        compiled = compile_for_debug(kernel)
        handle = None
    elif device.kind == "cpu":
        compiled = compile_for_cpu(kernel, bounds_checks=bounds_checks)
        if compiled.cpu_entry is None:
            raise RuntimeError(f"codegen returned no CPU entry for kernel `{kernel.__name__}`")
        handle = None
    else:
        compiled = compile_for_gpu(
            kernel, getattr(device, "arch", None), bounds_checks=bounds_checks, line_info=line_info, opt=opt
        )
        handle = device.load(compiled)  # type: ignore[attr-defined]
    loaded = LoadedKernel(compiled, device, handle, device.faults.register(compiled), may_fault=can_fault(compiled))
    kernel.store.loaded[key] = loaded
    return loaded

"""Where the CUDA tools are, found without importing llvmlite's binding or cuda.bindings.

The persistent compile cache keys every entry on the toolchain (runtime/artifact_store.py),
and a cached load must stay light: this module uses only the standard library.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys

__all__ = ["find_ptxas", "find_libdevice", "driver_version", "tc_gemm_engine", "block_shared_limit", "CODE_SWITCHES"]

# The environment switches that change the code a compile builds (each is in the compile-cache
# key, runtime/artifact_store.py; tests/test_cache_security.py checks that every `ANODIZE_*` name
# the compiler reads is either here or in `NON_CODE_SWITCHES`).
CODE_SWITCHES = ("ANODIZE_TC_GEMM", "ANODIZE_COARSEN_CHUNKS", "ANODIZE_ATTN_QREGS", "ANODIZE_ATTN_STAGES", "ANODIZE_ATTN_GROUPS",
                 "ANODIZE_ATTN_LAZY", "ANODIZE_ATTN_DYNAMIC", "ANODIZE_ATTN_MINB", "ANODIZE_ATTN_FORM", "ANODIZE_TILE_PREFETCH",
                 "ANODIZE_LIBDEVICE", "ANODIZE_CPU_ISA", "ANODIZE_RECORD_ALIGN", "ANODIZE_RECORD_WARP", "ANODIZE_TILE_EPILOGUE", "ANODIZE_TILE_STAGES",
                 "ANODIZE_TILE_GROUP", "ANODIZE_TILE_WGMMA_STACK", "ANODIZE_TILE_F16X2", "ANODIZE_TILE_A_RESIDENT", "ANODIZE_TILE_LOOP_VERSIONS",
                 "ANODIZE_TILE_LOAD_AHEAD", "ANODIZE_TILE_WHOLE_CHUNKS", "ANODIZE_TILE_UNSOUND_NO_PROXY_FENCE",
                 "ANODIZE_TILE_STORE_LIMIT", "ANODIZE_TILE_TWO_BLOCKS", "ANODIZE_TILE_PTXAS_O3",
                 "ANODIZE_FAST_EXP", "ANODIZE_TILE_ONE_WAIT", "ANODIZE_TILE_LDSM_XOR",
                 "ANODIZE_TILE_MASK_SKIP", "ANODIZE_TILE_LAZY_RESCALE", "ANODIZE_TILE_WHOLE_TILE",
                 "ANODIZE_TILE_COPY_FIRST", "ANODIZE_TILE_SCALAR_GROUP", "ANODIZE_TILE_PAIR_LOADS",
                 "ANODIZE_TILE_ATTN_WGMMA")
NON_CODE_SWITCHES = ("ANODIZE_CACHE", "ANODIZE_CACHE_DIR", "ANODIZE_CACHE_SHARED", "ANODIZE_COMPILE_OVERLAP", "ANODIZE_DEVICE",
                     "ANODIZE_EARLY_INIT", "ANODIZE_FAULT_READ_SKIP", "ANODIZE_IGNORE", "ANODIZE_INIT_BESIDE", "ANODIZE_MYPY_WORKERS", "ANODIZE_TRACEBACK",
                     "ANODIZE_TUNE_SEED", "ANODIZE_TUNE_VERBOSE")  # (the autotuner's: which declared configuration runs)


def find_ptxas() -> str | None:
    """`ptxas` on PATH, else under CUDA_HOME / CUDA_PATH / /usr/local/cuda; None if absent."""
    exe = "ptxas.exe" if sys.platform == "win32" else "ptxas"
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):  # `shutil.which`, without shutil
        p = os.path.join(d or os.curdir, exe)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "bin", exe)):
            return os.path.join(root, "bin", exe)
    return None


def find_libdevice() -> str | None:
    """The libdevice bitcode a math kernel links: `ANODIZE_LIBDEVICE`, else under CUDA_HOME /
    CUDA_PATH / /usr/local/cuda, else the `nvidia-cuda-nvcc` wheel's; None if absent."""
    cands = [os.environ["ANODIZE_LIBDEVICE"]] if os.environ.get("ANODIZE_LIBDEVICE") else []
    rel = os.path.join("nvvm", "libdevice", "libdevice.10.bc")
    cands += [os.path.join(os.environ[e], rel) for e in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(e)]
    cands.append(os.path.join("/usr/local/cuda", rel))
    try:
        spec = importlib.util.find_spec("nvidia.cuda_nvcc")
        cands += [os.path.join(r, rel) for r in (spec.submodule_search_locations or [])] if spec else []
    except (ImportError, ValueError):
        pass
    return next((c for c in cands if os.path.isfile(c)), None)


def driver_version() -> str:
    """The CUDA driver's version (`cuDriverGetVersion`, e.g. "13000"), or "none" without a driver.

    Read through ctypes from libcuda itself (no cuInit, no cuda.bindings import); the
    answer is the one `cuda.bindings.driver.cuDriverGetVersion()` gives."""
    names = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so", "libcuda.dylib")
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        out = ctypes.c_int(0)
        try:
            if lib.cuDriverGetVersion(ctypes.byref(out)) == 0:
                return str(out.value)
        except AttributeError:
            continue
    return "none"


def sm_number(arch: str) -> int:
    """80 for "sm_80", 90 for "sm_90" / "sm_90a"; 0 when not an `sm_NN` name."""
    digits = "".join(ch for ch in arch[3:] if ch.isdigit()) if arch.startswith("sm_") else ""
    return int(digits) if digits else 0


def tc_gemm_engine(arch: str) -> str:
    """Which tensor-core routine a tile kernel's GEMM form lowers to on `arch`: "wgmma" on
    sm_90 (built for sm_90a), "mma" (mma.sync) on the other archs from sm_80, "" below.
    `ANODIZE_TC_GEMM=mma` keeps mma.sync on sm_90 too.  Part of every compile-cache key
    (runtime/compile.py): the two build different code for one arch."""
    sm = sm_number(arch)
    if sm == 90 and os.environ.get("ANODIZE_TC_GEMM", "") != "mma":
        return "wgmma"
    return "mma" if sm >= 80 else ""


def block_shared_limit(arch: str) -> int:
    """The most shared memory one block may have on `arch` with the opt-in attribute (what a
    tile GEMM's compiler-owned staging buffer may take, static arrays included)."""
    sm = sm_number(arch)
    if sm in (80, 87):
        return 163 * 1024
    if sm in (90, 100, 103):
        return 227 * 1024
    if sm >= 86:
        return 99 * 1024
    return 48 * 1024

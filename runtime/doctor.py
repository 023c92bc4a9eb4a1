"""`anodize doctor`: what this machine offers anodize (GPU, driver, toolchain, cache).

Every probe is guarded: a missing driver or tool is reported, never raised.
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import lru_cache
from importlib import metadata
from typing import Any

from anodize.codegen import toolchain
from anodize.runtime import lazy
from anodize.runtime.diskcache import cache_dir
from anodize.runtime.probe import gpu_count


def ptxas_info() -> tuple[str | None, str | None]:
    """(path, version) of the ptxas that compiles use (`codegen.toolchain.find_ptxas`);
    (None, None) when there is none, a None version when `ptxas --version` fails."""
    path = toolchain.find_ptxas()
    if path is None:
        return None, None
    return path, _ptxas_version(path)


@lru_cache(maxsize=4)
def _ptxas_version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release ([\d.]+), V([\d.]+)", out)
    return m.group(2) if m else out.strip().splitlines()[-1] if out.strip() else None


def describe_ptxas() -> str:
    """One line: which ptxas builds cubins, or that none does."""
    path, version = ptxas_info()
    if path is None:
        return "not found (no cubin: the driver JIT-compiles the PTX at load; registers and spills unknown)"
    return f"{path} (version {version or 'unknown'})"


def _no_gpu_reason() -> str:
    """Why `gpu_count()` is 0, in words."""
    if os.environ.get("ANODIZE_DEVICE", "").strip().lower() == "cpu":
        return "GPUs hidden by ANODIZE_DEVICE=cpu"
    try:
        driver = lazy.cuda_driver()
    except Exception as e:
        return f"cuda-python is not usable ({type(e).__name__})"
    try:
        (err,) = driver.cuInit(0)
    except Exception as e:  # libcuda missing: the bindings raise when they load it
        return f"no CUDA driver library (libcuda) could be loaded ({type(e).__name__})"
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        text = name.decode() if isinstance(name, bytes) else str(name)
        return f"the CUDA driver reports {text}"
    return "the CUDA driver reports no devices"


def _nvjitlink() -> str:
    try:
        nvjitlink = lazy.cuda_nvjitlink()

        major, minor = nvjitlink.version()
        return f"available ({major}.{minor})"
    except Exception as e:  # a missing library is an answer, not an error
        return f"not available ({type(e).__name__})"


def _llvmlite() -> tuple[str, str]:
    try:
        llvmlite = lazy.llvmlite()
        llvm = lazy.llvm_binding()

        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        llvm.Target.from_triple("nvptx64-nvidia-cuda")
        return llvmlite.__version__, "yes"
    except Exception as e:
        try:
            llvmlite = lazy.llvmlite()

            return llvmlite.__version__, f"no ({e})"
        except Exception:
            return "not installed", "no"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def doctor_info() -> dict[str, Any]:
    """A flat, printable report: every value is a string or a number (never None)."""
    info: dict[str, Any] = {}
    n = gpu_count()
    info["gpu"] = "none"
    info["gpu count"] = n
    info["compute capability"] = "none"
    info["driver version"] = "unknown"
    info["cuda version (driver)"] = "unknown"
    if n:
        try:
            driver = lazy.cuda_driver()

            err, ver = driver.cuDriverGetVersion()
            if err == driver.CUresult.CUDA_SUCCESS:
                info["cuda version (driver)"] = f"{ver // 1000}.{(ver % 1000) // 10}"
            Device = lazy.cuda_core().Device

            names, caps = [], []
            for i in range(n):
                d = Device(i)
                cc = d.compute_capability
                names.append(d.name if n == 1 else f"{i}: {d.name}")
                caps.append(f"{cc[0]}.{cc[1]} (sm_{d.arch})" if n == 1 else f"{i}: {cc[0]}.{cc[1]} (sm_{d.arch})")
            info["gpu"] = "; ".join(names)
            info["compute capability"] = "; ".join(caps)
        except Exception as e:
            info["gpu"] = f"error: {e}"
            info["compute capability"] = "unknown (the GPU could not be queried)"
        try:
            system = lazy.cuda_core().system

            parts = system.get_kernel_mode_driver_version()
            info["driver version"] = ".".join(f"{x:02d}" if i else str(x) for i, x in enumerate(parts))
        except Exception:  # NVML missing: the CUDA version above still says what the driver supports
            info["driver version"] = "unknown (NVML not available)"
    else:
        why = _no_gpu_reason()
        info["gpu"] = f"NO GPU: {why}; kernels run on the CPU backend"
        info["compute capability"] = "none (no GPU; `anodize compile` targets sm_90 unless given --arch)"
        info["driver version"] = "none"
        info["cuda version (driver)"] = "none"
    info["cuda-python"] = _version("cuda-python")
    info["cuda-core"] = _version("cuda-core")
    ptxas, ptxas_version = ptxas_info()
    info["ptxas"] = ptxas or "not found (PTX is JIT-compiled by the driver)"
    info["ptxas version"] = ptxas_version or ("none" if ptxas is None else "unknown")
    info["nvjitlink"] = _nvjitlink()
    llvm_version, nvptx = _llvmlite()
    info["llvmlite"] = llvm_version
    info["nvptx target"] = nvptx
    info["numpy"] = _version("numpy")
    info["cache dir"] = str(cache_dir())
    return info

"""`anodize doctor`: what this machine offers anodize (GPU, driver, toolchain, cache).

Every probe is guarded: a missing driver or tool is reported, never raised.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from importlib import metadata
from typing import Any


def _ptxas() -> tuple[str | None, str | None]:
    path = shutil.which("ptxas")
    if path is None:
        for cand in ("/usr/local/cuda/bin/ptxas", "/usr/local/bin/ptxas"):
            if os.path.isfile(cand):
                path = cand
                break
    if path is None:
        return None, None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return path, None
    m = re.search(r"release ([\d.]+), V([\d.]+)", out)
    return path, (m.group(2) if m else out.strip().splitlines()[-1] if out.strip() else None)


def _nvjitlink() -> str:
    try:
        from cuda.bindings import nvjitlink

        major, minor = nvjitlink.version()
        return f"available ({major}.{minor})"
    except Exception as e:  # a missing library is an answer, not an error
        return f"not available ({type(e).__name__})"


def _llvmlite() -> tuple[str, str]:
    try:
        import llvmlite
        import llvmlite.binding as llvm

        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        llvm.Target.from_triple("nvptx64-nvidia-cuda")
        return llvmlite.__version__, "yes"
    except Exception as e:
        try:
            import llvmlite

            return llvmlite.__version__, f"no ({e})"
        except Exception:
            return "not installed", "no"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def doctor_info() -> dict[str, Any]:
    """A flat, printable report; values are strings, numbers or None."""
    from anodize.runtime.diskcache import cache_dir
    from anodize.runtime.probe import gpu_count

    info: dict[str, Any] = {}
    n = gpu_count()
    info["gpu"] = None
    info["gpu count"] = n
    info["compute capability"] = None
    info["driver version"] = None
    info["cuda version (driver)"] = None
    if n:
        try:
            from cuda.bindings import driver

            err, ver = driver.cuDriverGetVersion()
            if err == driver.CUresult.CUDA_SUCCESS:
                info["cuda version (driver)"] = f"{ver // 1000}.{(ver % 1000) // 10}"
            from cuda.core import Device

            d = Device(0)
            info["gpu"] = d.name
            cc = d.compute_capability
            info["compute capability"] = f"{cc[0]}.{cc[1]} (sm_{d.arch})"
        except Exception as e:
            info["gpu"] = f"error: {e}"
        try:
            from cuda.core import system

            parts = system.get_kernel_mode_driver_version()
            info["driver version"] = ".".join(f"{x:02d}" if i else str(x) for i, x in enumerate(parts))
        except Exception:  # NVML missing: the CUDA version above still says what the driver supports
            pass
    else:
        info["gpu"] = "none found (the CPU backend will be used)"
    info["cuda-python"] = _version("cuda-python")
    info["cuda-core"] = _version("cuda-core")
    ptxas, ptxas_version = _ptxas()
    info["ptxas"] = ptxas or "not found (PTX is JIT-compiled by the driver)"
    info["ptxas version"] = ptxas_version
    info["nvjitlink"] = _nvjitlink()
    llvm_version, nvptx = _llvmlite()
    info["llvmlite"] = llvm_version
    info["nvptx target"] = nvptx
    info["numpy"] = _version("numpy")
    info["cache dir"] = str(cache_dir())
    return info

"""Where the CUDA tools are, found without importing llvmlite's binding or cuda.bindings.

The persistent compile cache keys every entry on the toolchain (runtime/artifact_store.py),
and a cached load must stay light: this module uses only the standard library.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["find_ptxas", "driver_version"]


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

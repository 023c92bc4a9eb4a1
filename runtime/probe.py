"""Is there a usable CUDA GPU?  Answered without raising and without touching CUDA at import.

`cuda.bindings` is imported only inside `gpu_count()`, so `import anodize` never
loads the driver.  `ANODIZE_DEVICE=cpu` hides every GPU (useful for testing the
CPU backend on a GPU machine); `ANODIZE_DEVICE=debug` too, and makes the debug device the default.
"""

from __future__ import annotations

import os

from anodize.runtime import lazy

_count: int | None = None


def gpu_count() -> int:
    """The number of CUDA devices the driver reports; 0 when the driver or a GPU is missing."""
    global _count
    if os.environ.get("ANODIZE_DEVICE", "").strip().lower() in ("cpu", "debug"):
        return 0
    if _count is None:
        _count = _probe()
    return _count


def _probe() -> int:
    try:
        driver = lazy.cuda_driver()

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return 0
        err, n = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS:
            return 0
        return int(n)
    except Exception:  # no driver library, no cuda-python, a broken install: all mean "no GPU"
        return 0


def gpu_available() -> bool:
    """True when at least one CUDA GPU is usable; never raises."""
    try:
        return gpu_count() > 0
    except Exception:
        return False

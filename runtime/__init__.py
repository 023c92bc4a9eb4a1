"""The runtime: devices, buffers, launch configs, validated launches and fault reporting.

Nothing here imports CUDA at import time; `gpu_available()` probes the driver on
first use and never raises.
"""

from __future__ import annotations

from typing import Any

from anodize.runtime.probe import gpu_available, gpu_count

__all__ = ["gpu_available", "gpu_count", "doctor_info"]


def doctor_info() -> dict[str, Any]:
    """GPU, driver, CUDA, ptxas, nvJitLink, llvmlite/NVPTX and cache facts for `anodize doctor`."""
    from anodize.runtime.doctor import doctor_info as _info

    return _info()

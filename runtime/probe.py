"""Is there a usable CUDA GPU?  Answered without raising and without touching CUDA at import.

`cuda.bindings` is imported only inside `gpu_count()`, so `import anodize` never
loads the driver.  `ANODIZE_DEVICE=cpu` hides every GPU (useful for testing the
CPU backend on a GPU machine); `ANODIZE_DEVICE=debug` too, and makes the debug device the default.
"""

from __future__ import annotations

import os
import threading

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


def init_beside() -> bool:
    """The first `az.device(n)` starts the driver (cuInit, the first device count) while
    cuda.core imports on the helper thread, not before the import starts (runtime/device.py
    `cuda_device`).  On by default since an H100 measured it (session 15, bench/ship_bench.py
    first-result: a built vecadd's fresh process 0.908 s vs 1.015 s, 1.31x CuPy's RawKernel vs
    1.17x); `ANODIZE_INIT_BESIDE=0` starts the driver first, as before."""
    return os.environ.get("ANODIZE_INIT_BESIDE", "1").strip().lower() not in ("0", "off", "no", "false")


def known_count() -> int | None:
    """`gpu_count()` when it needs no driver call (the GPUs hidden, or the driver asked
    already), else None: nothing is started."""
    if os.environ.get("ANODIZE_DEVICE", "").strip().lower() in ("cpu", "debug"):
        return 0
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


def start_early() -> threading.Thread | None:
    """`ANODIZE_EARLY_INIT=1`: start the driver (cuInit) and GPU 0's primary context on a helper
    thread now, so that they run while the program imports NumPy and the rest of anodize
    instead of at its first `az.device(0)` (a built package's import calls this: anodize/built.py).
    The driver calls release the GIL; the first real use finds the context made (or waits for it:
    the driver serialises them), and reports any error itself.  Off by default: a process
    that starts CUDA cannot fork children that use it, and a process meant for another GPU
    would hold a context on GPU 0.  Returns the thread (None when off)."""
    if os.environ.get("ANODIZE_EARLY_INIT", "").strip().lower() not in ("1", "on", "yes", "true"):
        return None
    t = threading.Thread(target=_start_gpu0, name="anodize-early-init", daemon=True)
    t.start()
    return t


def _start_gpu0() -> None:
    try:
        if gpu_count() == 0:
            return
        driver = lazy.cuda_driver()
        err, dev = driver.cuDeviceGet(0)
        if err == driver.CUresult.CUDA_SUCCESS:
            driver.cuDevicePrimaryCtxRetain(dev)
    except Exception:  # noqa: BLE001 - the first real use reports what is wrong
        pass

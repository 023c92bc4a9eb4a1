"""The heavy dependencies the runtime loads on first use, each imported here and nowhere else.

`import anodize`, the CPU backend, a cached load and `anodize check` never import CUDA's
Python bindings, llvmlite's LLVM, the checker's engine or the typer: each is loaded by the
first call of its accessor below (an import of an already loaded module is a dictionary
lookup, and a test's stand-in module in `sys.modules` is what the next call returns).

    lazy.cuda_driver().cuCtxSynchronize()        # cuda.bindings.driver
    lazy.check_cu(result, "cuMemcpy")            # a driver call's result, or RuntimeError
    lazy.cuda_core().launch(...)                 # cuda.core
    lazy.checker().enforce_kernel(kernel)        # the checker, at the first compile
    lazy.codegen().compile_gpu(...)              # codegen's driver (llvmlite)
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType
from typing import Any

__all__ = ["asyncio", "cuda_driver", "cuda_nvrtc", "cuda_nvjitlink", "cuda_core", "cuda_device", "cuda_device_beside", "combinators", "copies", "check_cu", "torch", "llvmlite",
           "llvm_binding", "checker", "codegen", "codegen_cpu", "typer"]


def asyncio() -> Any:
    """`asyncio` (about 15 ms to import; only an awaited op needs it, and then it is loaded)."""
    import asyncio as module

    return module


_DRIVER: list[Any] = []


def cuda_driver() -> Any:
    """`cuda.bindings.driver` (imported once, then the module itself: the host path of a GPU
    submission asks for it a few dozen times)."""
    if _DRIVER:
        return _DRIVER[0]
    from cuda.bindings import driver

    _DRIVER.append(driver)
    return driver


def cuda_nvrtc() -> Any:
    """`cuda.bindings.nvrtc` (foreign CUDA C++ kernels)."""
    from cuda.bindings import nvrtc

    return nvrtc


def cuda_nvjitlink() -> Any:
    """`cuda.bindings.nvjitlink` (`anodize doctor`)."""
    from cuda.bindings import nvjitlink

    return nvjitlink


def cuda_core() -> Any:
    """`cuda.core`."""
    import cuda.core

    return cuda.core


def cuda_device() -> ModuleType:
    """runtime/cuda_device.py: the CUDA device (it imports cuda.core and cuda.bindings).

    cuda.core is imported with `ml_dtypes` hidden from it when nothing in the process has
    imported ml_dtypes yet: cuda.core loads it at import only for its own memory views of
    bf16 DLPack tensors, which anodize does not use, and it is most of cuda.core's import
    (ml_dtypes 0.7: about 0.7 s of CPU of 0.87 s on the development VM).  Hidden on the
    importing thread only; anodize's bf16 buffers import ml_dtypes themselves when used.
    A program that wants cuda.core's bf16 views imports ml_dtypes first (docs/deploy.md).
    The launch path's modules load with it (runtime/launch.py, runtime/prebuilt.py)."""
    loaded = sys.modules.get("anodize.runtime.cuda_device")
    if loaded is not None:
        return loaded
    hide = None
    if "ml_dtypes" not in sys.modules and "cuda.core" not in sys.modules:
        hide = _HiddenOnThread(frozenset({"ml_dtypes"}))
        sys.meta_path.insert(0, hide)
    try:
        # (with it the launch path, which a GPU program's first launch imports anyway: on the first
        # GPU's start these load on the helper thread while the context is made, `cuda_device_beside`)
        from anodize.runtime import cuda_device as module, launch as _launch, prebuilt as _prebuilt  # noqa: F401
    finally:
        if hide is not None:
            sys.meta_path.remove(hide)
    return module


class _HiddenOnThread:
    """A meta-path finder that makes `import NAME` fail for the names given, on the thread that
    made it only (other threads import them as usual)."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.thread = threading.get_ident()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if threading.get_ident() == self.thread and name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden while cuda.core loads)", name=name)
        return None


def cuda_device_beside(work: Any) -> ModuleType:
    """runtime/cuda_device.py, imported on a helper thread while `work()` runs here: the first
    GPU's context creation (a driver call that releases the GIL, about 250 ms on an H200) and
    cuda.core's import (about 220 ms) overlap, so a fresh process reaches its first launch
    sooner.  An exception of either is raised here, `work()`'s first."""
    if "anodize.runtime.cuda_device" in sys.modules:
        work()
        return cuda_device()
    got: list[Any] = []

    def load() -> None:
        try:
            got.append(cuda_device())
        except BaseException as e:  # raised below, on the caller's thread
            got.append(e)

    t = threading.Thread(target=load, name="anodize-import-cuda", daemon=True)
    t.start()
    try:
        work()
    finally:
        t.join()
    if isinstance(got[0], BaseException):
        raise got[0]
    return got[0]  # type: ignore[no-any-return]


def combinators() -> ModuleType:
    """runtime/combinators.py, which fills `Op`'s combinator slots (runtime/ops.py `Builders`)
    as it loads: loaded here by a program's first combinator when no module above loaded it."""
    from anodize.runtime import combinators as module

    return module


def copies() -> ModuleType:
    """runtime/copy_ops.py (and runtime/peer.py with it), which fill the copy slots of `Buffer`
    and `Device` (runtime/buffer.py `Fronts`) as they load: loaded here by a program's first
    copy between devices or lazy copy."""
    from anodize.runtime import copy_ops as module

    return module


def check_cu(result: Any, what: str) -> Any:
    """Unwrap a cuda.bindings `(CUresult, values...)` tuple; raise RuntimeError on an error."""
    err = result[0]
    driver = cuda_driver()
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        raise RuntimeError(
            f"CUDA error in {what}: {name.decode() if isinstance(name, bytes) else name}: "
            f"{text.decode() if isinstance(text, bytes) else text}"
        )
    return result[1] if len(result) == 2 else result[1:]


def torch() -> Any:
    """PyTorch (anodize/torch.py: kernels as torch.library custom ops)."""
    import torch as module

    return module


def llvmlite() -> Any:
    """`llvmlite`, the package's version module only (not LLVM itself)."""
    import llvmlite as module

    return module


def llvm_binding() -> Any:
    """`llvmlite.binding`: LLVM itself (a large shared library)."""
    import llvmlite.binding as module

    return module


def checker() -> ModuleType:
    """The checker's API (checker/api.py), loaded by the first compile."""
    from anodize.checker import api

    return api


def codegen() -> ModuleType:
    """Codegen's driver (codegen/driver.py; llvmlite with it)."""
    from anodize.codegen import driver

    return driver


def codegen_cpu() -> ModuleType:
    """The CPU backend as the runtime reads it (codegen/cpu/machine_code.py: the ISA, the host,
    and the cached machine code of a kernel loaded back into an engine)."""
    from anodize.codegen.cpu import machine_code

    return machine_code


def typer() -> ModuleType:
    """The language's typer (language/typer.py), for a kernel's typed model outside a compile."""
    from anodize.language import typer as module

    return module

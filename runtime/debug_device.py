"""The debug device: `az.device("debug")` runs kernels through an interpreter of the typed IR.

    dev = az.device("debug")       # buffers in host memory, like the CPU backend
    x = dev.to_device(a)
    kernel[cfg](x, ...)            # interpreted: breakpoint(), pdb, every access checked
    x.to_host()                    # a fault or a race is a KernelFault naming file:line

Its buffers are the CPU backend's (aligned host NumPy memory, `empty` poisoned); the
launch path is the CPU backend's too (the same argument, aliasing, `requires` and
dimension checks), but `compile_for_device` hands the kernel to `codegen/debug/run.py`
instead of LLVM.  `az.device("debug", n)` is a second debug device (own memory, own
faults), as `az.device("cpu", n)` is for the CPU backend.
"""

from __future__ import annotations

from anodize.language.errors import ArgumentError
from anodize.runtime.device import CpuDevice, DeviceLimits
from anodize.runtime.launch_checks import UNIVERSAL

__all__ = ["DebugDevice", "debug_device"]


class DebugDevice(CpuDevice):
    """Kernels interpreted in Python, one thread per GPU thread (see the module docstring)."""

    kind = "debug"

    def __init__(self, index: int = 0) -> None:
        super().__init__(index)
        self.name = "Python interpreter of the typed kernel IR"
        # the GPU's opt-in shared memory per block (launch_checks.UNIVERSAL): the interpreted IR
        # counts a tile kernel's shared tiles as static, which the GPU's lowering makes dynamic
        self.limits = DeviceLimits(max_shared_per_block=UNIVERSAL.max_shared_per_block)

    def describe(self) -> str:
        return f"debug:{self.index} ({self.name})" if self.index else f"debug ({self.name})"


_DEBUG: dict[int, DebugDevice] = {}


def debug_device(index: int = 0) -> DebugDevice:
    dev = _DEBUG.get(index)
    if dev is None:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ArgumentError(f"a debug device index is a non-negative int, got {index!r}")
        dev = _DEBUG[index] = DebugDevice(index)
    return dev

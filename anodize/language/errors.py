"""The exception hierarchy of LANGUAGE.md, shared by every backend."""

from __future__ import annotations

from anodize.language.diagnostics import CheckError

__all__ = [
    "CheckError",
    "LaunchError",
    "ContractViolation",
    "AliasingError",
    "ArgumentError",
    "KernelFault",
    "OutOfMemoryError",
    "USER_ERRORS",
]


class LaunchError(Exception):
    """A launch that anodize refuses before anything runs on the device."""

    def __init__(self, message: str, *, help: str | None = None):
        self.message = message
        self.help = help
        super().__init__(message + (f"\n  help: {help}" if help else ""))


class ContractViolation(LaunchError):
    """A launch that breaks the kernel's `@launch_contract` (rank, block, `requires`, capability)."""


class AliasingError(LaunchError):
    """An output buffer overlaps another argument of the same launch."""


class ArgumentError(LaunchError):
    """An argument of the wrong kind, dtype, rank, shape, layout or device."""


# The bytes of one kernel's fault record (its layout: codegen/artifact.py), whose first
# fault a KernelFault reports; here, not with the artifact, so that the runtime's fault arena
# needs no compiler module loaded to start (bench/startup.py)
FAULT_RECORD_BYTES = 32


class KernelFault(RuntimeError):
    """A fault the kernel recorded on the device (an out-of-bounds index, a witness of the
    wrong rank, a failed `assert`), raised at the next synchronisation point."""

    def __init__(self, kernel: str, path: str, line: int, kind: str, index: int, length: int, count: int = 1, message: str = ""):
        self.kernel = kernel
        self.path = path
        self.line = line
        self.kind = kind
        self.index = index
        self.length = length
        self.count = count
        self.message = message  # an `assert`'s message
        more = f" ({count} faults recorded; the first is shown)" if count > 1 else ""
        where = f"kernel `{kernel}` faulted at {path}:{line}"
        if kind in ("read", "write", "atomic"):
            text = f"{where}: {kind}: index {index} out of bounds for length {length}{more}"
        elif kind == "assert":
            text = f"{where}: assertion failed" + (f": {message}" if message else "") + more
        else:
            text = f"{where}: {kind}{more}"
        super().__init__(text)


# a clear error instead of a raw MemoryError / CUDA error
class OutOfMemoryError(MemoryError):
    """A buffer allocation the device cannot satisfy; nothing was allocated."""

    def __init__(self, nbytes: int, device: str, cause: str = ""):
        self.nbytes = nbytes
        self.device = device
        size = _human(nbytes)
        why = f" ({cause})" if cause else ""
        super().__init__(
            f"out of memory: cannot allocate {size} on {device}{why}\n"
            "  help: free buffers you no longer need (`del buf`), or split the work into smaller arrays"
        )


def _human(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"


# The errors a user reads: they print as `anodize.AliasingError: ...` (the name they are
# imported by), and the public entry points re-raise them without anodize-internal frames.
for _cls in (CheckError, LaunchError, ContractViolation, AliasingError, ArgumentError, KernelFault, OutOfMemoryError):
    _cls.__module__ = "anodize"
del _cls

USER_ERRORS = (CheckError, LaunchError, OutOfMemoryError)

"""CUDA C++ compiled at run time by NVRTC (cuda.bindings.nvrtc), for `az.foreign.cuda`.

One program per (source, name, arch, options), kept for the process: the kernel's cubin for
the GPU's architecture (`--gpu-architecture=sm_XY`, SASS, no PTX JIT at load) and its
lowered (mangled) name, which NVRTC resolves from the name expression, so a C++ kernel
needs no `extern "C"`.  A compile error is a LaunchError carrying NVRTC's log.

`compile_ltoir` compiles device code to LTO-IR (`-dlto`, relocatable) for a foreign device
function (`az.foreign.device_function(..., kind="cuda")`) and nvJitLink's probe
(runtime/foreign_link.py); its failures are `NvrtcFailure`s, which the caller locates.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from anodize.language.errors import LaunchError
from anodize.runtime import lazy

__all__ = ["compile_cuda", "compile_ltoir", "NvrtcFailure"]


def _ok(result: Any, what: str, prog: Any = None) -> Any:
    nvrtc = lazy.cuda_nvrtc()

    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = _log(prog) if prog is not None else ""
        raise LaunchError(f"NVRTC: {what} failed ({err.name}){':' + chr(10) + log if log else ''}",
                          help="fix the CUDA C++ source (the log above is NVRTC's)")
    return result[1] if len(result) == 2 else result[1:]


def _log(prog: Any) -> str:
    nvrtc = lazy.cuda_nvrtc()

    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return str(buf.decode(errors="replace")).rstrip("\x00 \n")


@lru_cache(maxsize=64)
def compile_cuda(source: str, name: str, arch: str, options: tuple[str, ...] = ()) -> tuple[str, bytes]:
    """(lowered entry name, cubin) of the `__global__` function `name` in `source` for `arch`."""
    try:
        nvrtc = lazy.cuda_nvrtc()
    except ImportError as e:  # pragma: no cover - cuda-python is a dependency
        raise LaunchError(f"CUDA C++ kernels need NVRTC from cuda-python: {e}") from None
    try:
        prog = _ok(nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []), "nvrtcCreateProgram")
    except RuntimeError as e:  # the NVRTC library itself is missing (cuda.pathfinder's DynamicLibNotFoundError)
        raise LaunchError(f"CUDA C++ kernels need the NVRTC library: {e}",
                          help="install it with `pip install nvidia-cuda-nvrtc-cu12` (or the CUDA toolkit)") from None
    try:
        _ok(nvrtc.nvrtcAddNameExpression(prog, name.encode()), "nvrtcAddNameExpression", prog)
        opts = [f"--gpu-architecture={arch}".encode(), b"-default-device", *(o.encode() for o in options)]
        _ok(nvrtc.nvrtcCompileProgram(prog, len(opts), opts), "compiling the CUDA C++ source", prog)
        lowered = _ok(nvrtc.nvrtcGetLoweredName(prog, name.encode()), "nvrtcGetLoweredName", prog)
        size = _ok(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize", prog)
        cubin = b" " * size
        _ok(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN", prog)
        entry = lowered.decode() if isinstance(lowered, bytes) else str(lowered)
        return entry, bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


class NvrtcFailure(Exception):
    """NVRTC refused: `log` is its log (or why it could not be loaded: `missing`)."""

    def __init__(self, log: str, *, missing: bool = False):
        super().__init__(log)
        self.log = log
        self.missing = missing


@lru_cache(maxsize=64)
def compile_ltoir(source: str, arch: str, options: tuple[str, ...] = ()) -> bytes:
    """The LTO-IR of the device code in `source` for `arch` (`-dlto -rdc=true`): what nvJitLink
    links with a kernel's PTX."""
    try:
        nvrtc = lazy.cuda_nvrtc()
        prog = _ok(nvrtc.nvrtcCreateProgram(source.encode(), b"function.cu", 0, [], []), "nvrtcCreateProgram")
    except (ImportError, RuntimeError) as e:  # no cuda-python, or cuda.pathfinder found no NVRTC library
        raise NvrtcFailure(f"NVRTC: {e}", missing=True) from None
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"-dlto", b"--relocatable-device-code=true", *(o.encode() for o in options)]
        try:
            _ok(nvrtc.nvrtcCompileProgram(prog, len(opts), opts), "compiling the CUDA C++ source", prog)
            size = _ok(nvrtc.nvrtcGetLTOIRSize(prog), "nvrtcGetLTOIRSize", prog)
            data = b" " * size
            _ok(nvrtc.nvrtcGetLTOIR(prog, data), "nvrtcGetLTOIR", prog)
        except LaunchError as e:
            raise NvrtcFailure(e.message) from None
        return bytes(data)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)

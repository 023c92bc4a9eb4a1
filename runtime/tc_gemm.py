"""Load and launch the standalone tensor-core GEMM kernel (codegen/tensorcore/gemm.py) through the CUDA
driver: for its tests and benchmark, and as the launch path the tile model can reuse.

`TcGemm(cfg)` generates the kernel, assembles it with ptxas when ptxas is installed (else the
driver compiles the PTX), raises the block's dynamic shared-memory limit, and launches it on raw
device pointers: `gemm(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, stream=0)`.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

from cuda.bindings import driver

from anodize.codegen.tensorcore.gemm import GemmConfig, gemm_ptx
from anodize.codegen.tensorcore.wgmma import WgmmaConfig, wgmma_ptx
from anodize.codegen.gpu.ptx import run_ptxas
from anodize.codegen.toolchain import find_ptxas

_OK = driver.CUresult.CUDA_SUCCESS


def _check(result: Any, what: str) -> Any:
    err = result[0] if isinstance(result, tuple) else result
    if err != _OK:
        _, name = driver.cuGetErrorName(err)
        raise RuntimeError(f"CUDA error in {what}: {name}")
    if isinstance(result, tuple):
        return result[1] if len(result) == 2 else result[1:]
    return None


def ensure_context(device: int = 0) -> Any:
    """Make the device's primary context current (the one PyTorch and cuda.core use too)."""
    _check(driver.cuInit(0), "cuInit")
    dev = _check(driver.cuDeviceGet(device), "cuDeviceGet")
    ctx = _check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    _check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


class TcGemm:
    """One compiled GEMM kernel; `timings` holds the generate / ptxas / load milliseconds."""

    def __init__(self, cfg: GemmConfig | WgmmaConfig, *, aligned: bool | None = None, arch: str = "sm_90", name: str = "tc_gemm", opt: int = 3):
        ensure_context()
        self.cfg = cfg
        t0 = time.perf_counter()
        if isinstance(cfg, WgmmaConfig):  # wgmma needs the architecture-specific target
            arch = "sm_90a"
            self.ptx = wgmma_ptx(cfg, name=name, arch=arch, aligned=aligned, opt=opt)
        else:
            self.ptx = gemm_ptx(cfg, name=name, arch=arch, aligned=aligned, opt=opt)
        t1 = time.perf_counter()
        self.resources = None
        if find_ptxas() is not None:
            image, self.resources = run_ptxas(self.ptx, arch)
        else:
            image = self.ptx.encode() + b"\0"
        t2 = time.perf_counter()
        self._image = image
        self.module = _check(driver.cuModuleLoadData(image), "cuModuleLoadData")
        self.fn = _check(driver.cuModuleGetFunction(self.module, name.encode()), "cuModuleGetFunction")
        self.smem = cfg.smem_bytes()
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _check(driver.cuFuncSetAttribute(self.fn, attr, self.smem), "cuFuncSetAttribute")
        t3 = time.perf_counter()
        self.timings = {"generate_ms": 1e3 * (t1 - t0), "ptxas_ms": 1e3 * (t2 - t1), "load_ms": 1e3 * (t3 - t2)}

    def grid(self, M: int, N: int) -> int:
        c = self.cfg
        return -(-M // c.tile_m) * -(-N // c.tile_n)

    def __call__(self, a: int, b: int, c: int, M: int, N: int, K: int, lda: int, ldb: int, ldc: int, stream: int = 0) -> None:
        vals = [ctypes.c_uint64(a), ctypes.c_uint64(b), ctypes.c_uint64(c)] + [ctypes.c_int32(v) for v in (M, N, K, lda, ldb, ldc)]
        arr = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        grid = self.grid(M, N)
        if grid == 0:
            return
        _check(
            driver.cuLaunchKernel(self.fn, grid, 1, 1, self.cfg.threads, 1, 1, self.smem, driver.CUstream(stream), ctypes.addressof(arr), 0),
            "cuLaunchKernel",
        )


class DeviceArray:
    """A plain cuMemAlloc buffer with host copies, for tests that need no framework."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.ptr = int(_check(driver.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))

    @classmethod
    def from_host(cls, host: Any) -> "DeviceArray":
        d = cls(host.nbytes)
        _check(driver.cuMemcpyHtoD(d.ptr, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
        return d

    def to_host(self, out: Any) -> Any:
        _check(driver.cuCtxSynchronize(), "a tc_gemm launch")
        _check(driver.cuMemcpyDtoH(out.ctypes.data, self.ptr, out.nbytes), "cuMemcpyDtoH")
        return out

    def fill_bytes(self, value: int) -> None:
        _check(driver.cuMemsetD8(self.ptr, value, self.nbytes), "cuMemsetD8")

    def free(self) -> None:
        if self.ptr:
            _check(driver.cuMemFree(self.ptr), "cuMemFree")
            self.ptr = 0

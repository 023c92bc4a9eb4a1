"""The peers anodize is measured against, each doing the same work in one kernel.

CuPy (ufuncs, ElementwiseKernel, RawKernel for the stencil), PyTorch (out= ops,
conv2d for the stencil) and Triton (hand-written kernels).  numba-cuda runs in a
subprocess of its own (bench/numba_peer.py) because it needs an older NumPy.
Every peer is imported lazily; a missing one yields no row, never a failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Runner = Callable[[], None]

STENCIL_CU = r"""
extern "C" __global__ void stencil(const float* __restrict__ u, float* __restrict__ out, long rows, long cols) {
    long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long r = blockIdx.y * (long)blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    long k = r * cols + c;
    if (r > 0 && r < rows - 1 && c > 0 && c < cols - 1)
        out[k] = 0.2f * (u[k] + u[k - cols] + u[k + cols] + u[k - 1] + u[k + 1]);
    else
        out[k] = u[k];
}
extern "C" __global__ void empty() {}
extern "C" __global__ void four(const float* a, const float* b, float* c, long n) {}
"""


def cupy_peers(a: Any, b: Any, alpha: float, u2d: Any) -> dict[str, dict[str, Runner]]:
    import cupy as cp

    c = cp.empty_like(a)
    out2d = cp.empty_like(u2d)
    saxpy = cp.ElementwiseKernel("float32 alpha, float32 x, float32 y", "float32 z", "z = alpha * x + y", "az_saxpy")
    mod = cp.RawModule(code=STENCIL_CU)
    st = mod.get_function("stencil")
    rows, cols = u2d.shape
    grid = ((cols + 31) // 32, (rows + 7) // 8)
    return {
        "copy": {"CuPy copyto": lambda: cp.copyto(c, a)},
        "vecadd": {"CuPy add": lambda: cp.add(a, b, out=c)},
        "saxpy": {"CuPy ElementwiseKernel": lambda: saxpy(cp.float32(alpha), a, b, c)},
        "stencil2d": {
            "CuPy RawKernel (NVRTC C++)": lambda: st(grid, (32, 8), (u2d, out2d, cp.int64(rows), cp.int64(cols)))
        },
    }


def torch_peers(a: Any, b: Any, alpha: float, u2d: Any) -> dict[str, dict[str, Runner]]:
    import torch
    import torch.nn.functional as F

    c = torch.empty_like(a)
    w = torch.tensor([[0, 0.2, 0], [0.2, 0.2, 0.2], [0, 0.2, 0]], device=a.device, dtype=a.dtype).view(1, 1, 3, 3)
    u4 = u2d.view(1, 1, *u2d.shape)
    out4 = torch.empty_like(u4)
    return {
        "copy": {"PyTorch copy_": lambda: c.copy_(a)},
        "vecadd": {"PyTorch add(out=)": lambda: torch.add(a, b, out=c)},
        "saxpy": {"PyTorch add(alpha=, out=)": lambda: torch.add(b, a, alpha=alpha, out=c)},
        # conv2d pads with zeros, so its border differs; it moves the same bytes.
        "stencil2d": {"PyTorch conv2d (3x3)": lambda: out4.copy_(F.conv2d(u4, w, padding=1))},
    }


def triton_peers(a: Any, b: Any, alpha: float, u2d: Any) -> dict[str, dict[str, Runner]]:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_k(x, y, z, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(z + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    @triton.jit
    def saxpy_k(alpha, x, y, z, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(z + offs, alpha * tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    @triton.jit
    def copy_k(x, z, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(z + offs, tl.load(x + offs, mask=m), mask=m)

    @triton.jit
    def stencil_k(u, out, rows, cols, BLOCK: tl.constexpr):
        r = tl.program_id(1)
        c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inb = c < cols
        k = r * cols + c
        center = tl.load(u + k, mask=inb)
        interior = (r > 0) & (r < rows - 1) & (c > 0) & (c < cols - 1)
        up = tl.load(u + k - cols, mask=inb & interior, other=0.0)
        dn = tl.load(u + k + cols, mask=inb & interior, other=0.0)
        lf = tl.load(u + k - 1, mask=inb & interior, other=0.0)
        rt = tl.load(u + k + 1, mask=inb & interior, other=0.0)
        v = tl.where(interior, 0.2 * (center + up + dn + lf + rt), center)
        tl.store(out + k, v, mask=inb)

    n = a.numel()
    c = torch.empty_like(a)
    out2d = torch.empty_like(u2d)
    rows, cols = u2d.shape
    B = 1024
    g = (triton.cdiv(n, B),)
    return {
        "copy": {"Triton": lambda: copy_k[g](a, c, n, BLOCK=B)},
        "vecadd": {"Triton": lambda: add_k[g](a, b, c, n, BLOCK=B)},
        "saxpy": {"Triton": lambda: saxpy_k[g](alpha, a, b, c, n, BLOCK=B)},
        "stencil2d": {"Triton": lambda: stencil_k[(triton.cdiv(cols, B), rows)](u2d, out2d, rows, cols, BLOCK=B)},
    }

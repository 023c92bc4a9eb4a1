"""Kernels the async tests run (valid anodize source: the checker and codegen read this file)."""

from __future__ import annotations

from anodize import DisjointSlice, Slice, f32, i32, kernel, launch_contract, thread, tile, tile_kernel


@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + b[i]


@launch_contract(domain=1, block=256, requires=lambda x, out: len(x) == len(out))
@kernel
def affine(x: Slice[f32], out: DisjointSlice[f32], k: f32, d: f32) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * k + d


@launch_contract(domain=1, block=128, requires=lambda a, c: len(a) == len(c))
@kernel
def shift_read(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i.get() + 1]  # the last thread reads one past the end: a KernelFault


@launch_contract(domain=1, block=256, requires=lambda x, out: len(x) == len(out))
@kernel
def spin(x: Slice[f32], out: DisjointSlice[f32], iters: i32) -> None:
    for i in thread.grid_stride(out):
        v = x[i]
        k = 0
        while k < iters:
            v = v * 0.999 + 0.001
            k += 1
        out[i] = v


# ---- issue 32: contracts that declare their outputs (`k[cfg].call(...)`) ------------------


@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c),
                 outputs=lambda a, b: {"c": ((len(a),), f32)})
@kernel
def vecadd_out(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + b[i]


@launch_contract(domain=1, block=256, requires=lambda lo, x, hi: len(lo) == len(x) and len(hi) == len(x),
                 outputs=lambda x, k: {"lo": ((len(x),), f32), "hi": ((len(x),), f32)})
@kernel
def split(lo: DisjointSlice[f32], x: Slice[f32], hi: DisjointSlice[f32], k: f32) -> None:
    i = thread.index_1d()
    if i in lo:
        lo[i] = x[i] - k
        hi[i] = x[i] + k


@launch_contract(domain=1, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c),
                 outputs=lambda a, b: {"c": ((len(a),), f32)})
@tile_kernel(num_warps=4)
def tile_add_out(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    pid = tile.program_id_1d()
    tile.store(c, pid, tile.load(a, pid, 512) + tile.load(b, pid, 512))

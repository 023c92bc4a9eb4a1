"""Kernels the async tests run (valid anodize source: the checker and codegen read this file)."""

from __future__ import annotations

from anodize import DisjointSlice, Slice, f32, i32, kernel, launch_contract, thread


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

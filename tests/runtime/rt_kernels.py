"""Kernels the runtime tests launch (valid anodize source: the checker and codegen read it)."""

from __future__ import annotations

from anodize import (
    AtomicSlice,
    DisjointSlice,
    DisjointSlice2D,
    Slice,
    Slice2D,
    f32,
    i32,
    i64,
    kernel,
    launch_contract,
    thread,
)


@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + b[i]


@launch_contract(domain=1, block=128, requires=lambda a, c: len(a) == len(c))
@kernel
def shift_read(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i.get() + 1]  # the last thread reads one past the end: a KernelFault


@launch_contract(domain=1, block=64, requires=lambda out, value, rows, cols: rows * cols == len(out))
@kernel
def fill(out: DisjointSlice[i32], value: i32, rows: i64, cols: i64) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = value


@launch_contract(domain=2, block=(16, 16), requires=lambda m, out: m.shape[0] == out.shape[0] and m.shape[1] == out.shape[1])
@kernel
def scale2d(m: Slice2D[f32], out: DisjointSlice2D[f32], k: f32) -> None:
    ij = thread.index_2d()
    if ij in out:
        out[ij] = m[ij.row, ij.col] * k


@launch_contract(domain=1, block=256)
@kernel
def histogram(x: Slice[i32], h: AtomicSlice[i32]) -> None:
    i = thread.index_1d()
    if i.get() < len(x):
        h.add(x[i], 1)


@launch_contract(domain=1, block=32, min_compute_capability=(99, 0))
@kernel
def future_only(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = 1.0


@kernel
def copy_nc(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i]


@launch_contract(domain=1, block=256)
@kernel
def empty(x: Slice[f32]) -> None:
    pass

"""Kernels for the launch-dimension and shared-memory bounds tests (the compiler reads their source)."""

from __future__ import annotations

import anodize as az
from anodize import DisjointSlice, DisjointSlice2D, Slice, Slice2D, f32, i32, kernel, launch_contract, thread


@kernel
def copy_nc(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """No contract: `index_1d` checks on the device that grid and block y and z are 1."""
    i = thread.index_1d()
    if i in c and i in a:
        c[i] = a[i]


@kernel
def copy2d_nc(m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    """No contract: `index_2d` checks on the device that grid and block z are 1."""
    ij = thread.index_2d()
    if ij in out and ij in m:
        out[ij] = m[ij.row, ij.col]


@kernel
def copy_gs_nc(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """No contract, an elementwise grid-stride loop (vectorised on the GPU)."""
    for i in thread.grid_stride(c):
        c[i] = a[i]


@launch_contract(domain=1, block=64)
@kernel
def copy_contracted(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """A contract: the runtime checks the launch, no device check is emitted."""
    i = thread.index_1d()
    if i in c and i in a:
        c[i] = a[i]


@launch_contract(domain=1, block=64)
@kernel
def dyn_copy(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    """Stages `x` through dynamic shared memory: needs `shared_mem >= 64 * 4`."""
    i = thread.index_1d()
    with az.unsafe():
        dyn = az.shared.array(0, f32)
        t = thread.tid_x()
        dyn[t] = x[i] if i.get() < len(x) else f32(0.0)
        az.syncthreads()
        if i in out:
            out[i] = dyn[t]


@launch_contract(domain=1, block=64)
@kernel
def static_oob(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    """A static array of 32 elements indexed by a 64-thread block's thread id."""
    i = thread.index_1d()
    with az.unsafe():
        buf = az.shared.array(32, f32)
        t = thread.tid_x()
        buf[t] = x[i] if i.get() < len(x) else f32(0.0)
        az.syncthreads()
        if i in out:
            out[i] = buf[t]


@launch_contract(domain=1, block=64)
@kernel
def static_proven(out: DisjointSlice[i32]) -> None:
    """An index proven in range: no check."""
    i = thread.index_1d()
    with az.unsafe():
        buf = az.shared.array(64, i32)
        t = thread.tid_x()
        if t < 64:
            buf[t] = t
        az.syncthreads()
        if i in out and t < 64:
            out[i] = buf[t]

"""Kernels for the launch-dimension and shared-memory tests (valid anodize source)."""

from __future__ import annotations

import anodize as az
from anodize import DisjointSlice, DisjointSlice2D, Slice, Slice2D, f32, kernel, launch_contract, thread


@kernel
def copy2d_nc(m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    if ij in out and ij in m:
        out[ij] = m[ij.row, ij.col]


@launch_contract(domain=1)
@kernel
def copy_any_block(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c and i in a:
        c[i] = a[i]


@launch_contract(domain=2)
@kernel
def copy2d_any_block(m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    if ij in out and ij in m:
        out[ij] = m[ij.row, ij.col]


@launch_contract(domain=1, block=64)
@kernel
def dyn_copy(x: Slice[f32], out: DisjointSlice[f32]) -> None:
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
    i = thread.index_1d()
    with az.unsafe():
        buf = az.shared.array(32, f32)
        t = thread.tid_x()
        buf[t] = x[i] if i.get() < len(x) else f32(0.0)
        az.syncthreads()
        if i in out:
            out[i] = buf[t]

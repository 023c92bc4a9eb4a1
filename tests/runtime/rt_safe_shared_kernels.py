"""Kernels of tests/runtime/test_safe_shared.py (safe shared memory, no `unsafe`)."""

import anodize as az
from anodize import AtomicSlice, DisjointSlice, DisjointSlice2D, DisjointSlice3D, Slice, f32, f64, i32, kernel, launch_contract, thread, u32


@launch_contract(domain=1, block=64)
@kernel
def too_small(c: DisjointSlice[f32]) -> None:
    # 32 slots for a block of 64: threads 32..63 fault (their write touches nothing)
    i = thread.index_1d()
    s = az.shared.array(32, f32)
    w = thread.index_in_block()
    s[w] = 1.0
    az.syncthreads()
    if i in c:
        c[i] = s[w.get() % 32]


@launch_contract(domain=3)
@kernel
def tile_3d(c: DisjointSlice3D[f32]) -> None:
    # no literal block: the device checks block z = 1 for index_in_block_2d
    ijk = thread.index_3d()
    w = thread.index_in_block_2d()
    t = az.shared.array((32, 32), f32)
    t[w] = f32(w.row * 32 + w.col)
    az.syncthreads()
    if ijk in c:
        c[ijk] = t[w]


@launch_contract(domain=2, block=(8, 4))
@kernel
def linear_2d(c: DisjointSlice2D[i32]) -> None:
    # index_in_block() in a 2-D block is x + 8 * y
    ij = thread.index_2d()
    w = thread.index_in_block()
    s = az.shared.array(32, i32)
    s[w] = i32(w.get())
    az.syncthreads()
    v = s[31 - w.get()]
    if ij in c:
        c[ij] = v


@launch_contract(domain=1, block=128)
@kernel
def shared_atomics(x: Slice[i32], out: AtomicSlice[i32], fout: AtomicSlice[f64]) -> None:
    h = az.shared.atomic_array(4, i32)
    fh = az.shared.atomic_array((2, 2), f64)
    w = thread.index_in_block()
    if w.get() < 4:
        h.store(w, 0)
        fh.store((w.get() // 2, w.get() % 2), 0.0)
    az.syncthreads()
    for j in thread.grid_stride(x):
        v = x[j]
        h.add(0, v)
        h.max(1, v)
        h.min(2, v, order="acq_rel")
        h.or_(3, v, scope="device")
        fh.add((v % 2, 0), f64(v))
    az.syncthreads()
    if w.get() < 4:
        got = h.load(w)
        if w.get() == 0:
            out.add(0, got)
        elif w.get() == 1:
            out.max(1, got)
        elif w.get() == 2:
            out.min(2, got)
        else:
            out.or_(3, got)
        fout.add(w, fh.load((w.get() // 2, w.get() % 2)))

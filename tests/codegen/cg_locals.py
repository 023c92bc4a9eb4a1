"""Kernels of tests/codegen/test_local_values.py: local arrays, tuple returns, unpacking."""

from __future__ import annotations

import anodize as az
from anodize import (
    DisjointSlice,
    DisjointSlice2D,
    LocalArray,
    Slice,
    Slice2D,
    bool_,
    f16,
    f32,
    f64,
    i32,
    i64,
    kernel,
    launch_contract,
    thread,
    u8,
)

TM = 4
TN = 4


@az.func
def outer(acc: LocalArray[f32], a: Slice2D[f32], b: Slice2D[f32], r0: i64, c0: i64, k: i64) -> None:
    ra = az.local.array(TM, f32)
    for ii in range(TM):
        ra[ii] = a[r0 + ii, k]
    for jj in range(TN):
        bv = b[k, c0 + jj]
        for i2 in range(TM):  # (a second name: one bound once keeps its range facts)
            acc[i2, jj] += ra[i2] * bv


@launch_contract(domain=2, block=(8, 8), requires=lambda a, b, c: a.shape[1] == b.shape[0])
@kernel
def sgemm_rb(a: Slice2D[f32], b: Slice2D[f32], c: DisjointSlice2D[f32]) -> None:
    w = thread.index_2d()
    acc = az.local.array((TM, TN), f32)
    r0 = w.row * TM
    c0 = w.col * TN
    if r0 + TM <= a.shape[0] and c0 + TN <= b.shape[1] and c.shape[0] == a.shape[0] and c.shape[1] == b.shape[1]:
        for k in range(a.shape[1]):
            outer(acc, a, b, r0, c0, k)
        with az.unsafe():
            for ii in range(TM):
                for jj in range(TN):
                    c.write_unchecked((r0 + ii, c0 + jj), acc[ii, jj])


@az.func
def outer_checked(acc: LocalArray[f32], a: Slice2D[f32], b: Slice2D[f32], r0: i64, c0: i64, k: i64) -> None:
    """`outer` with one loop variable bound twice: the typer proves nothing about `ii`, so its
    accesses keep their bounds checks until LLVM unrolls the loops and folds them."""
    ra = az.local.array(TM, f32)
    for ii in range(TM):
        ra[ii] = a[r0 + ii, k]
    for jj in range(TN):
        bv = b[k, c0 + jj]
        for ii in range(TM):
            acc[ii, jj] += ra[ii] * bv


@launch_contract(domain=2, block=(8, 8), requires=lambda a, b, c: a.shape[1] == b.shape[0])
@kernel
def sgemm_rb_checked(a: Slice2D[f32], b: Slice2D[f32], c: DisjointSlice2D[f32]) -> None:
    w = thread.index_2d()
    acc = az.local.array((TM, TN), f32)
    r0 = w.row * TM
    c0 = w.col * TN
    if r0 + TM <= a.shape[0] and c0 + TN <= b.shape[1] and c.shape[0] == a.shape[0] and c.shape[1] == b.shape[1]:
        for k in range(a.shape[1]):
            outer_checked(acc, a, b, r0, c0, k)
        with az.unsafe():
            for ii in range(TM):
                for jj in range(TN):
                    c.write_unchecked((r0 + ii, c0 + jj), acc[ii, jj])


@az.func
def stats(x: f32) -> tuple[f32, i32, bool_]:
    if x < 0.0:
        return -x, i32(-1), True
    return x, i32(1), False


@az.func
def nothing_back(x: f32) -> tuple[f32, i32]:
    if x > 100.0:
        return x, i32(7)  # otherwise falls off the end: a zeroed tuple


@launch_contract(domain=1, block=32, requires=lambda a, c: len(a) == len(c))
@kernel
def tuples(a: Slice[f32], c: DisjointSlice[f64]) -> None:
    i = thread.index_1d()
    if i in c:
        s: i64 = 0
        mag, s, neg = stats(a[i])  # i32 into an existing i64 local
        m2, k2 = nothing_back(a[i])
        h = az.local.array(2, f16)
        flags = az.local.array(3, bool_)
        small = az.local.array(1, u8)
        h[0] = f16(mag)
        flags[2] = neg
        small[0] = 250
        small[0] += 10  # wraps, as u8 does
        x, y = f64(h[0]), f64(s)
        x, y = y, x
        c[i] = x * 1000.0 + y + (0.5 if flags[2] else 0.0) + f64(small[0]) * 10000.0 + f64(m2) + f64(k2)


@launch_contract(domain=1, block=32, requires=lambda k, c: len(k) == len(c))
@kernel
def fault2d(k: Slice[i64], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        t = az.local.array((3, 5), f32)
        for r in range(3):
            for q in range(5):
                t[r, q] = f32(r * 10 + q)
        c[i] = t[k[i], 4]


@launch_contract(domain=1, block=32, requires=lambda c: len(c) > 0)
@kernel
def rezero(c: DisjointSlice[i64]) -> None:
    """A declaration inside a loop is a fresh, zeroed array on every iteration; `break` and
    `continue` inside unrolled loops keep their meaning."""
    i = thread.index_1d()
    if i in c:
        total: i64 = 0
        for r in range(3):
            t = az.local.array(2, i64)
            t[0] += r + 1
            total += t[0]
        acc = az.local.array(8, i64)
        for q in range(8):
            if q == 2:
                continue
            if q == 6:
                break
            acc[q] = q
        for q in range(8):
            total += acc[q] * 100
        c[i] = total + i.get() * 0


@az.func
def pair_sum(t: LocalArray[f32]) -> f32:
    return t[0] + t[1]


@launch_contract(domain=1, block=32, requires=lambda a, c: len(a) == len(c))
@kernel
def branch_decl(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """An array declared in a branch not taken reads as zeros (as Python would raise, the
    compiler's entry-block storage is zeroed instead; every backend agrees)."""
    i = thread.index_1d()
    if i.get() % 2 == 0:
        t = az.local.array(2, f32)
        t[0] = 5.0
    if i in c:
        c[i] = pair_sum(t) + a[i]

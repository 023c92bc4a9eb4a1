"""Kernels the codegen tests compile (they must live in a file: the compiler reads source)."""

from __future__ import annotations

import math

import numpy as np

import anodize as az
from anodize import (
    AtomicSlice,
    DisjointSlice,
    DisjointSlice2D,
    Slice,
    Slice2D,
    f32,
    f64,
    i32,
    i64,
    kernel,
    launch_contract,
    thread,
    u32,
    u64,
)

BLOCK = 128


@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + b[i]


@launch_contract(domain=1, block=256)
@kernel
def vecadd_noreq(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + b[i]


@kernel
def vecadd_unguarded(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    c[i] = a[i] + b[i]


@launch_contract(domain=1, block=BLOCK, requires=lambda x, y, out: len(x) == len(out) and len(y) == len(out))
@kernel
def saxpy(alpha: f32, x: Slice[f32], y: Slice[f32], out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = alpha * x[i] + y[i]


@launch_contract(
    domain=2,
    block=(16, 8),
    requires=lambda m, out: m.shape[0] == out.shape[0] and m.shape[1] == out.shape[1],
)
@kernel
def scale2d(m: Slice2D[f64], s: f64, out: DisjointSlice2D[f64]) -> None:
    ij = thread.index_2d()
    if ij in out:
        out[ij] = m[ij] * s + f64(ij.row) * 1000.0 + f64(ij.col)


@launch_contract(domain=1, block=64)
@kernel
def control(x: Slice[i32], out: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in out:
        v = x[i]
        r = 0
        if v < 0:
            r = -1
        elif v == 0:
            r = 100
        elif v < 10:
            r = 10
        else:
            r = 1000
        k = 0
        while k < 5:
            k += 1
            if k == 3:
                continue
            r += k
        for j in range(10):
            if j == 7:
                break
            if j % 2 == 1:
                continue
            r += j
        for j in range(10, 0, -3):
            r = r * 2 + j
        out[i] = r + (1 if v > 5 and v < 50 else 2) + (3 if not v else 0) + (4 if -5 < v <= 7 else 0)


@launch_contract(domain=1, block=32)
@kernel
def int_ops(a: Slice[i32], b: Slice[i32], fl: DisjointSlice[i32], md: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in fl:
        fl[i] = a[i] // b[i]
    if i in md:
        md[i] = a[i] % b[i]


@launch_contract(domain=1, block=32)
@kernel
def wrap_ops(a: Slice[u32], b: Slice[i64], o32: DisjointSlice[u32], o64: DisjointSlice[u64], s: DisjointSlice[i64]) -> None:
    i = thread.index_1d()
    if i in o32:
        o32[i] = a[i] * u32(3) + u32(7) - (a[i] << 3)
        o64[i] = u64(a[i]) * u64(0xFFFFFFFF)
        s[i] = (b[i] << 70) + (b[i] >> 65) + (b[i] >> 2)


@launch_contract(domain=1, block=32)
@kernel
def casts(x: Slice[f32], oi: DisjointSlice[i32], ou: DisjointSlice[u32], of: DisjointSlice[f64], ob: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in oi:
        oi[i] = i32(x[i])
        ou[i] = u32(x[i])
        of[i] = f64(x[i]) / 3.0
        ob[i] = i32(bool(x[i])) + i32(2.7) + i32(-2.7)


@launch_contract(domain=1, block=32)
@kernel
def math32(x: Slice[f32], y: Slice[f32], o: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in o:
        v = x[i]
        w = y[i]
        o[i] = (
            math.sqrt(v) + az.math.exp(v) + math.log(v) + math.sin(v) * math.cos(w) + math.tanh(v - w)
            + az.math.pow(v, w) + az.math.rsqrt(v) + math.fabs(v - w) + math.floor(v * 3.0) + math.ceil(w * 3.0)
            + az.math.fma(v, w, 1.0) + az.math.fmin(v, w) * 2.0 + az.math.fmax(v, w) * 3.0
        )


@launch_contract(domain=1, block=32)
@kernel
def math64(x: Slice[f64], o: DisjointSlice[f64]) -> None:
    i = thread.index_1d()
    if i in o:
        v = x[i]
        o[i] = math.exp(v) + math.log(v) + math.sqrt(v) + math.tanh(v) + abs(v - 1.0) + min(v, 0.5) + max(v, 0.5, 0.25)


@az.func
def clamp01(v: f32) -> f32:
    if v < 0.0:
        return 0.0
    if v > 1.0:
        return 1.0
    return v


@az.func
def read_twice(a: Slice[f32], i: az.Index1D) -> f32:
    return a[i] + a[i]


@launch_contract(domain=1, block=32, requires=lambda a, o: len(a) == len(o))
@kernel
def helpers(a: Slice[f32], o: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = clamp01(a[i] * 2.0 - 0.5) + read_twice(a, i)


@launch_contract(domain=1, block=64)
@kernel
def histogram(x: Slice[i32], h: AtomicSlice[u32], total: AtomicSlice[f32]) -> None:
    for i in thread.grid_stride(x):
        h.add(x[i], u32(1))
        total.add(0, 1.5)


@launch_contract(domain=1, block=64)
@kernel
def grid_stride_copy(x: Slice[f32], y: DisjointSlice[f32]) -> None:
    for i in thread.grid_stride(y):
        y[i] = x[i] * 2.0


@kernel
def oob_read(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i + 3]


@kernel
def div_zero(a: Slice[i32], b: Slice[i32], c: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] // b[i]


@launch_contract(domain=1, block=128)
@kernel
def block_reduce(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        buf = az.shared.array(128, f32)
        t = thread.tid_x()
        buf[t] = x[i] if i in out else 0.0
        az.syncthreads()
        s = 64
        while s > 0:
            if t < s:
                buf[t] += buf[t + s]
            az.syncthreads()
            s //= 2
        v = buf[0]
        v += az.warp.shfl_down(v, 16)
        v += az.warp.shfl_xor(v, 1)
        d = az.warp.shfl_idx(f64(v), 0) + f64(az.warp.shfl_up(t, 1))
        b = az.warp.ballot(d > 0.0)
        if t == 0 and az.warp.any(b != 0):
            out.write_unchecked(thread.block_idx_x(), v)


@kernel
def atomics_misc(x: Slice[i32], lo: AtomicSlice[i32], hi: AtomicSlice[u64], last: AtomicSlice[f32], old: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in old:
        v = x[i]
        old[i] = lo.min(0, v)
        hi.max(0, u64(v + 1000))
        last.exchange(i % 4, f32(v))


@kernel
def unchecked_writes(x: Slice[f32], y: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        y.write_unchecked(len(y) - 1 - i.get(), x[i])


@kernel
def read2d(m: Slice2D[f32], r: i64, c: i64, out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i not in out:
        return
    out[i] = m[r, c + i]


@kernel
def float_divmod(a: Slice[f64], b: Slice[f64], q: DisjointSlice[f64], m: DisjointSlice[f64]) -> None:
    i = thread.index_1d()
    if i in q and i in m:
        q[i] = a[i] // b[i]
        m[i] = a[i] % b[i]


@kernel
def bools(p: Slice[az.bool_], flag: az.bool_, out: DisjointSlice[az.bool_], n: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = p[i] != flag
        n[i] = p[i] + flag + (p[i] & flag)


@launch_contract(domain=1, block=64)
@kernel
def block_sum(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        buf = az.shared.array(64, f32)
        dyn = az.shared.array(0, i32)
        t = thread.tid_x()
        buf[t] = x[i] if i.get() < len(x) else 0.0
        dyn[t] = t
        az.syncthreads()
        s = 32
        while s > 0:
            if t < s:
                buf[t] += buf[t + s]
            az.syncthreads()
            s //= 2
        if t == 0:
            out.write_unchecked(thread.block_idx_x(), buf[0] + f32(dyn[63]))


@launch_contract(domain=1, block=64)
@kernel
def warp_ops(
    x: Slice[i32],
    down: DisjointSlice[i32],
    up: DisjointSlice[i32],
    xor: DisjointSlice[f64],
    idx: DisjointSlice[i64],
    bal: DisjointSlice[u32],
    anyv: DisjointSlice[az.bool_],
) -> None:
    i = thread.index_1d()
    with az.unsafe():
        v = x[i]
        d = az.warp.shfl_down(v, 3)
        u = az.warp.shfl_up(v, 5)
        xr = az.warp.shfl_xor(f64(v) * 0.5, 6)
        ix = az.warp.shfl_idx(i64(v) * 1000000000, 7)
        b = az.warp.ballot(v > 0)
        an = az.warp.any(v > 90) and az.warp.all(v > -1000)
        lane = thread.lane_id()
    if i in down:
        down[i] = d
        up[i] = u
        xor[i] = xr
        idx[i] = ix
        bal[i] = b
        anyv[i] = an and lane >= 0


@kernel
def deadlock(out: DisjointSlice[i32]) -> None:
    with az.unsafe():
        t = thread.tid_x()
        if t == 0:
            az.syncthreads()
        v = az.warp.shfl_down(t, 1)
        out.write_unchecked(t, v)


@kernel
@launch_contract(domain=1, block=32, requires=lambda a, c: len(a) == len(c))
def contract_below_kernel(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i]


HALF = np.float32(0.5)
OFFSET = 3


@launch_contract(domain=1, block=32)
@kernel
def module_constants(x: Slice[f32], y: DisjointSlice[f64]) -> None:
    i = thread.index_1d()
    if i in y:
        y[i] = x[i] * HALF + OFFSET


@launch_contract(domain=2, block=(8, 8))
@kernel
def transpose(a: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    with az.unsafe():
        tile = az.shared.array((8, 9), f32)
        tx = thread.tid_x()
        ty = thread.tid_y()
        r = thread.block_idx_y() * 8 + ty
        c = thread.block_idx_x() * 8 + tx
        if r < a.shape[0] and c < a.shape[1]:
            tile[ty, tx] = a[r, c]
        az.syncthreads()
        orow = thread.block_idx_x() * 8 + ty
        ocol = thread.block_idx_y() * 8 + tx
        if orow < out.shape[0] and ocol < out.shape[1]:
            out.write_unchecked((orow, ocol), tile[tx, ty])


@launch_contract(domain=1, block=64, requires=lambda x, y: len(x) == len(y))
@kernel
def grid_stride_proven(x: Slice[f32], y: DisjointSlice[f32]) -> None:
    for i in thread.grid_stride(y):
        y[i] = x[i] * 2.0

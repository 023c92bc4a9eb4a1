"""Kernels for test_types3d.py: the half and small integer types, and 3-D."""

import anodize as az
from anodize import (
    AtomicSlice, DisjointSlice, DisjointSlice3D, Slice, Slice3D, bf16, f16, f32, f64, i8, i16, i32, kernel,
    launch_contract, thread, u8, u16,
)
import math


@launch_contract(domain=1, block=64, requires=lambda a, b, o: len(a) == len(o) and len(b) == len(o))
@kernel
def ops16(a: Slice[f16], b: Slice[f16], o: DisjointSlice[f16]) -> None:
    i = thread.index_1d()
    if i in o:
        x = a[i]
        y = b[i]
        k = i.get() % 8
        if k == 0:
            o[i] = x + y
        elif k == 1:
            o[i] = x - y
        elif k == 2:
            o[i] = x * y
        elif k == 3:
            o[i] = x / y
        elif k == 4:
            o[i] = -abs(x) if x < y else max(x, y)
        elif k == 5:
            o[i] = math.sqrt(abs(x))
        elif k == 6:
            o[i] = x % y
        else:
            o[i] = x * 0.5 + 1.0


@launch_contract(domain=1, block=64, requires=lambda a, b, o: len(a) == len(o) and len(b) == len(o))
@kernel
def opsbf(a: Slice[bf16], b: Slice[bf16], o: DisjointSlice[bf16]) -> None:
    i = thread.index_1d()
    if i in o:
        x = a[i]
        y = b[i]
        k = i.get() % 4
        if k == 0:
            o[i] = x + y
        elif k == 1:
            o[i] = x - y
        elif k == 2:
            o[i] = x * y
        else:
            o[i] = x / y


@launch_contract(domain=1, block=64, requires=lambda a, h, b, n: len(a) == len(h) and len(a) == len(b) and len(a) == len(n))
@kernel
def convert(a: Slice[f64], h: DisjointSlice[f16], b: DisjointSlice[bf16], n: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in h:
        h[i] = f16(a[i])
        b[i] = bf16(a[i])
        n[i] = i32(f16(a[i]))


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def widen(a: Slice[f16], o: DisjointSlice[f64]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = a[i]


@launch_contract(domain=1, block=64, requires=lambda a, b, o, p: len(a) == len(o) and len(b) == len(o) and len(p) == len(o))
@kernel
def ints8(a: Slice[i8], b: Slice[u8], o: DisjointSlice[i16], p: DisjointSlice[u16]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = a[i] + b[i]  # i8 with u8 gives i16
        p[i] = u16(b[i]) * u16(b[i]) + u16(a[i])


@launch_contract(domain=1, block=64)
@kernel
def scalar16(o: DisjointSlice[f16], s: f16, t: bf16, k: i8) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = s + f16(t) + f16(k)


@launch_contract(domain=1, block=64)
@kernel
def atomics16(a: Slice[f16], h: AtomicSlice[f16], m: AtomicSlice[bf16], c: AtomicSlice[i16], b: AtomicSlice[u8]) -> None:
    i = thread.index_1d()
    if i in a:
        h.add(0, a[i])
        m.max(0, bf16(a[i]))
        c.add(0, i16(1))
        b.max(0, u8(i.get()))
        b.min(1, u8(i.get()))
        h.exchange(1, a[i])


@launch_contract(domain=3, block=(4, 4, 2))
@kernel
def ids3(o: DisjointSlice3D[i32]) -> None:
    ijk = thread.index_3d()
    if ijk in o:
        o[ijk] = i32(ijk.layer * 10000 + ijk.row * 100 + ijk.col)


@kernel
def ids3_nocontract(o: DisjointSlice3D[i32]) -> None:
    ijk = thread.index_3d()
    o[ijk] = 1


@launch_contract(domain=3, block=(4, 4, 2))
@kernel
def read3(u: Slice3D[f32], o: DisjointSlice3D[f32]) -> None:
    ijk = thread.index_3d()
    if ijk in o:
        o[ijk] = u[ijk.layer, ijk.row + 1, ijk.col]  # a checked read: faults past the last row

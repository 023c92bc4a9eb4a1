"""Kernels of the 8-bit float types f8e4m3 and f8e5m2 (tests/codegen/test_f8.py)."""

import anodize as az
from anodize import DisjointSlice, Slice, bf16, f8e4m3, f8e5m2, f16, f32, f64, i32, kernel, launch_contract, thread, u8


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def to_e4m3(a: Slice[f32], o: DisjointSlice[f8e4m3]) -> None:
    """f32 -> E4M3: round to nearest even, saturating (the GPU's cvt.rn.satfinite)."""
    i = thread.index_1d()
    if i in o:
        o[i] = f8e4m3(a[i])


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def to_e5m2(a: Slice[f32], o: DisjointSlice[f8e5m2]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = f8e5m2(a[i])


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def from_e4m3(a: Slice[f8e4m3], o: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = a[i]  # widening is implicit and exact


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def from_e5m2(a: Slice[f8e5m2], o: DisjointSlice[f16]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = a[i]


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def e4m3_via_halves(a: Slice[f64], o: DisjointSlice[u8]) -> None:
    """From f64 (one rounding), f16 and bf16 to E4M3, the three bit patterns xor-ed: each
    conversion is checked against the reference one at a time by the test's choice of inputs."""
    i = thread.index_1d()
    if i in o:
        o[i] = az.bitcast(f8e4m3(a[i]), u8)


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def e5m2_from_f16(a: Slice[f16], o: DisjointSlice[f8e5m2]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = f8e5m2(a[i])


@launch_contract(domain=1, block=64, requires=lambda a, b, o: len(a) == len(o) and len(b) == len(o))
@kernel
def fma_promoted(a: Slice[f8e4m3], b: Slice[f8e5m2], o: DisjointSlice[f8e4m3]) -> None:
    """Arithmetic promotes: f8 * f8 is an f16, + an f32 is an f32; the store rounds once to E4M3."""
    i = thread.index_1d()
    if i in o:
        p = a[i] * b[i]
        o[i] = f8e4m3(p + f32(0.25))


@launch_contract(domain=1, block=64, requires=lambda a, s, o: len(a) == len(o))
@kernel
def scale(a: Slice[f8e5m2], s: f8e4m3, o: DisjointSlice[bf16]) -> None:
    """An f8 scalar parameter; f8e5m2 * f8e4m3 is an f16, then rounded to bf16."""
    i = thread.index_1d()
    if i in o:
        o[i] = bf16(a[i] * s)


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def count_big(a: Slice[f8e4m3], o: DisjointSlice[i32]) -> None:
    """Comparisons and truth of f8 values; an f8 local; bits back to an int."""
    i = thread.index_1d()
    if i in o:
        x = a[i]
        big = 1 if x > f8e4m3(1.0) or -x > 100.0 else 0
        o[i] = i32(big) + (2 if x else 0) + i32(az.bitcast(x, u8)) * 4


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def f64_to_e5m2(a: Slice[f64], o: DisjointSlice[f8e5m2]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = f8e5m2(a[i])


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def staged(a: Slice[f8e4m3], o: DisjointSlice[f8e4m3]) -> None:
    """f8 elements of a shared array and of a local array."""
    i = thread.index_1d()
    j = thread.index_in_block()
    s = az.shared.array(64, f8e4m3)
    loc = az.local.array(2, f8e4m3)
    if i in o:
        s[j] = a[i]
        loc[1] = a[i]
    az.syncthreads()
    if i in o:
        o[i] = f8e4m3(s[j] + loc[1])


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def printed(a: Slice[f8e5m2], o: DisjointSlice[f16]) -> None:
    """print of narrow floats (their value, through f32)."""
    i = thread.index_1d()
    if i in o:
        o[i] = a[i]
        if i.get() == 0:
            print("f8", a[i], "f16", o[i])

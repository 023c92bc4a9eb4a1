"""Kernels of `az.bitcast` (tests/codegen/test_bits.py)."""

import anodize as az
from anodize import DisjointSlice, Slice, bf16, f16, f32, f64, i16, i64, kernel, launch_contract, thread, u16, u32, u64


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def float_keys(a: Slice[f32], o: DisjointSlice[u32]) -> None:
    """The order-preserving u32 key of an f32 (radix sort's transform), its top byte."""
    i = thread.index_1d()
    if i in o:
        b = az.bitcast(a[i], u32)
        mask = u32(0x80000000) if b >> 31 == 0 else u32(0xFFFFFFFF)
        o[i] = (b ^ mask) >> 24


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def from_bits(a: Slice[u32], o: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = az.bitcast(a[i], f32)


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def wide_and_half(a: Slice[f64], o: DisjointSlice[u64]) -> None:
    """|x| through its sign bit (f64 <-> i64), plus the f16 and bf16 bits of x (16 bits each)."""
    i = thread.index_1d()
    if i in o:
        w = az.bitcast(az.bitcast(a[i], i64) & ~(i64(1) << 63), f64)
        h = az.bitcast(f16(a[i]), u16)
        g = az.bitcast(az.bitcast(bf16(a[i]), i16), u16)
        o[i] = (az.bitcast(w, u64) >> 32 << 32) | (u64(h) << 16) | u64(g)

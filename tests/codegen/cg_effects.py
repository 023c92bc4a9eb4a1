"""Kernels for test_effects.py: atomics with scopes and orderings, print, assert."""

from anodize import (
    AtomicSlice, DisjointSlice, Slice, f32, f64, func, i32, i64, kernel, launch_contract, thread, u32, u64,
)


@launch_contract(domain=1, block=64)
@kernel
def orders(h: AtomicSlice[u32], g: AtomicSlice[i64], f: AtomicSlice[f32], d: AtomicSlice[f64], c: DisjointSlice[u32]) -> None:
    i = thread.index_1d()
    if i in c:
        h.add(0, 1, order="acq_rel")  # PTX: acq_rel_add
        h.add(1, 1, scope="system")  # PTX: sys_add
        h.add(2, 1)  # PTX: relaxed_add
        h.sub(3, 1, order="release", scope="system")  # PTX: release_sub
        h.min(4, 1, order="seq_cst")  # PTX: seq_cst_min
        g.max(0, -5, order="acquire")  # PTX: acquire_max
        g.xor(1, 3, order="acq_rel", scope="system")  # PTX: xor
        h.exchange(5, 9, order="acq_rel")  # PTX: exch
        old = h.compare_exchange(6, 0, 1, order="acq_rel")  # PTX: cas
        old2 = h.compare_exchange(6, 1, 2, order="seq_cst", scope="system")  # PTX: cas_sys
        h.store(7, 3, order="release")  # PTX: store_release
        h.store(8, 3, scope="system", order="seq_cst")  # PTX: store_sys
        v = h.load(7, order="acquire")  # PTX: load_acquire
        w = h.load(8)  # PTX: load_relaxed
        f.add(0, 1.0)  # PTX: fadd
        f.add(1, 1.0, order="acq_rel", scope="system")  # PTX: fadd_sys
        f.max(2, 1.0, order="acq_rel")  # PTX: fmax
        f.exchange(3, 2.0, order="release")  # PTX: fexch
        d.add(0, 1.0)  # PTX: dadd
        d.sub(1, 1.0, order="acq_rel")  # PTX: dsub
        c[i] = old + old2 + v + w


@launch_contract(domain=1, block=32)
@kernel
def one_op(x: Slice[i64], h32: AtomicSlice[i32], u32s: AtomicSlice[u32], h64: AtomicSlice[i64], u64s: AtomicSlice[u64],
           f: AtomicSlice[f32], d: AtomicSlice[f64], c: DisjointSlice[i64]) -> None:
    i = thread.index_1d()
    if i in c:
        v = x[i]
        h32.add(0, i32(v)); h32.sub(1, i32(v)); h32.min(2, i32(v)); h32.max(3, i32(v))
        h32.and_(4, i32(v)); h32.or_(5, i32(v)); h32.xor(6, i32(v))
        u32s.add(0, u32(v)); u32s.sub(1, u32(v)); u32s.min(2, u32(v)); u32s.max(3, u32(v))
        u32s.and_(4, u32(v)); u32s.or_(5, u32(v)); u32s.xor(6, u32(v))
        h64.add(0, v); h64.sub(1, v); h64.min(2, v); h64.max(3, v)
        h64.and_(4, v); h64.or_(5, v); h64.xor(6, v)
        u64s.add(0, u64(v)); u64s.sub(1, u64(v)); u64s.min(2, u64(v)); u64s.max(3, u64(v))
        u64s.and_(4, u64(v)); u64s.or_(5, u64(v)); u64s.xor(6, u64(v))
        f.add(0, f32(v)); f.sub(1, f32(v)); f.min(2, f32(v)); f.max(3, f32(v))
        d.add(0, f64(v)); d.sub(1, f64(v)); d.min(2, f64(v)); d.max(3, f64(v))
        c[i] = h64.compare_exchange(7, i.get(), i.get() + 1)  # a chain: exactly one thread advances it each time


@launch_contract(domain=1, block=32)
@kernel
def oob(h: AtomicSlice[i32], c: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = h.compare_exchange(i.get() + 10, 0, 1)  # faults where i + 10 >= len(h)
        h.store(i.get() + 10, 5)


@launch_contract(domain=1, block=4)
@kernel
def prints(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        if i.get() == 0:
            print("x", i32(-5), u64(18446744073709551615), 1.5, f32(0.1), True, c[i] < 0.0, "100%")
            print()
            print(f64(1e300), f32(-2.5e-8), i64(-9223372036854775807) - 1, u32(4294967295), "é")


@func
def positive(v: f32) -> f32:
    assert v > 0.0, "not positive"  # LINE:helper-assert
    return v


@launch_contract(domain=1, block=32, requires=lambda a, c: len(a) == len(c))
@kernel
def asserts(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        assert a[i] < 100.0, "too big"  # LINE:assert
        assert a[i] != 50.0  # LINE:bare-assert
        c[i] = positive(a[i]) + 1.0


@launch_contract(domain=1, block=256)
@kernel
def load_only(t: AtomicSlice[u32], found: DisjointSlice[u32]) -> None:
    i = thread.index_1d()
    if i in found:
        found[i] = t.load(i.get())  # t is never stored here: no `ld.global.nc` for an atomic load

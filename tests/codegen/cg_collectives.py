"""Kernels for tests/codegen/test_collectives.py (safe collectives and block witnesses)."""

from typing import TypeVar

import anodize as az
from anodize import (
    DisjointSlice,
    DisjointSlice2D,
    Slice,
    Slice2D,
    bool_,
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

T = TypeVar("T", i32, i64, u32, u64, f32, f64)
I = TypeVar("I", i32, i64, u32, u64)


@launch_contract(domain=1, block=96)
@kernel
def numeric(
    a: Slice[T],
    rsum: DisjointSlice[T],
    rmax: DisjointSlice[T],
    rmin: DisjointSlice[T],
    incl: DisjointSlice[T],
    excl: DisjointSlice[T],
    exmax: DisjointSlice[T],
    exmin: DisjointSlice[T],
    wmax: DisjointSlice[T],
    bc: DisjointSlice[T],
) -> None:
    i = thread.index_1d()
    v = a[i] if i in a else T(0)
    s = az.block.reduce(v, "sum")
    hi = az.block.reduce(v, "max")
    lo = az.block.reduce(v, "min")
    p = az.block.scan(v, "sum")
    q = az.block.scan(v, "sum", inclusive=False)
    qm = az.block.scan(v, "max", inclusive=False)
    pm = az.block.scan(v, "min", inclusive=True)
    w = az.warp.reduce(v, "max")
    b = az.block.broadcast(v, 37)
    if i in rsum:
        rsum[i] = s
        rmax[i] = hi
        rmin[i] = lo
        incl[i] = p
        excl[i] = q
        exmax[i] = qm
        exmin[i] = pm
        wmax[i] = w
        bc[i] = b


@launch_contract(domain=1, block=64)
@kernel
def bitwise(a: Slice[I], rand: DisjointSlice[I], ror: DisjointSlice[I], sor: DisjointSlice[I], wand: DisjointSlice[I]) -> None:
    i = thread.index_1d()
    v = a[i] if i in a else I(0)
    x = az.block.reduce(v, "and")
    y = az.block.reduce(v, "or")
    z = az.block.scan(v, "or", inclusive=False)
    w = az.warp.reduce(v, "and")
    if i in rand:
        rand[i] = x
        ror[i] = y
        sor[i] = z
        wand[i] = w


@launch_contract(domain=1, block=64)
@kernel
def bools(a: Slice[i32], anyv: DisjointSlice[bool_], allv: DisjointSlice[bool_], seen: DisjointSlice[bool_], src: DisjointSlice[bool_]) -> None:
    i = thread.index_1d()
    f = a[i] > 0 if i in a else False
    x = az.block.reduce(f, "or")
    y = az.block.reduce(f, "and")
    z = az.block.scan(f, "or")
    w = az.block.broadcast(f, 3)
    if i in anyv:
        anyv[i] = x
        allv[i] = y
        seen[i] = z
        src[i] = w


@launch_contract(domain=2, block=(16, 8))
@kernel
def block2d(a: Slice2D[f32], tot: DisjointSlice2D[f32], pre: DisjointSlice2D[f32]) -> None:
    """Threads numbered x fastest: a 16 x 8 block is 4 warps of two rows each."""
    ij = thread.index_2d()
    v = a[ij] if ij in a else f32(0.0)
    s = az.block.reduce(v, "sum")
    p = az.block.scan(v, "sum")
    if ij in tot:
        tot[ij] = s
        pre[ij] = p


@launch_contract(domain=1, block=64)
@kernel
def with_user_shared(a: Slice[f32], out: DisjointSlice[f32]) -> None:
    """The user's shared memory and the collectives' scratch are apart."""
    i = thread.index_1d()
    v = a[i] if i in a else f32(0.0)
    with az.unsafe():
        tile = az.shared.array(64, f32)
        t = thread.tid_x()
        tile[t] = v
        az.syncthreads()
    s = az.block.reduce(v, "sum")
    with az.unsafe():
        mine = tile[t]
    if i in out:
        out[i] = s + mine


@kernel
def leader_no_contract(partial: DisjointSlice[i64]) -> None:
    """A block witness without a contract: the launch must be 1-D (checked on the device)."""
    b = thread.block_witness_1d()
    if thread.is_block_leader() and b in partial:
        partial[b] = b.get() + 1


@launch_contract(domain=1, block=128)
@kernel
def block_partials(x: Slice[f32], partial: DisjointSlice[f32]) -> None:
    acc = f32(0.0)
    for i in thread.grid_stride(x):
        acc += x[i]
    s = az.block.reduce(acc, "sum")
    b = thread.block_witness_1d()
    if thread.is_block_leader():
        partial[b] = s


@launch_contract(domain=1, block=256, requires=lambda a, out: len(a) == len(out))
@kernel
def rounds(a: Slice[f32], out: DisjointSlice[f32], n: i64) -> None:
    """Block collectives back to back, one of them in a loop: on the GPU consecutive collectives
    use alternate halves of the scratch with one barrier each (codegen/llvm/collectives.py), so a
    wrong alternation would let a fast warp overwrite partials a slow warp still reads."""
    i = thread.index_1d()
    x = a[i] if i in out else f32(0.0)
    acc = f32(0.0)
    for k in range(n):
        s = az.block.reduce(x + f32(k), "sum")
        m = az.block.reduce(x * f32(k), "max")
        acc += s - m
    first = az.block.broadcast(x, 3)
    pre = az.block.scan(x, "sum")
    if i in out:
        out[i] = acc + first + pre


@launch_contract(domain=1, block=256)
@kernel
def wide(a: Slice[T], rmax: DisjointSlice[T], rmin: DisjointSlice[T], rsum: DisjointSlice[T], scan: DisjointSlice[T]) -> None:
    """Eight warps: the region backend combines them in a loop of 8 (7 after its first) whose
    `maxnum`/`minnum` recurrence LLVM 22 tail-folded wrongly where masked gathers are cheap
    (AVX-512: warps 5-7, threads 160-255, were skipped; `CPUTarget.float_minmax`)."""
    i = thread.index_1d()
    v = a[i] if i in a else T(0)
    hi = az.block.reduce(v, "max")
    lo = az.block.reduce(v, "min")
    s = az.block.reduce(v, "sum")
    p = az.block.scan(v, "max")
    if i in rmax:
        rmax[i] = hi
        rmin[i] = lo
        rsum[i] = s
        scan[i] = p


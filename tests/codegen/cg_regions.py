"""Kernels for tests/codegen/test_cpu_regions.py: the CPU backend's split at barriers."""

import anodize as az
from anodize import DisjointSlice, Slice, f32, func, i32, i64, kernel, launch_contract, thread, u32


@launch_contract(domain=1, block=64)
@kernel
def carry(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    """Per-thread values made before barriers and used after them; shared slots written,
    then read at other threads' slots."""
    i = thread.index_1d()
    with az.unsafe():
        tile = az.shared.array(64, f32)
        t = thread.tid_x()
        v = (x[i] if i in x else f32(0.0)) * 3.0 + f32(t)
        tile[t] = v
        az.syncthreads()
        w = tile[(t + 1) % 64]
        az.syncthreads()
        tile[t] = w * 2.0
        az.syncthreads()
        u = tile[63 - t]
    if i in out:
        out[i] = v + u


@launch_contract(domain=1, block=32)
@kernel
def rounds(x: Slice[f32], out: DisjointSlice[f32], n: i32) -> None:
    """Barriers in a uniform `for`, a uniform `continue` after a barrier and a uniform `break`;
    `acc` is carried from round to round by each thread."""
    i = thread.index_1d()
    with az.unsafe():
        tile = az.shared.array(32, f32)
        t = thread.tid_x()
        acc = x[i] if i in x else f32(0.0)
        for r in range(n):
            if r == 5:
                break
            tile[t] = acc
            az.syncthreads()
            if r % 2 == 1:
                az.syncthreads()
                continue
            acc = acc + tile[(t + r + 1) % 32]
            az.syncthreads()
    if i in out:
        out[i] = acc


@launch_contract(domain=1, block=64)
@kernel
def halving(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    """The classic tree: a uniform `while` whose body ends with a barrier."""
    i = thread.index_1d()
    with az.unsafe():
        red = az.shared.array(64, f32)
        t = thread.tid_x()
        red[t] = x[i] if i in x else f32(0.0)
        az.syncthreads()
        s = 32
        while s > 0:
            if t < s:
                red[t] += red[t + s]
            az.syncthreads()
            s = s // 2
        total = red[0]
    if i in out:
        out[i] = total


@func
def lane_sum(v: f32) -> f32:
    with az.unsafe():
        v += az.warp.shfl_xor(v, 16)
        if thread.block_idx_x() == 1:  # warp-uniform: block 1 stops after one round
            return v
        v += az.warp.shfl_xor(v, 8)
        v += az.warp.shfl_xor(v, 4)
        v += az.warp.shfl_xor(v, 2)
        v += az.warp.shfl_xor(v, 1)
    return v


@launch_contract(domain=1, block=64)
@kernel
def warps(x: Slice[f32], out: DisjointSlice[f32], red: DisjointSlice[f32]) -> None:
    """A helper with warp shuffles and an early (uniform) return, inlined; `az.warp.reduce`
    under a warp-uniform condition; a vote in a `while` condition."""
    i = thread.index_1d()
    v = x[i] if i in x else f32(0.0)
    s = lane_sum(v)
    r = f32(0.0)
    with az.unsafe():
        if thread.tid_x() // 32 == 1:
            r = az.warp.reduce(v, "max")
        k = 0
        while az.warp.any(v > f32(k)):
            k += 1
    if i in out:
        out[i] = s
        red[i] = r + f32(k) * 1000.0


@launch_contract(domain=1, block=32)
@kernel
def fault_after_barrier(x: Slice[f32], out: DisjointSlice[f32], k: i32) -> None:
    """A read past the end in the region after a barrier: a fault, 0 read, the rest goes on."""
    i = thread.index_1d()
    with az.unsafe():
        tile = az.shared.array(32, f32)
        t = thread.tid_x()
        tile[t] = x[i] if i in x else f32(0.0)
        az.syncthreads()
        j = i + i64(k)
        v = x[j]
        az.syncthreads()
        w = v + tile[(t + 1) % 32]
    if i in out:
        out[i] = w


@launch_contract(domain=1, block=64)
@kernel
def returns(x: Slice[f32], out: DisjointSlice[f32], stop: i32) -> None:
    """A uniform return before a barrier (nothing runs), threads returning after the last one."""
    i = thread.index_1d()
    if stop == 1:
        return
    with az.unsafe():
        tile = az.shared.array(64, f32)
        t = thread.tid_x()
        tile[t] = x[i] if i in x else f32(0.0)
        az.syncthreads()
        v = tile[(t + 5) % 64]
    if i not in out:
        return
    if t % 2 == 1:
        return
    out[i] = v


@launch_contract(domain=1, block=64)
@kernel
def short_circuit(x: Slice[f32], out: DisjointSlice[f32], n: i32) -> None:
    """Warp votes in the right operand of `and` / `or` and a branch of `x if c else y`, with
    arguments that read memory (so not speculated: made `if`s), under uniform conditions."""
    i = thread.index_1d()
    with az.unsafe():
        j = i % 64
        c = n > 0 and az.warp.any(x[j] > f32(0.5))
        d = n > 1 or az.warp.all(x[j] < f32(2.0))
        e = az.warp.ballot(x[j + 1] > f32(0.5)) if n > 2 else u32(7)
    if i in out:
        out[i] = (f32(1.0) if c else f32(0.0)) + (f32(10.0) if d else f32(0.0)) + f32(e) * 100.0


@launch_contract(domain=1, block=64)
@kernel
def stride_shuffle(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    """A warp operation inside a grid-stride loop (lane-divergent in general: the checker's
    az-warp-divergence rejects it; here every lane runs one trip): left to the
    one-host-thread-per-GPU-thread runner."""
    acc = f32(0.0)
    with az.unsafe():
        for i in thread.grid_stride(x):
            acc += az.warp.shfl_xor(x[i], 1)
    j = thread.index_1d()
    if j in out:
        out[j] = acc


@launch_contract(domain=1, block=32)
@kernel
def talk(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    """`print` and `assert` after a barrier."""
    i = thread.index_1d()
    with az.unsafe():
        tile = az.shared.array(32, f32)
        t = thread.tid_x()
        tile[t] = x[i] if i in x else f32(0.0)
        az.syncthreads()
        v = tile[31 - t]
        if t % 8 == 0:
            print("thread", t, "sees", v)
        assert v >= 0.0, "negative input"
    if i in out:
        out[i] = v


@launch_contract(domain=1, block=64)
@kernel
def arrays_across_barriers(x: Slice[f32], out: DisjointSlice[f32], n: i32) -> None:
    """Each thread's own `az.local.array`, filled before a barrier and read after it (by a loop
    of run-time trip count, so its indices are not constants), beside a second array that one
    region alone uses; every thread's values differ, so one array shared by the block's threads
    would show."""
    i = thread.index_1d()
    mine = az.local.array(4, f32)
    with az.unsafe():
        t = thread.tid_x()
        tile = az.shared.array(64, f32)
        for k in range(4):
            mine[k] = (x[i] if i in x else f32(0.0)) * f32(k + 1) + f32(t)
        tile[t] = mine[3]
        az.syncthreads()
        s = tile[(t + 1) % 64]
        for k in range(n):
            s = s + mine[k % 4]
        az.syncthreads()
        tile[t] = s
        az.syncthreads()
        scratch = az.local.array(2, f32)
        scratch[0] = tile[63 - t]
        scratch[1] = mine[0]
    if i in out:
        out[i] = scratch[0] + scratch[1]

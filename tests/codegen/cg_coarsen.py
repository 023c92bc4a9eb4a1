"""Kernels for the coarsening tests (tests/codegen/test_coarsen.py)."""

import anodize as az
from anodize import AtomicSlice, DisjointSlice, DisjointSlice2D, Index1D, Slice, Slice2D, f32, f64, func, i32, kernel, launch_contract, thread


@launch_contract(domain=1, block=64)
@kernel
def visit(cnt: DisjointSlice[i32]) -> None:
    """Counts the visits of each element: 1 inside the user's grid times block, 0 beyond."""
    i = thread.index_1d()
    if i in cnt:
        cnt[i] = cnt[i] + 1


@launch_contract(domain=2, block=(8, 4))
@kernel
def visit2d(cnt: DisjointSlice2D[i32]) -> None:
    ij = thread.index_2d()
    if ij in cnt:
        cnt[ij] = cnt[ij] + 1


@launch_contract(domain=1, block=64, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def axpy(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = 2.5 * a[i] + b[i]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def branchy(a: Slice[f64], c: DisjointSlice[f64]) -> None:
    """A data-dependent `if` with a write on both arms (lockstep, then lane by lane when mixed)."""
    i = thread.index_1d()
    if i in c:
        x = a[i]
        if x > 0.5:
            c[i] = x * 2.0
        else:
            c[i] = -x


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def some_lanes(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """Writes only where `a` is positive: `c` keeps its other elements (scalar stores)."""
    i = thread.index_1d()
    if i in c:
        if a[i] > 0.0:
            c[i] = a[i]


@launch_contract(domain=2, block=(32, 8), requires=lambda u, out: u.shape[0] == out.shape[0] and u.shape[1] == out.shape[1])
@kernel
def blur3x3(u: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    """A 3x3 box blur with one bounds check left: no `r < rows - 1` guard, so the reads of
    row r + 1 keep theirs (the last row reads past the end: a fault)."""
    ij = thread.index_2d()
    if ij in out:
        r = ij.row
        c = ij.col
        if r > 0 and c > 0 and c < u.shape[1] - 1:
            top = u[r - 1, c - 1] + u[r - 1, c] + u[r - 1, c + 1]
            mid = u[r, c - 1] + u[r, c] + u[r, c + 1]
            low = u[r + 1, c - 1] + u[r + 1, c] + u[r + 1, c + 1]
            out[ij] = (top + mid + low) / 9.0
        else:
            out[ij] = u[ij]


@launch_contract(domain=2, block=(32, 8), requires=lambda u, out: u.shape[0] == out.shape[0] and u.shape[1] == out.shape[1])
@kernel
def blur3x3_loops(u: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    """blur3x3 with loops over the taps: too large to coarsen (`coarsen.code_size`)."""
    ij = thread.index_2d()
    if ij in out:
        r = ij.row
        c = ij.col
        if r > 0 and c > 0 and c < u.shape[1] - 1:
            acc = f32(0.0)
            for dr in range(-1, 2):
                for dc in range(-1, 2):
                    acc += u[r + dr, c + dc]
            out[ij] = acc / 9.0
        else:
            out[ij] = u[ij]


@launch_contract(domain=1, block=64)
@kernel
def with_raw_id(c: DisjointSlice[i32]) -> None:
    """Reads a raw thread id: not coarsened (the lanes would see the wrong id)."""
    i = thread.index_1d()
    if i in c:
        with az.unsafe():
            c[i] = thread.tid_x()


@launch_contract(domain=1, block=64)
@kernel
def with_atomic(a: Slice[i32], bins: AtomicSlice[i32]) -> None:
    i = thread.index_1d()
    if i in a:
        bins.add(a[i] % len(bins), 1)


@launch_contract(domain=1, block=64)
@kernel
def with_print(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = 1.0
        if i.get() == 0:
            print("first")


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def early_return(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i not in c:
        return
    c[i] = a[i]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def long_loop(a: Slice[f32], c: DisjointSlice[f32], n: i32) -> None:
    """A per-element loop of a runtime trip count: compute-bound, every thread kept."""
    i = thread.index_1d()
    if i in c:
        x = a[i]
        for _ in range(n):
            x = x * 0.5 + 1.0
        c[i] = x


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def grid_stride_body(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    for i in thread.grid_stride(c):
        c[i] = a[i]


@launch_contract(domain=1, block=64)
@kernel
def block_result(x: Slice[f32], partial: DisjointSlice[f32]) -> None:
    b = thread.block_witness_1d()
    if thread.is_block_leader() and b in partial:
        partial[b] = x[0]


@func
def twice(x: Slice[f32], w: Index1D) -> f32:
    return x[w] * 2.0


@launch_contract(domain=1, block=64, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def via_helper(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    """`a` reaches a helper (scalar reads in the lanes), `b` is read at the witness here (vector)."""
    i = thread.index_1d()
    if i in c:
        c[i] = twice(a, i) + b[i]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def taps4(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """Reads at i - 4, i, i + 4 (16-byte loads for four lanes) and i + 1 (scalar)."""
    i = thread.index_1d()
    if i in c:
        j = i.get()
        if j >= 4 and j < len(a) - 4:
            c[i] = a[j - 4] + a[j] + a[j + 4] + a[j + 1]
        else:
            c[i] = 0.0


@launch_contract(domain=1, block=64)
@kernel
def block_slot(c: DisjointSlice[f32]) -> None:
    # the thread's slot in its block: a coarsened block would hand lanes slots up to 4 * 64
    i = thread.index_1d()
    w = thread.index_in_block()
    if i in c:
        c[i] = f32(w.get())

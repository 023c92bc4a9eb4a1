"""Kernels for the guard-derived range facts (bounds-check elimination) tests.

Each kernel's docstring says which checks must stay; the tests pin the counts
and run the kernels on the CPU backend at the edge values.
"""

from __future__ import annotations

import anodize as az
from anodize import DisjointSlice, DisjointSlice2D, Slice, Slice2D, f32, i32, i64, kernel, launch_contract, thread, u32, u64

@launch_contract(domain=2, block=(32, 8), requires=lambda u, out: u.shape[0] == out.shape[0] and u.shape[1] == out.shape[1])
@kernel
def stencil_early_exit(u: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    """0 checks: `if not (...): ...; return` proves the interior for what follows."""
    ij = thread.index_2d()
    if ij not in out:
        return
    r = ij.row
    c = ij.col
    rows = u.shape[0]
    cols = u.shape[1]
    if not (r > 0 and r < rows - 1 and c > 0 and c < cols - 1):
        out[ij] = u[r, c]
        return
    out[ij] = 0.2 * (u[r, c] + u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1])


@launch_contract(domain=2, block=(32, 8), requires=lambda u, out: u.shape[0] == out.shape[0] and u.shape[1] == out.shape[1])
@kernel
def stencil_or_exit(u: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    """0 checks: `if a or b: return` gives `not a` and `not b`; chained comparisons work."""
    ij = thread.index_2d()
    if ij in out:
        r = ij.row
        c = ij.col
        if r < 1 or r >= u.shape[0] - 1 or not (0 < c < u.shape[1] - 1):
            out[ij] = u[ij]
            return
        out[ij] = u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1] - 4.0 * u[ij]


@launch_contract(domain=2, block=(32, 8), requires=lambda u, out: u.shape[0] == out.shape[0] and u.shape[1] == out.shape[1])
@kernel
def stencil_unguarded(u: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    """1 check: `u[r - 1, c]` has no `r > 0` guard (row 0 reads row -1); `u[r, c]` is proven."""
    ij = thread.index_2d()
    if ij in out:
        r = ij.row
        c = ij.col
        out[ij] = u[r, c] + u[r - 1, c]


@launch_contract(domain=2, block=(32, 8))
@kernel
def stencil_no_requires(u: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    """2 checks: without `requires`, `ij in out` says nothing about `u`'s shape; the
    guard on `u.shape` proves the neighbour reads on the other axis only partly."""
    ij = thread.index_2d()
    if ij in out:
        r = ij.row
        c = ij.col
        if r > 0 and r < u.shape[0] - 1:
            out[ij] = u[r - 1, c] + u[r + 1, c]


@launch_contract(domain=1, block=64)
@kernel
def wrap_i64(a: Slice[f32], x: i64, c: DisjointSlice[f32]) -> None:
    """1 check: `x + 1` wraps for x = 2**63 - 1 (then the guard holds and the index is
    -2**63), so the guard proves nothing about `a[x + 1]`."""
    i = thread.index_1d()
    if i in c:
        if x >= 0 and x + 1 < len(a):
            c[i] = a[x + 1]


@launch_contract(domain=1, block=64)
@kernel
def bounded_i64(a: Slice[f32], x: i64, c: DisjointSlice[f32]) -> None:
    """0 checks: `x < len(a) - 1` bounds `x`, so `x + 1` cannot wrap."""
    i = thread.index_1d()
    if i in c:
        if x >= 0 and x < len(a) - 1:
            c[i] = a[x + 1] + a[x]


@launch_contract(domain=1, block=64)
@kernel
def narrow_i32(a: Slice[f32], k: i32, c: DisjointSlice[f32]) -> None:
    """1 check: `k < len(a) - 1` does not stop `k + 1` wrapping in i32 (k = 2**31 - 1
    with a longer slice); `a[k]` is proven."""
    i = thread.index_1d()
    if i in c:
        if k >= 0 and k < len(a) - 1:
            c[i] = a[k + 1] + a[k]


@launch_contract(domain=1, block=64)
@kernel
def unsigned_ops(a: Slice[f32], x: u32, y: u64, c: DisjointSlice[f32]) -> None:
    """2 checks: `a[x]` and `a[y]` are proven (an unsigned value is >= 0 and the guard
    bounds it); `x - 1` wraps in u32 for x = 0 and `y + 1` in u64, so those keep theirs."""
    i = thread.index_1d()
    if i in c:
        v = f32(0.0)
        if x < len(a):
            v += a[x]
        if x - 1 < len(a):
            v += a[x - 1]
        if y < u64(len(a)):
            v += a[y]
        if y + 1 < u64(len(a)):
            v += a[y + 1]
        c[i] = v


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def reassigned(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """1 check: `j` is assigned twice, so the guard on it proves nothing."""
    i = thread.index_1d()
    if i in c:
        j = i.get()
        if j >= 0 and j < len(a):
            j = j + 1
            c[i] = a[j]


@launch_contract(domain=1, block=64)
@kernel
def loops(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """2 checks: a `range` loop's variable is in `[start, stop)` (`a[k]`, `a[k - 1]`
    proven), but `a[k + 1]` is not, nor is the loop-carried `a[j]` of the `while`."""
    i = thread.index_1d()
    if i in c:
        acc = f32(0.0)
        for k in range(1, len(a)):
            acc += a[k] - a[k - 1] + a[k + 1]
        j = 0
        while j < len(a):
            acc += a[j]
            j += 1
        c[i] = acc


@az.func
def previous(a: Slice[f32], j: i64) -> f32:
    return a[j - 1]


@launch_contract(domain=1, block=64)
@kernel
def helper_boundary(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """1 check: range facts do not cross into a helper; `a[j]` in the kernel is proven."""
    i = thread.index_1d()
    if i in c:
        j = i.get()
        if j > 0 and j < len(a):
            c[i] = previous(a, j) + a[j]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c) + 2)
@kernel
def requires_offset(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """0 checks: `len(a) == len(c) + 2` and `i in c` prove `a[i + 2]`."""
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + a[i + 1] + a[i + 2]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c) + 2)
@kernel
def requires_offset_too_far(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """1 check: `a[i + 3]` is one past the end for the last `i`."""
    i = thread.index_1d()
    if i in c:
        c[i] = a[i + 3]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def ifexp_arms(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """1 check: a conditional expression's test narrows its arms as an `if` does (`a[j + 1]`
    after `j + 1 < len(a)`, `a[j - 1]` in the arm where `j < 1` is false), but the arm where
    the test failed keeps its check (`a[j + 2]`)."""
    i = thread.index_1d()
    if i in c:
        j = i.get()
        x = a[j + 1] if j + 1 < len(a) else a[j + 2]
        y = f32(0.0) if j < 1 else a[j - 1]
        c[i] = x + y


@launch_contract(domain=2, block=(16, 16))
@kernel
def ifexp_tile_rows(a: Slice2D[f32], c: DisjointSlice2D[f32]) -> None:
    """0 checks: `x[r, k] if 0 <= r < rows and 0 <= k < cols else 0.0`, the staging load of
    examples/sgemm.py, needs no check of its own."""
    ij = thread.index_2d()
    r = ij.row * 2
    k = ij.col - 3
    v = a[r, k] if 0 <= r < a.shape[0] and 0 <= k < a.shape[1] else f32(-1.0)
    if ij in c:
        c[ij] = v

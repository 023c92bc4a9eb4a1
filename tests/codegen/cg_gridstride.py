"""Grid-stride kernels: elementwise bodies (16-byte vector chunks on the GPU) and bodies
that must keep the scalar mapping."""

from __future__ import annotations

import math

import anodize as az
from anodize import AtomicSlice, DisjointSlice, Slice, f32, f64, i32, i64, kernel, launch_contract, thread, u32

# ---- elementwise: vectorised ------------------------------------------------------------------


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def copy_gs(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    for i in thread.grid_stride(c):
        c[i] = a[i]


@launch_contract(domain=1, block=64, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def vecadd_gs(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    for i in thread.grid_stride(c):
        c[i] = a[i] + b[i]


@launch_contract(domain=1, block=64, requires=lambda x, y, out: len(x) == len(out) and len(y) == len(out))
@kernel
def axpy64_gs(alpha: f64, x: Slice[f64], y: Slice[f64], out: DisjointSlice[f64]) -> None:
    """8-byte elements: two 16-byte accesses per chunk and slice."""
    for i in thread.grid_stride(out):
        out[i] = alpha * x[i] + y[i]


@launch_contract(domain=1, block=64, requires=lambda a, wide, neg: len(a) == len(wide) and len(a) == len(neg))
@kernel
def widen_gs(a: Slice[f32], wide: DisjointSlice[f64], neg: DisjointSlice[i32]) -> None:
    """Mixed widths, two outputs, an `if` that only assigns locals, a conditional
    expression and the index's value used as a number."""
    for i in thread.grid_stride(a):
        v = a[i]
        s = i32(0)
        if v < 0.5:
            s = i32(-1)
        wide[i] = f64(v) * 2.0 + f64(i.get())
        neg[i] = s if i.get() % 3 != 0 else i32(7)


@launch_contract(domain=1, block=64, requires=lambda a, b, q, r: len(a) == len(q) and len(b) == len(q) and len(r) == len(q))
@kernel
def divmod_gs(a: Slice[i32], b: Slice[i32], q: DisjointSlice[i32], r: DisjointSlice[i32]) -> None:
    """Integer `//` and `%` (a zero divisor records a fault per element, in every lane)."""
    for i in thread.grid_stride(q):
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def update_gs(a: Slice[u32], c: DisjointSlice[u32]) -> None:
    """Reads of the output: before the lane's write (in-place update) and after it."""
    for i in thread.grid_stride(c):
        c[i] = c[i] * u32(3) + a[i]
        c[i] = c[i] ^ u32(0x55)


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def loop_in_body_gs(a: Slice[f64], c: DisjointSlice[f64]) -> None:
    """A nested `range` loop (with its own `break`) and math in the body."""
    for i in thread.grid_stride(c):
        acc = 0.0
        for k in range(8):
            if k > 5:
                break
            acc += math.sqrt(a[i] + f64(k))
        c[i] = acc


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def i64_gs(a: Slice[i64], c: DisjointSlice[i64]) -> None:
    for i in thread.grid_stride(a):
        c[i] = a[i] * 3 - i.get()


# ---- not elementwise: the scalar mapping --------------------------------------------------------


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def masked_write_gs(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """A write under an `if`: not every lane writes."""
    for i in thread.grid_stride(c):
        if a[i] > 0.5:
            c[i] = a[i]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def neighbour_gs(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """A read at `i + 1`, not at `i`."""
    for i in thread.grid_stride(c):
        if i.get() + 1 < len(a):
            c[i] = a[i] + a[i.get() + 1]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def early_break_gs(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """`break` out of the grid-stride loop."""
    for i in thread.grid_stride(c):
        c[i] = a[i]
        if a[i] < 0.0:
            break


@launch_contract(domain=1, block=64)
@kernel
def atomic_gs(a: Slice[i32], h: AtomicSlice[u32]) -> None:
    for i in thread.grid_stride(a):
        h.add(a[i], u32(1))


@launch_contract(domain=1, block=64)
@kernel
def unproven_gs(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """No `requires`: `a[i]` keeps its check, so the body is not elementwise-proven."""
    for i in thread.grid_stride(c):
        c[i] = a[i]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def bool_gs(a: Slice[az.bool_], c: DisjointSlice[az.bool_]) -> None:
    for i in thread.grid_stride(c):
        c[i] = not a[i]


@kernel
def no_contract_gs(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """No contract: the witness carries a device rank check."""
    for i in thread.grid_stride(c):
        if i in a:
            c[i] = a[i]


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def owner_gs(a: Slice[i32], c: DisjointSlice[i32]) -> None:
    """Records which thread took each index: the mapping itself, made visible."""
    for i in thread.grid_stride(c):
        with az.unsafe():
            c[i] = a[i] + thread.block_idx_x() * 64 + thread.tid_x()


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def carried_gs(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """`last` keeps the value of an earlier iteration (on this thread) when `a[i] <= 0.5`:
    the results depend on the mapping, so the body is not elementwise."""
    last = f32(0.0)
    for i in thread.grid_stride(c):
        if a[i] > 0.5:
            last = a[i]
        c[i] = last


@launch_contract(domain=1, block=64, requires=lambda x, total: len(total) == 1)
@kernel
def reduction_gs(x: Slice[f32], total: AtomicSlice[f32]) -> None:
    """A reduction (`acc` is carried between iterations): not elementwise."""
    acc = f32(0.0)
    for i in thread.grid_stride(x):
        acc += x[i]
    total.add(0, acc)

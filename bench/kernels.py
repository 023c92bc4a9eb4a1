"""anodize kernels used only by the benchmarks (the examples provide vecadd, saxpy, stencil2d)."""

import anodize as az
from anodize import DisjointSlice, Slice, f32, i64, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda a, c: len(a) == len(c))
@kernel
def copy(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i]


@launch_contract(domain=1, block=256, requires=lambda a, c: len(a) == len(c))
@kernel
def copy_gs(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    """`copy` as a grid-stride loop: an elementwise body, so 16-byte loads and stores
    of 4 elements per thread and step (codegen/llvm/gridstride.py)."""
    for i in thread.grid_stride(c):
        c[i] = a[i]


@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def vecadd_gs(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    """vecadd as a grid-stride loop (16-byte vector accesses)."""
    for i in thread.grid_stride(c):
        c[i] = a[i] + b[i]


@launch_contract(domain=1, block=32)
@kernel
def empty() -> None:
    pass


@launch_contract(domain=1, block=32)
@kernel
def four(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], n: i64) -> None:
    pass


@launch_contract(domain=1, block=256, requires=lambda a, idx, c: len(idx) == len(c))
@kernel
def gather(a: Slice[f32], idx: Slice[i64], c: DisjointSlice[f32]) -> None:
    """Reads at data-dependent indices: the read check on `a` cannot be proven away."""
    i = thread.index_1d()
    if i in c:
        c[i] = a[idx[i]]

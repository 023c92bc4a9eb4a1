"""Record kernels for the GPU's code paths run on the CPU (tests/codegen/test_record_paths.py)."""

import anodize as az
from anodize import DisjointSlice, Slice, f32, i32, kernel, launch_contract, thread


@az.record
class V:
    x: f32
    y: f32
    k: i32


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def swap(a: Slice[V], o: DisjointSlice[V]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = V(a[i].y, a[i].x, a[i].k + 1)
        o[i].x += 1.0


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def swap_gs(a: Slice[V], o: DisjointSlice[V]) -> None:
    for i in thread.grid_stride(o):
        o[i] = V(a[i].y, a[i].x, a[i].k + 1)
        o[i].x += 1.0


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def ks(a: Slice[V], o: DisjointSlice[f32]) -> None:
    """A record input beside a 4-byte output: the output coarsens, the record's fields do not."""
    i = thread.index_1d()
    if i in o:
        o[i] = a[i].x * f32(a[i].k)

"""A kernel the checker must reject (a write to a read-only `Slice`): launching it raises CheckError."""

from __future__ import annotations

from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda a, c: len(a) == len(c))
@kernel
def writes_input(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        a[i] = 1.0  # rejected: az-shared-write
        c[i] = a[i]

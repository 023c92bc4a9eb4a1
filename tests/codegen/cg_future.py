"""String annotations (`from __future__ import annotations`) compile like real ones."""

from __future__ import annotations

import anodize as az


@az.launch_contract(domain=1, block=128, requires=lambda x, y: len(x) == len(y))
@az.kernel
def halve(x: az.Slice[az.f32], y: az.DisjointSlice[az.f32], k: az.i32) -> None:
    i = az.thread.index_1d()
    if i in y:
        acc: az.f32 = 0.0
        for j in range(k):
            acc += x[i] * 0.5
        y[i] = acc


class Holder:
    @staticmethod
    @az.kernel
    def indented(x: az.Slice[az.f32], y: az.DisjointSlice[az.f32]) -> None:
        i = az.thread.index_1d()
        if i in y:
            y[i] = x[i] + 1  # LINE:indented

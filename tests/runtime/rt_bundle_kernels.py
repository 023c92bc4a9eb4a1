"""Kernels over bundles, and the same kernel with separate slices (tests/runtime/test_bundles.py)."""

import anodize as az
from anodize import AtomicSlice, DisjointSlice, Index1D, Slice, f32, kernel, launch_contract, thread, u32


class State(az.Bundle):
    pos: Slice[f32]
    vel: Slice[f32]
    out: DisjointSlice[f32]
    hits: AtomicSlice[u32]


@az.func
def count(s: State, i: Index1D) -> None:
    if s.out[i] < 0.0:
        s.hits.add(0, u32(1))


@launch_contract(domain=1, block=256, requires=lambda s, dt: len(s.pos) == len(s.out) and len(s.vel) == len(s.out) and len(s.hits) >= 1)
@kernel
def advance(s: State, dt: f32) -> None:
    i = thread.index_1d()
    if i in s.out:
        s.out[i] = s.pos[i] + dt * s.vel[i]
        if s.out[i] < 0.0:
            s.hits.add(0, u32(1))


@launch_contract(domain=1, block=256, requires=lambda s, dt: len(s.pos) == len(s.out) and len(s.vel) == len(s.out) and len(s.hits) >= 1)
@kernel
def advance_helper(s: State, dt: f32) -> None:
    """The bundle passed whole to a helper."""
    i = thread.index_1d()
    if i in s.out:
        s.out[i] = s.pos[i] + dt * s.vel[i]
        count(s, i)


@launch_contract(domain=1, block=256, requires=lambda pos, vel, out, hits, dt: len(pos) == len(out) and len(vel) == len(out) and len(hits) >= 1)
@kernel
def advance_separate(pos: Slice[f32], vel: Slice[f32], out: DisjointSlice[f32], hits: AtomicSlice[u32], dt: f32) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = pos[i] + dt * vel[i]
        if out[i] < 0.0:
            hits.add(0, u32(1))


class Pair(az.Bundle):
    src: Slice[f32]
    dst: DisjointSlice[f32]


@launch_contract(domain=1, block=256, requires=lambda k, p: len(p.src) == len(p.dst))
@kernel
def scale_pair(k: f32, p: Pair) -> None:
    """A bundle after another parameter (tests/runtime/test_bundle_memo.py)."""
    i = thread.index_1d()
    if i in p.dst:
        p.dst[i] = k * p.src[i]

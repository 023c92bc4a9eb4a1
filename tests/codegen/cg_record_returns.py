"""Helpers that return records (tests/codegen/test_record_returns.py)."""

import anodize as az
from anodize import DisjointSlice, Slice, f32, f64, i32, kernel, launch_contract, thread


@az.record
class Vec2:
    x: f32
    y: f32


@az.record
class Body:
    p: Vec2
    ids: az.Array[i32, 2]
    m: f64


@az.func
def rotate(v: Vec2) -> Vec2:
    """A record built and returned."""
    return Vec2(-v.y, v.x)


@az.func
def halved(b: Body, k: i32) -> Body:
    """Returns a local (of a nested record), or a record another helper returned."""
    r = b
    r.m = b.m * 0.5
    r.ids[1] = r.ids[1] + k
    if k > 100:
        return b
    r.p = rotate(b.p)
    return r


@az.func
def pick(a: Slice[Body], i: az.Index1D):  # noqa: ANN201  (the return type inferred: Body)
    return a[i]


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def step(a: Slice[Body], o: DisjointSlice[Body]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = halved(a[i], i32(3))


@launch_contract(domain=1, block=64, requires=lambda a, o: len(a) == len(o))
@kernel
def fields(a: Slice[Body], o: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in o:
        b = pick(a, i)  # a helper's record bound to a local
        v: Vec2 = rotate(b.p)
        o[i] = v.x + v.y * 10.0 + f32(b.ids[0])

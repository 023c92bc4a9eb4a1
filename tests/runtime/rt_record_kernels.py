"""Kernels over records (tests/runtime/test_records.py)."""

import anodize as az
from anodize import DisjointSlice, Slice, f16, f32, f64, i8, i32, kernel, launch_contract, thread, u8


@az.record
class Vec3:
    x: f32
    y: f32
    z: f32


@az.record
class Particle:
    pos: Vec3
    vel: Vec3
    mass: f32
    id: i32


@az.record
class Mixed:
    flag: u8
    h: f16
    big: f64
    small: i8
    ids: az.Array[i32, 3]


@launch_contract(domain=1, block=128, requires=lambda p, dt, out: len(p) == len(out))
@kernel
def advance(p: Slice[Particle], dt: f32, out: DisjointSlice[Particle]) -> None:
    i = thread.index_1d()
    if i in out:
        q = p[i]
        v = Vec3(q.vel.x, q.vel.y - 9.8 * dt, q.vel.z)
        out[i] = Particle(pos=Vec3(q.pos.x + dt * v.x, q.pos.y + dt * v.y, q.pos.z + dt * v.z), vel=v, mass=q.mass, id=q.id)


@launch_contract(domain=1, block=128, requires=lambda m, out: len(m) == len(out))
@kernel
def mixed(m: Slice[Mixed], out: DisjointSlice[Mixed]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = m[i]
        out[i].flag = m[i].flag + u8(1)
        out[i].h = m[i].h * 2.0
        out[i].big -= 0.5
        out[i].small = -m[i].small
        out[i].ids[2] = m[i].ids[0] + m[i].ids[1]


@az.record
class Params:
    scale: f32
    shift: az.Array[f32, 2]
    n: i32


@launch_contract(domain=1, block=128, requires=lambda p, a, out: len(a) == len(out))
@kernel
def apply(p: Params, a: Slice[f32], out: DisjointSlice[f32]) -> None:
    """A record by value: its scalars are the kernel's parameters."""
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] * p.scale + p.shift[0] - p.shift[1] + f32(p.n)

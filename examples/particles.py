"""An array-of-structs particle step: one `@az.record` type shared by NumPy on the host and the
kernel on the device, no per-field arrays.  Each thread reads its particle, applies gravity
and a floor bounce, and writes the whole record back at its own element.
`anodize run examples/particles.py`."""

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, i32, kernel, launch_contract, thread


@az.record
class Particle:
    pos: az.Array[f32, 3]
    vel: az.Array[f32, 3]
    mass: f32
    bounces: i32


@launch_contract(domain=1, block=256, requires=lambda p, dt, out: len(p) == len(out))
@kernel
def particle_step(p: Slice[Particle], dt: f32, out: DisjointSlice[Particle]) -> None:
    i = thread.index_1d()
    if i in out:
        q = p[i]
        vy = q.vel[1] - 9.81 * dt
        y = q.pos[1] + dt * vy
        hit = y < 0.0
        out[i] = Particle(
            pos=(q.pos[0] + dt * q.vel[0], -y if hit else y, q.pos[2] + dt * q.vel[2]),
            vel=(q.vel[0], -vy * 0.5 if hit else vy, q.vel[2]),
            mass=q.mass,
            bounces=q.bounces + 1 if hit else q.bounces,
        )


def reference(h: np.ndarray, dt: np.float32) -> np.ndarray:
    """The same step in NumPy, field by field."""
    out = h.copy()
    vy = h["vel"][:, 1] - np.float32(9.81) * dt
    y = h["pos"][:, 1] + dt * vy
    hit = y < 0
    out["pos"][:, 0] = h["pos"][:, 0] + dt * h["vel"][:, 0]
    out["pos"][:, 1] = np.where(hit, -y, y)
    out["pos"][:, 2] = h["pos"][:, 2] + dt * h["vel"][:, 2]
    out["vel"][:, 1] = np.where(hit, -vy * np.float32(0.5), vy)
    out["bounces"] = h["bounces"] + hit
    return out


def main(n: int = 1 << 20, steps: int = 3) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(3)
    h = np.zeros(n, Particle.dtype)  # the record's C layout: NumPy's align=True dtype
    h["pos"] = rng.random((n, 3), dtype=np.float32)
    h["vel"] = rng.standard_normal((n, 3), dtype=np.float32)
    h["mass"] = rng.random(n, dtype=np.float32) + np.float32(0.5)
    a, b = dev.to_device(h), dev.empty(n, Particle)
    dt = np.float32(0.05)
    cfg = az.LaunchConfig.for_num_elems(n, block=256)
    ref = h
    for _ in range(steps):
        particle_step[cfg](a, dt, b)
        a, b = b, a
        ref = reference(ref, dt)
    res = a.to_host()
    for name in Particle.dtype.names:
        np.testing.assert_allclose(res[name], ref[name], rtol=1e-6, atol=1e-6)
    print(f"particles on {dev.describe()}: n={n}, {steps} steps of {Particle.dtype.itemsize}-byte records, "
          f"{int(res['bounces'].sum())} bounces, matches NumPy")
    return res["pos"]


if __name__ == "__main__":
    main()

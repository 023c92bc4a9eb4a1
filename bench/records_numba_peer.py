"""numba-cuda's particle step over the same structured array as examples/particles.py, in its
own process (numba-cuda needs NumPy < 2.5 on the H200 image):

    PYTHONPATH=/tmp/site_numpy python3 bench/records_numba_peer.py --log2n 24

Prints one JSON object: the event-timed milliseconds of each repetition.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

# the record's layout: examples/particles.py's Particle.dtype (align=True), spelled out so
# this process needs no anodize
DTYPE = np.dtype([("pos", "f4", (3,)), ("vel", "f4", (3,)), ("mass", "f4"), ("bounces", "i4")], align=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=24)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    from numba import cuda, float32

    @cuda.jit
    def particle_step(p, dt, out):
        i = cuda.grid(1)
        if i < out.size:
            q = p[i]
            vy = q.vel[1] - float32(9.81) * dt
            y = q.pos[1] + dt * vy
            hit = y < float32(0.0)
            o = out[i]
            o.pos[0] = q.pos[0] + dt * q.vel[0]
            o.pos[1] = -y if hit else y
            o.pos[2] = q.pos[2] + dt * q.vel[2]
            o.vel[0] = q.vel[0]
            o.vel[1] = -vy * float32(0.5) if hit else vy
            o.vel[2] = q.vel[2]
            o.mass = q.mass
            o.bounces = q.bounces + 1 if hit else q.bounces

    n = 1 << args.log2n
    rng = np.random.default_rng(3)
    h = np.zeros(n, DTYPE)
    h["pos"] = rng.random((n, 3), dtype=np.float32)
    h["vel"] = rng.standard_normal((n, 3), dtype=np.float32)
    h["mass"] = np.float32(1.0)
    a, b = cuda.to_device(h), cuda.device_array(n, DTYPE)
    dt = np.float32(0.05)
    blocks = (n + 255) // 256
    particle_step[blocks, 256](a, dt, b)
    cuda.synchronize()
    ms = []
    for _ in range(args.reps):
        e0, e1 = cuda.event(), cuda.event()
        e0.record()
        particle_step[blocks, 256](a, dt, b)
        e1.record()
        e1.synchronize()
        ms.append(cuda.event_elapsed_time(e0, e1))
    print(json.dumps({"n": n, "record_bytes": DTYPE.itemsize, "numba_particle_ms": ms}))


if __name__ == "__main__":
    main()

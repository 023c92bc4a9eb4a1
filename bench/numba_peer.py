"""numba-cuda peer, run in its own process (it needs NumPy < 2.5 on the H200 image).

    PYTHONPATH=/tmp/site_numpy python3 bench/numba_peer.py --log2n 28 --rows 16384 --cols 16384

Prints one JSON object: per kernel the list of event-timed milliseconds, and the
per-launch host cost of an empty and a 4-argument kernel.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=16384)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--launches", type=int, default=20000)
    args = ap.parse_args()
    from numba import cuda, float32

    n = 1 << args.log2n

    def vecadd_py(a, b, c):
        i = cuda.grid(1)
        if i < c.size:
            c[i] = a[i] + b[i]

    t0 = time.perf_counter()
    cuda.jit("void(float32[::1], float32[::1], float32[::1])")(vecadd_py)
    compile_ms = (time.perf_counter() - t0) * 1e3

    @cuda.jit
    def vecadd(a, b, c):
        i = cuda.grid(1)
        if i < c.size:
            c[i] = a[i] + b[i]

    @cuda.jit
    def saxpy(alpha, x, y, z):
        i = cuda.grid(1)
        if i < z.size:
            z[i] = alpha * x[i] + y[i]

    @cuda.jit
    def copy(x, z):
        i = cuda.grid(1)
        if i < z.size:
            z[i] = x[i]

    @cuda.jit
    def stencil(u, out):
        c, r = cuda.grid(2)
        rows, cols = u.shape
        if r < rows and c < cols:
            if 0 < r < rows - 1 and 0 < c < cols - 1:
                out[r, c] = float32(0.2) * (u[r, c] + u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1])
            else:
                out[r, c] = u[r, c]

    @cuda.jit
    def empty():
        pass

    @cuda.jit
    def four(a, b, c, n):
        pass

    rng = np.random.default_rng(0)
    a = cuda.to_device(rng.random(n, dtype=np.float32))
    b = cuda.to_device(rng.random(n, dtype=np.float32))
    c = cuda.device_array(n, np.float32)
    u = cuda.to_device(rng.random((args.rows, args.cols), dtype=np.float32))
    o = cuda.device_array((args.rows, args.cols), np.float32)
    g1 = (n + 255) // 256
    g2 = ((args.cols + 31) // 32, (args.rows + 7) // 8)
    runs = {
        "copy": lambda: copy[g1, 256](a, c),
        "vecadd": lambda: vecadd[g1, 256](a, b, c),
        "saxpy": lambda: saxpy[g1, 256](np.float32(2.5), a, b, c),
        "stencil2d": lambda: stencil[g2, (32, 8)](u, o),
    }
    out: dict[str, object] = {"compile_vecadd_ms": compile_ms}
    for name, fn in runs.items():
        fn()
        cuda.synchronize()
        ms = []
        for _ in range(args.reps):
            e0, e1 = cuda.event(), cuda.event()
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ms.append(cuda.event_elapsed_time(e0, e1))
        out[name] = ms
    small = cuda.device_array(1, np.float32)
    for name, fn in {"empty": lambda: empty[1, 1](), "four": lambda: four[1, 1](small, small, small, 1)}.items():
        fn()
        cuda.synchronize()
        samples = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(args.launches // 5):
                fn()
            samples.append((time.perf_counter() - t) / (args.launches // 5) * 1e6)
            cuda.synchronize()
        out[f"launch_{name}_us"] = samples
    print(json.dumps(out))


if __name__ == "__main__":
    main()

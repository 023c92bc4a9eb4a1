"""async_pipeline: overlap host-to-device copies, kernels and device-to-host copies. `anodize run examples/async_pipeline.py`.

A stream of data arrives in chunks.  Each chunk is a lazy three-step op,

    dev.copy_op(d_in, host_in[chunk]) .then( transform[cfg].op(d_in, d_out, ...) ) .then( dev.copy_op(host_out[chunk], d_out) )

run one after another (serial) and then submitted to an `az.StreamPool` and awaited
under asyncio (pipelined): while one chunk computes, the next one uploads and the
previous one downloads.  Host memory is pinned (`az.pinned_empty`), without which
a GPU copy cannot overlap.  The result is checked against NumPy, and the two wall
times are printed.  On the CPU backend the same code runs on worker threads.
"""

import asyncio
import time

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, i32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda x, out, iters: len(x) == len(out))
@kernel
def transform(x: Slice[f32], out: DisjointSlice[f32], iters: i32) -> None:
    for i in thread.grid_stride(out):
        v = x[i]
        k = 0
        while k < iters:
            v = v * 0.999 + 0.001
            k += 1
        out[i] = v


def reference(x: np.ndarray, iters: int) -> np.ndarray:
    """`iters` steps of v -> 0.999 v + 0.001, in closed form: 1 + (v - 1) * 0.999**iters."""
    return 1.0 + (x.astype(np.float64) - 1.0) * 0.999**iters


def main(n: int = 1 << 24, chunks: int = 8, lanes: int = 3, iters: int = 1024) -> np.ndarray:
    dev = az.device()
    size = -(-n // chunks)
    spans = [(s, min(n, s + size)) for s in range(0, n, size)]
    host_in = az.pinned_empty(dev, n, az.f32)  # page-locked on a GPU, so copies overlap
    host_in[:] = np.random.default_rng(7).random(n, dtype=np.float32) * 4
    host_out = az.pinned_empty(dev, n, az.f32)
    d_in = [dev.empty(hi - lo, az.f32) for lo, hi in spans]
    d_out = [dev.empty(hi - lo, az.f32) for lo, hi in spans]
    grid = min(1024, max(1, -(-size // 256)))

    def chunk(k: int) -> az.Op:
        lo, hi = spans[k]
        return (
            dev.copy_op(d_in[k], host_in[lo:hi])
            .then(transform[az.LaunchConfig(grid, 256)].op(d_in[k], d_out[k], iters))
            .then(dev.copy_op(host_out[lo:hi], d_out[k]))
        )

    def serial() -> None:
        for k in range(len(spans)):
            chunk(k).run()

    async def pipelined(pool: az.StreamPool) -> None:
        await asyncio.gather(*(chunk(k).submit(pool) for k in range(len(spans))))

    serial()  # warm-up: compile and load
    t0 = time.perf_counter()
    serial()
    t_serial = time.perf_counter() - t0
    ref = reference(host_in, iters)
    np.testing.assert_allclose(host_out, ref, rtol=1e-4)

    host_out[:] = 0
    with az.StreamPool(dev, lanes) as pool:
        asyncio.run(pipelined(pool))  # warm-up: the pool's streams
        host_out[:] = 0
        t0 = time.perf_counter()
        asyncio.run(pipelined(pool))
        t_pipe = time.perf_counter() - t0
    np.testing.assert_allclose(host_out, ref, rtol=1e-4)
    print(
        f"async_pipeline on {dev.describe()}: n={n} in {len(spans)} chunks on {lanes} lanes; "
        f"serial {t_serial * 1e3:.2f} ms, pipelined {t_pipe * 1e3:.2f} ms "
        f"(overlap speed-up {t_serial / t_pipe:.2f}x); matches NumPy"
    )
    return np.array(host_out)


if __name__ == "__main__":
    main()

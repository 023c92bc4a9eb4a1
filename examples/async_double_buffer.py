"""async_double_buffer: a double-buffered host-to-device pipeline written with `and_then`. `anodize run examples/async_double_buffer.py`.

Data arrives in chunks.  Two device buffers take turns (chunk k uses slot k % 2); each chunk
is one op,

    dev.copy_op(d_in[slot], host_in[chunk])                      # upload
      .and_then(lambda d: transform[cfg].call_op(d, iters))      # the kernel; its output allocated
      .and_then(lambda out: dev.copy_op(host_out[chunk], out))   # download

`and_then` receives the previous op's result (the uploaded Buffer, then the kernel's output)
and returns the next op, queued on the same stream.  The chunks are submitted with
`az.DependencyChains(2)`: chunk k + 2 writes the slot chunk k still uses, so it is ordered
after it, on the same stream and without an event, while chunk k + 1 (the other slot) runs
on the other stream: its upload overlaps this chunk's kernel.  The same ops run one after
another (serial) first; both results are checked against NumPy and the two times printed.
Host memory is pinned (`az.pinned_empty`): a GPU copy from pageable memory cannot overlap.
"""

import time

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, i32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda x, out, iters: len(x) == len(out),
                 outputs=lambda x, iters: {"out": ((len(x),), f32)})
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


def main(n: int = 1 << 24, chunks: int = 16, iters: int = 256) -> np.ndarray:
    dev = az.device()
    size = -(-n // chunks)
    spans = [(s, min(n, s + size)) for s in range(0, n, size)]
    host_in = az.pinned_empty(dev, n, az.f32)
    host_in[:] = np.random.default_rng(11).random(n, dtype=np.float32) * 4
    host_out = az.pinned_empty(dev, n, az.f32)
    slots = [dev.empty(size, az.f32) for _ in range(2)]  # the double buffer
    grid = min(1024, max(1, -(-size // 256)))
    cfg = az.LaunchConfig(grid, 256)

    def chunk(k: int) -> az.Op:
        lo, hi = spans[k]
        d_in = slots[k % 2][: hi - lo]
        return (
            dev.copy_op(d_in, host_in[lo:hi])
            .and_then(lambda d: transform[cfg].call_op(d, iters))
            .and_then(lambda out: dev.copy_op(host_out[lo:hi], out))
        )

    def serial() -> None:
        for k in range(len(spans)):
            chunk(k).run()

    def pipelined(policy: az.DependencyChains) -> float:
        t = time.perf_counter()
        handles = [chunk(k).submit(policy) for k in range(len(spans))]
        queued = time.perf_counter() - t  # the host's share: when it nears the total, the host is the limit
        for h in handles:
            h.wait()
        return queued

    serial()  # warm-up: compile and load
    t0 = time.perf_counter()
    serial()
    t_serial = time.perf_counter() - t0
    ref = reference(host_in, iters)
    np.testing.assert_allclose(host_out, ref, rtol=1e-4)

    host_out[:] = 0
    policy = az.DependencyChains(2)
    pipelined(policy)  # warm-up: the policy's streams
    host_out[:] = 0
    t0 = time.perf_counter()
    t_queue = pipelined(policy)
    t_pipe = time.perf_counter() - t0
    policy.close()
    np.testing.assert_allclose(host_out, ref, rtol=1e-4)
    print(
        f"async_double_buffer on {dev.describe()}: n={n} in {len(spans)} chunks, 2 slots; "
        f"serial {t_serial * 1e3:.2f} ms, double-buffered {t_pipe * 1e3:.2f} ms "
        f"(speed-up {t_serial / t_pipe:.2f}x; all chunks queued after {t_queue * 1e3:.2f} ms); matches NumPy"
    )
    return np.array(host_out)


if __name__ == "__main__":
    main()

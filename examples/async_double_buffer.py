"""async_double_buffer: a multi-buffered host-to-device pipeline written with `and_then`. `anodize run examples/async_double_buffer.py`.

Data arrives in chunks.  `slots` device buffers take turns (chunk k uses slot k % slots);
each chunk is one op,

    dev.copy_op(d_in[slot], host_in[chunk])                      # upload
      .and_then(lambda d: transform[cfg].call_op(d, iters))      # the kernel; its output allocated
      .and_then(lambda out: dev.copy_op(host_out[chunk], out))   # download

`and_then` receives the previous op's result (the uploaded Buffer, then the kernel's output)
and returns the next op, queued on the same stream.  The chunks are submitted with
`az.DependencyChains(slots)`: chunk k + slots writes the slot chunk k still uses, so it is
ordered after it, on the same stream and without an event, while the chunks of the other
slots run on the other streams: one chunk's upload, another's kernel and a third's download
use the GPU's three engines (host-to-device copy, SMs, device-to-host copy) at once.  Host
memory is pinned (`az.pinned_empty`): a GPU copy from pageable memory cannot overlap.

What bounds the speed-up.  With one stream per slot a stream runs its chunk's three stages
one after another, so with per-chunk stage times h, k, d (upload, kernel, download) a chunk
costs at best max(h, k, d, (h + k + d) / slots): two slots (a double buffer) can never beat
2x the serial time, three reach max(h, k, d) (3x when balanced).  The default is three slots;
`slots=2` is the classic double buffer.  `stages()` measures h, k and d (each stage of every
chunk queued alone on one stream), `ideal_overlapped` computes the best overlapped time from
them, and `main` prints both beside the measured serial and overlapped times (medians of
`rounds`, after warm-up rounds).  When "all chunks queued after" nears the overlapped time,
the host's queueing is the limit, not the GPU: use larger chunks.
"""

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

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


def ideal_overlapped(h: float, k: float, d: float, chunks: int, slots: int) -> float:
    """The best time of the pipeline when each chunk's upload, kernel and download take h, k
    and d: each engine (copy in, SMs, copy out) does one thing at a time, in chunk order,
    and a chunk's stages run in order on its slot's stream, after the chunk `slots` before."""
    engine = [0.0, 0.0, 0.0]
    stream = [0.0] * slots
    for c in range(chunks):
        t = stream[c % slots]
        for e, dur in enumerate((h, k, d)):
            t = max(t, engine[e]) + dur
            engine[e] = t
        stream[c % slots] = t
    return max(engine)


@dataclass
class PipelineTimes:
    """Seconds: the serial and overlapped times (medians), the host's queueing share of the
    overlapped run, and one chunk's upload, kernel and download (`stages()`)."""

    chunks: int
    slots: int
    serial: float
    overlapped: float
    queued: float
    h2d: float
    kernel: float
    d2h: float

    @property
    def speedup(self) -> float:
        return self.serial / self.overlapped

    @property
    def stage_sum(self) -> float:
        """The GPU time of all chunks' stages one after another (no host cost, no overlap)."""
        return self.chunks * (self.h2d + self.kernel + self.d2h)

    @property
    def ideal(self) -> float:
        return ideal_overlapped(self.h2d, self.kernel, self.d2h, self.chunks, self.slots)


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(n: int = 1 << 26, chunks: int = 16, iters: int = 256, slots: int = 3, rounds: int = 3,
            warmup: int = 2, warm_s: float = 0.0, dev: az.Device | None = None,
            check: bool = True) -> tuple[PipelineTimes, np.ndarray]:
    """Run the pipeline serially and overlapped (warm-up rounds: at least `warmup`, and for at
    least `warm_s` seconds, so that a GPU idle until now is at its clocks; then `rounds` timed,
    the two forms taking turns), check both against NumPy, and time each stage alone.  `dev`:
    the device (default `az.device()`); `check=False` skips the comparison (a fake driver that
    runs no kernel: bench/and_then_chain.py --device fake)."""
    dev = az.device() if dev is None else dev
    size = -(-n // chunks)
    spans = [(s, min(n, s + size)) for s in range(0, n, size)]
    host_in = az.pinned_empty(dev, n, az.f32)
    host_in[:] = np.random.default_rng(11).random(n, dtype=np.float32) * 4
    host_out = az.pinned_empty(dev, n, az.f32)
    bufs = [dev.empty(size, az.f32) for _ in range(slots)]  # the multi-buffer
    grid = min(1024, max(1, -(-size // 256)))
    cfg = az.LaunchConfig(grid, 256)
    ref = reference(host_in, iters)

    def upload(k: int) -> az.Op:
        lo, hi = spans[k]
        op: az.Op = dev.copy_op(bufs[k % slots][: hi - lo], host_in[lo:hi])
        return op

    def chunk(k: int) -> az.Op:
        lo, hi = spans[k]
        return (
            upload(k)
            .and_then(lambda d: transform[cfg].call_op(d, iters))
            .and_then(lambda out: dev.copy_op(host_out[lo:hi], out))
        )

    def compute(k: int) -> az.Op:  # the kernel alone, on what the slot holds (`stages`)
        lo, hi = spans[k]
        return transform[cfg].call_op(bufs[k % slots][: hi - lo], iters)

    def download(k: int, out: az.Buffer) -> az.Op:
        lo, hi = spans[k]
        op: az.Op = dev.copy_op(host_out[lo:hi], out)
        return op

    def serial() -> None:
        for k in range(len(spans)):
            chunk(k).run()

    policy = az.DependencyChains(slots)
    queued: list[float] = []

    def pipelined() -> None:
        t = time.perf_counter()
        handles = [chunk(k).submit(policy) for k in range(len(spans))]
        queued.append(time.perf_counter() - t)  # the host's share: near the total, the host is the limit
        for h in handles:
            h.wait()

    t_warm = time.perf_counter()
    done = 0
    while done < warmup or time.perf_counter() - t_warm < warm_s:  # compile and load, the streams, the clocks
        serial()
        pipelined()
        done += 1
    queued.clear()
    t_serial, t_pipe = [], []
    for r in range(max(1, rounds)):  # (the last round's results are checked)
        last = r == max(1, rounds) - 1
        host_out[:] = 0
        t_serial.append(_timed(serial))
        if last and check:
            np.testing.assert_allclose(host_out, ref, rtol=1e-4)
            host_out[:] = 0
        t_pipe.append(_timed(pipelined))
        if last and check:
            np.testing.assert_allclose(host_out, ref, rtol=1e-4)
    policy.close()
    h2d, kern, d2h = stages(len(spans), upload, compute, download, max(1, rounds))
    times = PipelineTimes(len(spans), slots, statistics.median(t_serial), statistics.median(t_pipe),
                          statistics.median(queued), h2d, kern, d2h)
    return times, np.array(host_out)


def stages(chunks: int, upload: Callable[[int], az.Op], compute: Callable[[int], az.Op],
           download: Callable[[int, az.Buffer], az.Op], rounds: int) -> tuple[float, float, float]:
    """One chunk's upload, kernel and download, in seconds: every chunk's stage queued alone
    on one stream (the host queues while the GPU works), the median total over `rounds`,
    divided by the number of chunks."""
    policy = az.SingleStream()
    outs: list[az.Buffer] = []

    def wait_all(ops: list[az.Op]) -> list[az.Buffer]:
        return [h.wait() for h in [op.submit(policy) for op in ops]]

    def ups() -> None:
        wait_all([upload(k) for k in range(chunks)])

    def kernels() -> None:
        outs[:] = wait_all([compute(k) for k in range(chunks)])

    def downs() -> None:
        wait_all([download(k, outs[k]) for k in range(chunks)])

    per = [statistics.median(_timed(f) for _ in range(rounds)) / chunks for f in (ups, kernels, downs)]
    policy.close()
    return per[0], per[1], per[2]


def main(n: int = 1 << 26, chunks: int = 16, iters: int = 256, slots: int = 3, rounds: int = 3,
         dev: az.Device | None = None, check: bool = True) -> np.ndarray:
    dev = az.device() if dev is None else dev
    t, out = measure(n, chunks, iters, slots, rounds, dev=dev, check=check)
    ms = 1e3
    print(
        f"async_double_buffer on {dev.describe()}: n={n} in {t.chunks} chunks, {t.slots} slots; "
        f"serial {t.serial * ms:.2f} ms, overlapped {t.overlapped * ms:.2f} ms "
        f"(speed-up {t.speedup:.2f}x; all chunks queued after {t.queued * ms:.2f} ms){'; matches NumPy' if check else ' (not checked)'}"
    )
    print(
        f"  per chunk: upload {t.h2d * ms:.3f} ms, kernel {t.kernel * ms:.3f} ms, download {t.d2h * ms:.3f} ms; "
        f"stages one after another {t.stage_sum * ms:.2f} ms; ideal overlapped ({t.slots} slots) {t.ideal * ms:.2f} ms "
        f"(ideal speed-up {t.stage_sum / t.ideal:.2f}x; measured overlapped / ideal {t.overlapped / t.ideal:.2f})"
    )
    return out


if __name__ == "__main__":
    main()

"""Host cost per chunk of examples/async_double_buffer.py's pipelined submission, on the fake driver.

    python3 bench/pipeline_host.py [--n 4096] [--chunks 16] [--slots 3] [--rounds 200] [--profile]

Each chunk is the example's op (upload, `transform[cfg].call_op`, download, chained with
`and_then`) submitted to `az.DependencyChains(slots)`; the figure is the issuing thread's CPU
time (`time.thread_time`) from building the first chunk's op to the last chunk's `submit`
returning, divided by the chunks: the Python the host spends per chunk before the GPU can
start.  tests/fakecuda.py's driver queues nothing (its copies are host memcpys, its kernels
are not run), so a small `--n` leaves only the host path; a real driver's calls add to it.
`--profile` prints cProfile's top functions (tottime, then cumtime) instead.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096, help="elements in all (small: the host path only)")
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--slots", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT / "tests"))
    import cuda.core
    import fakecuda

    import anodize as az

    fakecuda.run_entry = lambda *a: None
    dev = fakecuda.install(fakecuda.Patch())[0]
    cuda.core.launch = lambda *a: None
    spec = importlib.util.spec_from_file_location("_double_buffer", ROOT / "examples" / "async_double_buffer.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    n, chunks, slots = args.n, args.chunks, args.slots
    size = -(-n // chunks)
    spans = [(s, min(n, s + size)) for s in range(0, n, size)]
    host_in = az.pinned_empty(dev, n, az.f32)
    host_in[:] = 1
    host_out = az.pinned_empty(dev, n, az.f32)
    bufs = [dev.empty(size, az.f32) for _ in range(slots)]
    cfg = az.LaunchConfig(min(1024, max(1, -(-size // 256))), 256)
    transform = mod.transform

    def chunk(k: int) -> Any:  # (the example's `chunk`)
        lo, hi = spans[k]
        return (
            dev.copy_op(bufs[k % slots][: hi - lo], host_in[lo:hi])
            .and_then(lambda d: transform[cfg].call_op(d, 256))
            .and_then(lambda out: dev.copy_op(host_out[lo:hi], out))
        )

    policy = az.DependencyChains(slots)

    def one_round() -> float:
        t = time.thread_time()
        handles = [chunk(k).submit(policy) for k in range(len(spans))]
        queued = time.thread_time() - t
        for h in handles:
            h.wait()
        return queued

    for _ in range(5):
        one_round()
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.rounds):
            one_round()
        prof.disable()
        stats = pstats.Stats(prof)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumtime").print_stats(40)
    else:
        times = [one_round() for _ in range(args.rounds)]
        per = 1e6 / len(spans)
        print(f"pipeline host cost ({len(spans)} chunks, {slots} slots, n={n}, fake driver, thread CPU time): "
              f"median {statistics.median(times) * per:.1f} us/chunk, min {min(times) * per:.1f} over {args.rounds} rounds")
    policy.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

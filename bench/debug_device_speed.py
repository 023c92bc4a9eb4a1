"""The debug device's speed beside the CPU backend's: GPU threads per second on vecadd.

    python3 bench/debug_device_speed.py [--n 20000] [--reps 3]

vecadd (examples/vecadd.py) runs `n` threads, one element each, on `az.device("debug")`
(the typed IR interpreted in Python, every access bounds- and race-checked) and on
`az.device("cpu")` (the same IR through LLVM, JIT-compiled); the best of `reps` timed
launches after one warm-up launch (which compiles), to the result on the host.  Also
reduce_sum (examples/reduce_sum.py: barriers, warp shuffles, shared memory), where the
debug device runs one Python thread per GPU thread of each block.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

import anodize as az  # noqa: E402
import reduce_sum  # noqa: E402
import vecadd  # noqa: E402


def best(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm-up: compile (CPU) / check and type (debug)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    a_h, b_h = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    x_h = rng.random(4 * 256 * 4, dtype=np.float32)
    print(f"{'device':<8} {'kernel':<11} {'threads':>8} {'seconds':>9} {'threads/s':>12}")
    rows = {}
    for kind in ("cpu", "debug"):
        dev = az.device(kind)
        a, b, c = dev.to_device(a_h), dev.to_device(b_h), dev.empty(n, az.f32)
        cfg = az.LaunchConfig.for_num_elems(n, block=256)

        def run_vecadd() -> None:
            vecadd.vecadd[cfg](a, b, c)
            c.to_host()

        s = best(run_vecadd, args.reps)
        np.testing.assert_array_equal(c.to_host(), a_h + b_h)
        rows[kind] = n / s
        print(f"{kind:<8} {'vecadd':<11} {n:>8} {s:>9.4f} {n / s:>12,.0f}")
        x, total = dev.to_device(x_h), dev.zeros(1, az.f32)
        rcfg = az.LaunchConfig(grid=4, block=256)

        def run_reduce() -> None:
            reduce_sum.reduce_sum[rcfg](x, total)
            total.to_host()

        s = best(run_reduce, 1)
        print(f"{kind:<8} {'reduce_sum':<11} {1024:>8} {s:>9.4f} {1024 / s:>12,.0f}")
    print(f"vecadd: the debug device runs {rows['cpu'] / rows['debug']:,.0f}x slower than the CPU backend")


if __name__ == "__main__":
    main()

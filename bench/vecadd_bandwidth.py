"""vecadd bandwidth on the GPU, side by side with CuPy's `add` and a device-to-device copy.

    python3 bench/vecadd_bandwidth.py [--log2n 28] [--reps 20]

Reports the median (and min/max) of `reps` event-timed runs for n = 2**log2n f32,
counting 3 arrays (2 read, 1 written) for vecadd and add, 2 for the copy; the
registers ptxas gives vecadd; and the cold compile time, source to PTX, measured
in a fresh interpreter.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from suite import time_events  # noqa: E402  (one event-timing helper for every benchmark)


def cold_compile_ms() -> float:
    code = (
        "import time, sys; sys.path.insert(0, %r)\n"
        "import vecadd\n"
        "t = time.perf_counter(); k = vecadd.vecadd.compile(arch='sm_90')\n"
        "print((time.perf_counter() - t) * 1e3)\n"
    ) % str(ROOT / "examples")
    env = dict(os.environ, ANODIZE_CACHE="off")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(r.stdout.strip().splitlines()[-1])


def row(name: str, ms: list[float], nbytes: int) -> str:
    med = statistics.median(ms)
    gbs = nbytes / (med * 1e-3) / 1e9
    return f"| {name} | {med:.4f} | {min(ms):.4f} | {max(ms):.4f} | {gbs:,.0f} |"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    n = 1 << args.log2n

    import anodize as az
    from vecadd import vecadd

    dev = az.device(0)
    rng = np.random.default_rng(0)
    a_h = rng.random(n, dtype=np.float32)
    b_h = rng.random(n, dtype=np.float32)
    a, b = dev.to_device(a_h), dev.to_device(b_h)
    c = dev.empty(n, az.f32)
    cfg = az.LaunchConfig.for_num_elems(n, block=256)
    launch = vecadd[cfg]
    az_ms = time_events(lambda: launch(a, b, c), args.reps, "anodize", dev.stream)
    np.testing.assert_array_equal(c.to_host(), a_h + b_h)

    lines = [f"n = 2^{args.log2n} f32, {args.reps} event-timed runs each, median/min/max in ms", ""]
    lines.append("| kernel | median ms | min | max | GB/s (median) |")
    lines.append("|---|---|---|---|---|")
    lines.append(row("anodize vecadd (safe launch)", az_ms, 3 * 4 * n))
    try:
        import cupy as cp

        ca, cb = cp.asarray(a_h), cp.asarray(b_h)
        cc = cp.empty_like(ca)
        cp_ms = time_events(lambda: cp.add(ca, cb, out=cc), args.reps, "cupy")
        copy_ms = time_events(lambda: cp.copyto(cc, ca), args.reps, "cupy")
        lines.append(row("CuPy add", cp_ms, 3 * 4 * n))
        lines.append(row("CuPy copy (device-to-device ceiling)", copy_ms, 2 * 4 * n))
        ratio = statistics.median(cp_ms) / statistics.median(az_ms)
        ceil = (2 * 4 * n / statistics.median(copy_ms)) / (3 * 4 * n / statistics.median(az_ms))
        lines.append("")
        lines.append(f"anodize vecadd / CuPy add speed ratio: {ratio:.2f}x; "
                     f"vecadd reaches {100 / ceil:.1f}% of the copy bandwidth")
    except ImportError:
        lines.append("(CuPy not installed: no peer row)")
    ck = vecadd.compile(arch="sm_90")
    lines.append(f"vecadd registers (ptxas -v, sm_90): {ck.resources.registers}, "
                 f"bounds checks left: {ck.bounds_checks}")
    lines.append(f"cold compile of vecadd, source to PTX, fresh interpreter: {cold_compile_ms():.1f} ms")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

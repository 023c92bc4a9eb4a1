"""The autotuner on the GPU (issue 31's targets), beside Triton's autotuner in one run.

    python3 bench/autotune_bench.py [--shapes 1024,1024,1024;4096,4096,4096;...] [--rounds 10]

1. Cold tuning of examples/autotune_gemm.py's GEMM over its 8 configurations (a fresh process,
   the compile cache off: every configuration checked, compiled in parallel and timed).
2. Warm launch cost: the autotuned launch (key lookup, grid function, the chosen launcher) beside
   a launch of the chosen specialisation with the same grid function, host time per call.
3. For each GEMM shape (f16 in, f32 accumulate, f16 out): the autotuned kernel beside Triton's
   tutorial matmul autotuned over the same 8 (BM, BN, BK, warps, stages) points, and beside each
   of anodize's single configurations (the best single one: the autotuner must not lose to it by
   more than the noise).  Medians of interleaved rounds of 10-call batches between events.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

SHAPES = "1024,1024,1024;4096,4096,4096;8192,8192,8192;4096,4096,512;8192,1024,4096"

_COLD = """
import os, sys, time
os.environ["ANODIZE_CACHE"] = "off"
sys.path.insert(0, {ex!r})
import anodize as az
t0 = time.perf_counter()
import autotune_gemm as g
import numpy as np
dev = az.device()
m = n = k = 4096
grid, args = g.inputs(dev, m, n, k)
dev.synchronize()
t1 = time.perf_counter()
rep = g.gemm.tune(grid, *args)
t2 = time.perf_counter()
print("COLD", t2 - t1, rep.compile_seconds, repr(rep.winner))
print(rep.table())
"""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--skip-cold", action="store_true")
    args = p.parse_args()

    print("== 1. cold tuning, 8 configurations, GEMM 4096^3 f16 (fresh process, cache off)")
    if not args.skip_cold:
        out = subprocess.run([sys.executable, "-c", _COLD.format(ex=str(ROOT / "examples"))], capture_output=True, text=True)
        print(out.stdout, out.stderr[-3000:] if out.returncode else "")

    import numpy as np
    import torch

    import anodize as az
    import autotune_gemm as g
    from cuda.core import EventOptions

    dev = az.device()
    opts = EventOptions(timing_enabled=True)

    def batch_ms(fn, n: int = 10) -> float:  # noqa: ANN001
        e0 = dev.stream.record(options=opts)
        for _ in range(n):
            fn()
        e1 = dev.stream.record(options=opts)
        e1.sync()
        return float(e1 - e0) / n

    def torch_ms(fn, n: int = 10) -> float:  # noqa: ANN001
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n):
            fn()
        e1.record()
        e1.synchronize()
        return e0.elapsed_time(e1) / n

    print("\n== 2. warm launch host cost (tiny GEMM 128^3: the GPU waits on the host)")
    grid, a3 = g.inputs(dev, 128, 128, 128)
    g.gemm[grid](*a3)
    dev.synchronize()
    best = g.gemm.best(*a3)
    k, rest = g.gemm._tuner._specialised(best, a3)
    direct = k[grid(best)]
    tuned = g.gemm[grid]
    for name, fn in (("autotuned", lambda: tuned(*a3)), ("chosen specialisation", lambda: direct(*rest))):
        for _ in range(200):
            fn()
        dev.synchronize()
        ts = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(2000):
                fn()
            ts.append((time.perf_counter() - t) / 2000 * 1e6)
            dev.synchronize()
        print(f"  {name:<24} {statistics.median(ts):7.2f} us/launch (min {min(ts):.2f})")

    print("\n== 3. GEMM shapes: autotuned anodize vs Triton autotuned over the same 8 points (f16, TFLOP/s)")
    from tile_bench import triton_matmul  # Triton's tutorial kernel, the same program as ours

    tri = triton_matmul([c.to_json() for c in g.CONFIGS])
    for shape in args.shapes.split(";"):
        m, n, kk = (int(x) for x in shape.split(","))
        grid, targs = g.inputs(dev, m, n, kk)
        a, b, c, kval = targs
        at = torch.from_dlpack(a) if hasattr(torch, "from_dlpack") else None
        bt = torch.from_dlpack(b)
        ct = torch.empty((m, n), dtype=torch.float16, device="cuda")
        t0 = time.perf_counter()
        g.gemm[grid](*targs)
        dev.synchronize()
        tune_s = time.perf_counter() - t0
        tri(at, bt, ct)
        torch.cuda.synchronize()
        ref = (at.float() @ bt.float())
        ok = torch.allclose(torch.from_dlpack(c).float(), ref, rtol=2e-2, atol=2e-2 * (kk ** 0.5)) and torch.allclose(ct.float(), ref, rtol=2e-2, atol=2e-2 * (kk ** 0.5))
        report = g.gemm.reports[g.gemm._tuner.key_of(targs)]
        single = {r.config: r.time_ms for r in report.records if r.time_ms is not None}
        launch = g.gemm[grid]
        kw, rest = g.gemm._tuner._specialised(report.winner, targs)
        chosen = kw[grid(report.winner)]  # the winner's specialisation launched directly, timed the same way
        ours, theirs, direct = [], [], []
        for r in range(args.rounds):
            trio = [(ours, lambda: batch_ms(lambda: launch(*targs))), (theirs, lambda: torch_ms(lambda: tri(at, bt, ct))),
                    (direct, lambda: batch_ms(lambda: chosen(*rest)))]
            for out, fn in (trio if r % 2 == 0 else trio[::-1]):
                out.append(fn())
        flops = 2 * m * n * kk
        mo, mt, md = statistics.median(ours), statistics.median(theirs), statistics.median(direct)
        best_single = min(single.values()) if single else float("nan")
        print(f"  {m}x{n}x{kk}: anodize {flops / mo / 1e9:7.1f} TFLOP/s ({mo:.4f} ms, winner {report.winner!r}, tuned in {tune_s:.2f} s)"
              f" | Triton {flops / mt / 1e9:7.1f} ({mt:.4f} ms) | ratio {mt / mo:.3f}x | best single config in tuning {best_single:.4f} ms"
              f" (chosen/best {single.get(report.winner, float('nan')) / best_single:.3f}) | the winner launched directly {md:.4f} ms"
              f" (autotuned/direct {mo / md:.3f}) | results {'ok' if ok else 'MISMATCH'}")
        for r in report.records:
            print(f"      {r.config!r:<70} {r.status:<8} {r.time_ms if r.time_ms is not None else '-'} {r.reason[:80]}")
    np.random.seed(0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

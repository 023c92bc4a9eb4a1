"""Issue 16's two SIMT targets on the GPU in one short run (device windows): sgemm 4096^3 f32
beside cuBLAS f32 (`torch.matmul`, TF32 off) and softmax 4096x4096 f32 beside `torch.softmax`,
each example beside the variants named on the command line.

    python3 bench/simt_quick.py [--reps 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import anodize as az  # noqa: E402
from thread_tiles_quick import sgemm_once, softmax_once, variant  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=70.0, help="seconds; variants past it are skipped")
    args = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import sgemm as G
    import softmax as S

    t0 = time.perf_counter()
    dev = az.device(0)
    rng = np.random.default_rng(0)
    G.main(m=300, k=200, n=260)  # correctness at odd sizes first
    S.main(rows=64, cols=5000)
    sgemm_once(G, dev, rng, args.reps, " (the example)")
    softmax_once(S, dev, rng, args.reps, " (the example)")
    tries = [
        ("sgemm, no min_blocks_per_sm", lambda: sgemm_once(variant("sgemm", "nohint", [("    min_blocks_per_sm=2,\n", "")]), dev, rng, args.reps, " (no min_blocks_per_sm)")),
        ("sgemm previous", lambda: sgemm_once(__import__("sgemm_prev"), dev, rng, args.reps, " (previous example)")),
    ]
    for what, fn in tries:  # a failure here is only reported
        if time.perf_counter() - t0 > args.budget:
            print(f"{what}: skipped (time budget)")
            continue
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            print(f"{what}: {type(e).__name__}: {e}")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()

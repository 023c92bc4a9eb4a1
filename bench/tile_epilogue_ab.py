"""The tile GEMM's epilogues side by side on the GPU: per-element predicated stores
(`ANODIZE_TILE_EPILOGUE=direct`), the same with one column limit a fragment row
(`ANODIZE_TILE_STORE_LIMIT=1`) and the tile staged through shared memory (`staged`, the default), each its
cold compile and its 4096^3 f16 time.

    python3 bench/tile_epilogue_ab.py [--rounds 3]

Per round and mode, alternating: bench/tile_bench.py's `cold_compile` (a fresh interpreter,
cache off: the f16 128x256x64 compile first in the process, then bf16), and a fresh
interpreter that runs examples/tile_gemm.py's kernel at 4096^3 and at a ragged 1283 x 773 x
4095, checks both against torch, and times 4096^3 (10 batches of 10 calls between events,
median).  Prints the medians a mode and its SASS facts; exits 1 if a check failed.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

_RUN = """
import sys, statistics, torch
sys.path.insert(0, {ex!r})
import anodize as az
import tile_gemm
k = tile_gemm.gemm.specialize(T="f16", BM=128, BN=256, BK=64)
def check(m, n, kk):
    a = torch.randn(m, kk, device="cuda", dtype=torch.float16)
    b = torch.randn(kk, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    launch = k[az.LaunchConfig.for_tiles((m, n), (128, 256))]
    launch(a, b, c, kk)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), (a @ b).float(), rtol=2e-2, atol=0.5)
    return lambda: launch(a, b, c, kk)
check(1283, 773, 4095)
fn = check(4096, 4096, 4096)
ms = []
for i in range(11):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(10):
        fn()
    e1.record()
    e1.synchronize()
    if i:
        ms.append(e0.elapsed_time(e1) / 10)
art = k.compile()
print(repr({{"ms": statistics.median(ms), "regs": art.resources.registers, "spills": art.resources.spill_stores}}))
"""


def main() -> None:
    from tile_bench import cold_compile

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    modes = {"direct": ("direct", "0"), "limit": ("direct", "1"), "staged": ("staged", "0")}
    got: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    failed = False
    for _ in range(args.rounds):
        for mode in modes:
            os.environ["ANODIZE_TILE_EPILOGUE"], os.environ["ANODIZE_TILE_STORE_LIMIT"] = modes[mode]
            try:
                cold = cold_compile()
                out = subprocess.run([sys.executable, "-c", _RUN.format(ex=str(ROOT / "examples"))], capture_output=True,
                                     text=True, check=True)
                run = ast.literal_eval(out.stdout.strip().splitlines()[-1])
            except subprocess.CalledProcessError as e:
                print(f"{mode}: FAILED\n{e.stderr[-3000:]}", flush=True)
                failed = True
                continue
            got[mode].append({"first": cold["first"] * 1e3, "next": cold["next"] * 1e3, **run})
            print(f"{mode}: first {cold['first'] * 1e3:.0f} ms, next {cold['next'] * 1e3:.0f} ms, "
                  f"GEMM 4096^3 {run['ms']:.4f} ms ({run['regs']} registers, {run['spills']} bytes spilled)", flush=True)
    for mode in modes:
        if got[mode]:
            med = {key: statistics.median(r[key] for r in got[mode]) for key in ("first", "next", "ms")}
            print(f"| {mode} | cold first {med['first']:.0f} ms | next {med['next']:.0f} ms | GEMM 4096^3 {med['ms']:.4f} ms "
                  f"({2 * 4096**3 / med['ms'] / 1e9:.0f} TFLOP/s) |", flush=True)
    sys.exit(1 if failed or not all(got.values()) else 0)


if __name__ == "__main__":
    main()

"""Cold compile of the example GEMM tile kernel, by stage, in fresh interpreters (bench/tile_bench.py's
`cold_compile`), `--runs` times; then ptxas alone on its PTX with a few option sets.

    python3 bench/cold_gemm.py [--runs 3] [--arch sm_90]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "examples"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--ptxas-options", action="store_true")
    args = ap.parse_args()
    from tile_bench import cold_compile

    import os

    rows: dict[str, list[float]] = {}
    for i in range(2 * args.runs):
        mode = "overlap" if i % 2 else "checker first"  # the default, the checker beside ptxas; ANODIZE_COMPILE_OVERLAP=0
        os.environ["ANODIZE_COMPILE_OVERLAP"] = "1" if i % 2 else "0"
        r = cold_compile(args.arch)
        rows.setdefault(f"{mode} first", []).append(r["first"] * 1e3)
        rows.setdefault(f"{mode} next", []).append(r["next"] * 1e3)
        print(f"[{mode}] no hooks: first {r['first'] * 1e3:.0f} ms, next {r['next'] * 1e3:.0f} ms", flush=True)
        r = cold_compile(args.arch, hooks=True)
        st = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in r["first_stages"].items())
        nx = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in r["next_stages"].items())
        print(f"[{mode}] hooked: first {r['first'] * 1e3:.0f} ms ({st}; hooks' imports {r['hooks'] * 1e3:.0f})  next {r['next'] * 1e3:.0f} ms ({nx})", flush=True)
    os.environ.pop("ANODIZE_COMPILE_OVERLAP")
    for _ in range(args.runs):  # the 256 x 128 tile over 16 warps (bench/tile_gemm_wide.py), the default (overlap)
        r = cold_compile(args.arch, "tile_gemm_wide", "")
        rows.setdefault("256x128 16 warps first", []).append(r["first"] * 1e3)
        rows.setdefault("256x128 16 warps next", []).append(r["next"] * 1e3)
        r = cold_compile(args.arch, "tile_gemm_wide", "", hooks=True)
        st = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in r["first_stages"].items())
        print(f"[256x128, 16 warps] first {r['first'] * 1e3:.0f} ms ({st})  next {r['next'] * 1e3:.0f} ms", flush=True)
    for key, xs in rows.items():
        print(f"cold compile, {key}: median {statistics.median(xs):.0f} ms, min {min(xs):.0f} ms ({len(xs)} runs)")
    if not args.ptxas_options:
        return
    import tile_gemm

    art = tile_gemm.gemm.specialize(T="f16", BM=128, BN=256, BK=64).compile(args.arch)
    with tempfile.TemporaryDirectory() as d:
        src = Path(d, "k.ptx")
        src.write_text(art.ptx)
        for opts in ([], ["-O1"], ["-O2"], ["-O0"]):
            ts = []
            for _ in range(3):
                t0 = time.perf_counter()
                r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", *opts, "-o", str(Path(d, "k.cubin")), str(src)], capture_output=True, text=True)
                ts.append((time.perf_counter() - t0) * 1e3)
            regs = [ln for ln in r.stderr.splitlines() if "Used" in ln][:1]
            print(f"ptxas {' '.join(opts) or '-O3'}: min {min(ts):.0f} ms  {regs}", flush=True)


if __name__ == "__main__":
    main()

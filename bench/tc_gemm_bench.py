"""Tensor-core GEMM (codegen/tensorcore/gemm.py) against torch.matmul (cuBLAS), f16 4096^3, on one GPU.

    python3 bench/tc_gemm_bench.py              # sweep of tile configs, TFLOP/s and ratio to cuBLAS
    python3 bench/tc_gemm_bench.py --sanitize   # small ragged cases only (run under compute-sanitizer)

Timing: CUDA events around each launch, 10 warm-ups, median of 50. Every config's 4096^3 result
is checked against torch's f32 matmul of the same inputs (relative Frobenius error) before timing.
The cold compile time (generate + LLVM O3 + ptxas + module load) is measured in fresh processes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

COLD = r"""
import time, json
t0 = time.perf_counter()
from anodize.codegen.tensorcore.gemm import GemmConfig, gemm_ptx
from anodize.codegen.tensorcore.wgmma import WgmmaConfig, wgmma_ptx
from anodize.codegen.gpu.ptx import run_ptxas
t1 = time.perf_counter()
cfg = CFG
OPT = cfg.pop("opt", 3)
if cfg.pop("wgmma", False):
    ptx, arch = wgmma_ptx(WgmmaConfig(**cfg), aligned=ALIGNED, opt=OPT), "sm_90a"
else:
    ptx, arch = gemm_ptx(GemmConfig(**cfg), aligned=ALIGNED, opt=OPT), "sm_90"
t2 = time.perf_counter()
run_ptxas(ptx, arch)
t3 = time.perf_counter()
print(json.dumps({"import_ms": 1e3*(t1-t0), "generate_o3_ms": 1e3*(t2-t1), "ptxas_ms": 1e3*(t3-t2)}))
"""


def cold_compile(cfg: dict, aligned: bool | None, runs: int = 3) -> dict:
    out = []
    for _ in range(runs):
        code = COLD.replace("CFG", repr(cfg)).replace("ALIGNED", repr(aligned))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(o[k] for o in out) for k in out[0]}


def sanitize_cases() -> None:
    """Small ragged cases through the plain driver path (no torch), for compute-sanitizer."""
    sys.path.insert(0, "tests/codegen")
    from test_tc_gemm import _assert_close, run_gemm

    from anodize.codegen.tensorcore.gemm import GemmConfig
    from anodize.codegen.tensorcore.wgmma import WgmmaConfig

    cases = [(77, 130, 65, 0), (77, 130, 65, 3), (96, 72, 37, 3), (200, 300, 136, 0), (5, 3, 1, 0)]
    for cfg in (GemmConfig(), GemmConfig(tile_n=256), GemmConfig(b_trans=True, out_dtype="f16", in_dtype="bf16"),
                WgmmaConfig(), WgmmaConfig(b_trans=True, tile_n=128, out_dtype="bf16"),
                WgmmaConfig(tile_n=128, stages=3, min_blocks=2)):
        for M, N, K, pad in cases:
            out, ref = run_gemm(M, N, K, cfg, pad=pad)
            _assert_close(out, ref, cfg.out_dtype)
    print("sanitize cases: all results right")


def bench(size: int, reps: int) -> None:
    import torch

    from anodize.codegen.tensorcore.gemm import GemmConfig
    from anodize.codegen.tensorcore.wgmma import WgmmaConfig
    from anodize.runtime.tc_gemm import TcGemm

    torch.manual_seed(0)
    M = N = K = size
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    flops = 2.0 * M * N * K

    def timeit(fn) -> float:
        for _ in range(10):
            fn()
        ts = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e))
        return statistics.median(ts)

    t_cublas = timeit(lambda: torch.matmul(a, b))
    cublas_tf = flops / t_cublas / 1e9
    t_cublas2 = timeit(lambda: torch.matmul(a, b))  # a second time: the spread between the two
    rows = [("torch.matmul (cuBLAS) f16 out", "", t_cublas, cublas_tf, 1.0, 0.0, f"again: {flops / t_cublas2 / 1e9:.1f}")]
    configs = [  # (config, extra variants: runtime-checked loads and f16 output)
        (dict(tile_m=128, tile_n=128, tile_k=32, num_warps=8, stages=3), True),
        (dict(tile_m=128, tile_n=256, tile_k=32, num_warps=8, stages=4), False),
        (dict(tile_m=256, tile_n=128, tile_k=32, num_warps=8, stages=4), False),
        (dict(wgmma=True, tile_m=128, tile_n=256, num_warps=8, stages=4), True),
        (dict(wgmma=True, tile_m=128, tile_n=256, num_warps=8, stages=4, opt=1), False),
        (dict(wgmma=True, tile_m=128, tile_n=256, num_warps=8, stages=4, b_trans=True), False),
        (dict(wgmma=True, tile_m=128, tile_n=256, num_warps=8, stages=4, in_flight=0), False),
        (dict(wgmma=True, tile_m=128, tile_n=128, num_warps=8, stages=3, min_blocks=2), True),
        (dict(wgmma=True, tile_m=128, tile_n=128, num_warps=8, stages=3, min_blocks=2, opt=1), False),
        (dict(wgmma=True, tile_m=128, tile_n=128, num_warps=8, stages=3, min_blocks=2, b_trans=True), False),
    ]
    stream = torch.cuda.current_stream().cuda_stream
    bt = b.t().contiguous()  # N x K, for the b_trans configs
    for kw, extra in configs:
        kw = dict(kw)
        wg = kw.pop("wgmma", False)
        opt = kw.pop("opt", 3)
        variants = [("f32", True)] + ([("f32", None), ("f16", True)] if extra else [])
        for out_dtype, aligned in variants:
            cfg = (WgmmaConfig if wg else GemmConfig)(out_dtype=out_dtype, **kw)
            bsrc, ldb = (bt, K) if kw.get("b_trans") else (b, N)
            try:
                g = TcGemm(cfg, aligned=aligned, opt=opt)
            except Exception as e:  # a config ptxas or the driver refuses: report, go on
                print(f"{kw} {out_dtype}: {type(e).__name__}: {str(e)[:200]}")
                continue
            c = torch.empty(M, N, device="cuda", dtype=torch.float32 if out_dtype == "f32" else torch.float16)
            c.fill_(float("nan"))
            run = lambda: g(a.data_ptr(), bsrc.data_ptr(), c.data_ptr(), M, N, K, K, ldb, N, stream)  # noqa: E731
            run()
            torch.cuda.synchronize()
            err = ((c.float() - ref).norm() / ref.norm()).item()
            t = timeit(run)
            tf = flops / t / 1e9
            res = g.resources
            regs = f"{res.registers} regs, {res.spill_stores} spill" if res else ""
            pf = ("" if kw.get("prefetch", True) else " noprefetch") + (" B^T" if kw.get("b_trans") else "")
            pf += (f" {kw['min_blocks']}/SM" if "min_blocks" in kw else "") + (" wait0" if kw.get("in_flight") == 0 else "") + (f" O{opt}" if opt != 3 else "")
            kind = "wgmma" if wg else "mma.sync"
            name = f"{kind} {cfg.tile_m}x{cfg.tile_n}x{cfg.tile_k} w{cfg.num_warps} s{cfg.stages}{pf} {out_dtype}"
            rows.append((name, "aligned" if aligned else "runtime-check", t, tf, tf / cublas_tf, err, regs))
            print(rows[-1], flush=True)
    print(f"\nGEMM {M}x{N}x{K} f16 inputs, f32 accumulate; median of {reps} ({torch.cuda.get_device_name()})")
    print(f"{'kernel':46s} {'loads':14s} {'ms':>8s} {'TFLOP/s':>8s} {'x cuBLAS':>8s} {'rel err':>9s}")
    for name, al, t, tf, ratio, err, regs in rows:
        print(f"{name:46s} {al:14s} {t:8.3f} {tf:8.1f} {ratio:8.3f} {err:9.2e} {regs}")
    best = max(rows[1:], key=lambda r: r[3])
    print(f"best: {best[0]} ({best[1]}) {best[3]:.1f} TFLOP/s = {best[4]:.3f} x cuBLAS {cublas_tf:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sanitize", action="store_true")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    if args.sanitize:
        sanitize_cases()
        return
    for cfg, al in ((dict(), True), (dict(wgmma=True), True), (dict(wgmma=True, opt=1), True)):
        c = cold_compile(cfg, al)
        print(f"cold compile {cfg or 'default 128x128x32'} aligned={al}: import {c['import_ms']:.0f} ms, "
              f"generate+O3 {c['generate_o3_ms']:.0f} ms, ptxas {c['ptxas_ms']:.0f} ms, "
              f"total {sum(c.values()):.0f} ms (median of 3 fresh processes)")
    t0 = time.perf_counter()
    bench(args.size, args.reps)
    print(f"bench wall {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()

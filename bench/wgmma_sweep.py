"""Variants of the inline-PTX wgmma GEMM tile (codegen/tensorcore/wgmma_asm.py) as standalone kernels:
ptxas time and registers, then 4096^3 f16 TFLOP/s against cuBLAS in the same run.

    python3 bench/wgmma_sweep.py [--size 4096] [--quick]

Each variant: PTX from `asm_gemm_ptx`, `ptxas -arch=sm_90a -v` (fastest of 3 runs, its own
"Compile time"), loaded through the driver with its dynamic shared memory raised, checked
against torch, then timed as 10 batches of 10 back-to-back launches (CUDA events).
"""

from __future__ import annotations

import argparse
import ctypes
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ptxas(ptx: str, extra: list[str]) -> tuple[bytes, float, str]:
    best, log, image = 1e9, "", b""
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d, "k.ptx"), Path(d, "k.cubin")
        src.write_text(ptx)
        for _ in range(2):
            t0 = time.perf_counter()
            r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", *extra, "-o", str(out), str(src)], capture_output=True, text=True)
            best = min(best, time.perf_counter() - t0)
            log = r.stdout + r.stderr
            if r.returncode:
                raise RuntimeError(log)
        image = out.read_bytes()
    return image, best * 1e3, log


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated substrings of the variant labels to run")
    args = ap.parse_args()
    import torch
    from cuda.bindings import driver

    from anodize.codegen.tensorcore import wgmma_asm as A
    from anodize.codegen.tensorcore.wgmma_asm import AsmGemmConfig
    from anodize.runtime.tc_gemm import _check, ensure_context

    ensure_context()
    torch.cuda.init()
    s = args.size
    a = torch.randn(s, s, device="cuda", dtype=torch.float16)
    b = torch.randn(s, s, device="cuda", dtype=torch.float16)
    ref = (a.float() @ b.float())
    flops = 2.0 * s**3

    def timed(fn) -> float:  # noqa: ANN001
        fn()
        torch.cuda.synchronize()
        out = []
        for _ in range(10):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(10):
                fn()
            e1.record()
            e1.synchronize()
            out.append(e0.elapsed_time(e1) / 10)
        return statistics.median(out)

    c_ref = torch.empty(s, s, device="cuda", dtype=torch.float16)
    t_cublas = timed(lambda: torch.matmul(a, b, out=c_ref))
    print(f"cuBLAS f16 out: {t_cublas:.4f} ms, {flops / t_cublas / 1e9:.1f} TFLOP/s", flush=True)
    variants = [
        ("128x256 S4", AsmGemmConfig(128, 256, 8, 4), [], True),
        ("256x128 S4 (16 warps)", AsmGemmConfig(256, 128, 16, 4), [], True),
        ("128x256 S4 ptxas -O1", AsmGemmConfig(128, 256, 8, 4), ["-O1"], True),
        ("256x128 S4 ptxas -O1", AsmGemmConfig(256, 128, 16, 4), ["-O1"], True),
        ("128x256 S4 st.shared epi", AsmGemmConfig(128, 256, 8, 4, stmatrix=False), [], True),
        ("128x256 S4 f32 out", AsmGemmConfig(128, 256, 8, 4, out_dtype="f32"), [], True),
        ("128x256 S3", AsmGemmConfig(128, 256, 8, 3), [], True),
        ("128x256 S4 ungrouped", AsmGemmConfig(128, 256, 8, 4), [], False),
        ("128x256 S4 2xn128", AsmGemmConfig(128, 256, 8, 4, wg_n=128), [], True),
        ("256x128 S3 (16 warps)", AsmGemmConfig(256, 128, 16, 3), [], True),
        ("128x128 S4", AsmGemmConfig(128, 128, 8, 4), [], True),
        ("64x128 S4 (4 warps)", AsmGemmConfig(64, 128, 4, 4), [], True),
    ]
    if args.quick:
        variants = variants[:2]
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        variants = [v for v in variants if any(k in v[0] for k in keys)]
    for label, cfg, extra, grouped in variants:
        try:
            t0 = time.perf_counter()
            ptx = A.asm_gemm_ptx(cfg, grouped=grouped)
            gen = (time.perf_counter() - t0) * 1e3
            image, t_ptxas, log = ptxas(ptx, extra)
            regs = re.search(r"Used (\d+) registers", log)
            spill = re.search(r"(\d+) bytes spill stores", log)
            warn = "serialized" if "serialized" in log else ""
            mod = _check(driver.cuModuleLoadData(image), "load")
            fn = _check(driver.cuModuleGetFunction(mod, b"tc_gemm"), "fn")
            smem = cfg.smem_bytes()
            _check(driver.cuFuncSetAttribute(fn, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), "attr")
            es = 4 if cfg.out_dtype == "f32" else 2
            c = torch.empty(s, s, device="cuda", dtype=torch.float32 if es == 4 else torch.float16)
            vals = [ctypes.c_uint64(a.data_ptr()), ctypes.c_uint64(b.data_ptr()), ctypes.c_uint64(c.data_ptr())] + [ctypes.c_int32(s)] * 6
            arr = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
            grid = -(-s // cfg.tile_m) * -(-s // cfg.tile_n)
            stream = torch.cuda.current_stream().cuda_stream

            def launch() -> None:
                _check(driver.cuLaunchKernel(fn, grid, 1, 1, cfg.threads, 1, 1, smem, driver.CUstream(stream), ctypes.addressof(arr), 0), "launch")

            launch()
            torch.cuda.synchronize()
            err = ((c.float() - ref).norm() / ref.norm()).item()
            t = timed(launch)
            print(f"{label:<24} gen {gen:5.0f} ms  ptxas {t_ptxas:5.0f} ms  {regs.group(1) if regs else '?'} regs  spill {spill.group(1) if spill else '?'} {warn}"
                  f"  err {err:.1e}  {t:.4f} ms  {flops / t / 1e9:6.1f} TFLOP/s  {t_cublas / t:.3f}x cuBLAS", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{label}: FAILED {type(e).__name__}: {str(e)[:400]}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()

"""The tile examples on the GPU beside their peers (issue 17's table), in one run.

    python3 bench/tile_bench.py [--reps 10] [--quick] [--only gemm,gemm-wide,...]

Rows: tile add 2^28 f32 vs torch.add; GEMM 4096^3 f16 in / f32 accumulate / f16 out vs
torch.matmul (cuBLAS) and Triton's tutorial matmul; fused softmax and layer norm 4096x4096
and 4096x5000 (rows of a length that is not a power of two: a ragged last pass, no padding;
issue 26's target >= 1.2x) f32 vs torch; attention forward batch 4, 16 heads, seq 4096, head dim 64 and 128, f16, vs
torch's scaled_dot_product_attention; and the cold compile time of the GEMM tile kernel.
Each row checks the result against the peer first, then prints event-timed medians (ms) and
ratio = peer time / our time (>= 1 means anodize is faster).  Times are per call over batches
of 10 calls between two events (the host's launch cost overlaps the GPU's work); the add,
softmax and layer norm rows interleave the two sides round by round (15 rounds) and time the
peer in a third slot too, a control whose ratio to the peer's first slot is the run's noise.  A row that fails prints why and
the run goes on.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

TARGETS = {"add": 1.0, "gemm-cublas": 0.7, "gemm-triton": 0.8, "softmax": 1.0, "layer_norm": 1.0, "attention": 0.5,
           "softmax-ragged": 1.2, "layer_norm-ragged": 1.2}


TUTORIAL_CONFIGS = [  # two of Triton's tutorial configs, as (BM, BN, BK, warps, stages)
    {"BM": 128, "BN": 256, "BK": 64, "num_warps": 8, "num_stages": 3},
    {"BM": 128, "BN": 128, "BK": 64, "num_warps": 4, "num_stages": 4},
]


def triton_matmul(configs: list[dict[str, int]] | None = None):  # noqa: ANN201
    """Triton's tutorial 03 kernel (fp16 in, fp32 accumulate), autotuned over `configs`
    (default: two of its tutorial configs; bench/autotune_bench.py passes anodize's 8)."""
    import triton
    import triton.language as tl

    tcfgs = [triton.Config({"BLOCK_SIZE_M": c["BM"], "BLOCK_SIZE_N": c["BN"], "BLOCK_SIZE_K": c["BK"], "GROUP_SIZE_M": 8},
                           num_stages=c["num_stages"], num_warps=c["num_warps"]) for c in (configs or TUTORIAL_CONFIGS)]

    @triton.autotune(configs=tcfgs, key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,  # noqa: ANN001
                      BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m
        offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
        offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
        offs_k = tl.arange(0, BLOCK_SIZE_K)
        a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_SIZE_K * stride_ak
            b_ptrs += BLOCK_SIZE_K * stride_bk
        c = acc.to(tl.float16)
        offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))

    def run(a, b, c):  # noqa: ANN001, ANN202
        M, K = a.shape
        _, N = b.shape
        grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        return c

    return run


_COLD = """
import sys, time
sys.path.insert(0, {ex!r})
sys.path.insert(0, {bench!r})
import anodize
import {module} as tile_gemm
stages = {{"check": 0.0, "lower": 0.0, "llvm": 0.0, "ptxas": 0.0, "ptxas_wait": 0.0}}

def timed(name, fn):
    def run(*a, **kw):
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            stages[name] += time.perf_counter() - t
    return run

t0 = time.perf_counter()
if {hooks!r}:  # stage timers (they import the codegen up front: the figure comes from a run without)
    from anodize.runtime import compile as rc
    from anodize.codegen import driver
    from anodize.codegen.gpu import ptx
    rc._enforce = timed("check", rc._enforce)
    driver._tiles = timed("lower", driver._tiles)
    driver.lower_kernel = timed("lower", driver.lower_kernel)
    ptx.emit_ptx = timed("llvm", ptx.emit_ptx)
    _result = ptx.PtxasJob.result

    def job_result(self):  # ptxas's own wall time (run_ptxas runs a PtxasJob too)
        try:
            return _result(self)
        finally:
            stages["ptxas"] += self.seconds

    ptx.PtxasJob.result = job_result
    driver.PendingGpu.result = timed("ptxas_wait", driver.PendingGpu.result)
t1 = time.perf_counter()
k = tile_gemm.gemm.specialize(T="f16"{extra}).compile({arch!r})
t2 = time.perf_counter()
first = dict(stages)
for key in stages:
    stages[key] = 0.0
tile_gemm.gemm.specialize(T="bf16"{extra}).compile({arch!r})
t3 = time.perf_counter()
print(repr({{"first": t2 - t0, "hooks": t1 - t0, "next": t3 - t2, "first_stages": first, "next_stages": dict(stages),
             "wgmma": "wgmma" in k.ptx, "registers": k.resources.registers, "spills": k.resources.spill_stores}}))
"""


def _bytecode() -> None:
    """Compile the source tree's modules to bytecode once, as an installed package has them (pip
    compiles at install).  Without it, where PYTHONDONTWRITEBYTECODE is set or the tree is not
    writable, every fresh interpreter compiles the ~190 modules a first compile imports from
    source, which more than doubles the figure (bench/RESULTS.md, 2026-12-01) and measures
    Python's compiler, not anodize's."""
    import compileall

    for d in ("anodize", "checker", "codegen", "runtime", "examples", "bench"):
        compileall.compile_dir(str(ROOT / d), quiet=2)


def cold_compile(arch: str = "sm_90", module: str = "tile_gemm", extra: str = ", BM=128, BN=256, BK=64", hooks: bool = False) -> dict:  # type: ignore[type-arg]
    """`gemm.specialize(T="f16", BM=128, BN=256, BK=64).compile(arch)` in a fresh interpreter with the compile cache off,
    after `import anodize` and `import tile_gemm` (the cold import, excluded): the checker, the
    tile lowering, LLVM and PTX, ptxas, with the lazy imports of the checker, the codegen and
    llvmlite's binding and the toolchain's start-up (first in the process).  Then the bf16
    specialisation right after (the compile alone).  The tree's modules are compiled to
    bytecode first (`_bytecode`).  Stage times in the dict, in seconds:
    ptxas runs in the background while the checker runs, so "ptxas" overlaps "check" and
    "ptxas_wait" is the time the compile still waited for it.  With `hooks` the stages are timed
    (their hooks import the codegen before the clock's first compile: a breakdown, not the figure)."""
    import ast

    _bytecode()
    env = {**os.environ, "ANODIZE_CACHE": "off"}
    code = _COLD.format(ex=str(ROOT / "examples"), bench=str(ROOT / "bench"), arch=arch, module=module, extra=extra, hooks=hooks)
    out = subprocess.run([sys.executable, "-c", code],
                         capture_output=True, text=True, env=env, check=True)
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def time_batched(fn, record, elapsed, sync, batches: int = 10, per: int = 10) -> list[float]:  # noqa: ANN001
    """Milliseconds per call: `per` calls back to back between two recorded events (so the
    host's launch cost overlaps the GPU's work), `batches` times, after a warm-up.
    `record()` -> an event; `elapsed(e0, e1)` waits for e1 and gives the ms between them."""
    fn()
    sync()
    out = []
    for _ in range(batches):
        e0 = record()
        for _ in range(per):
            fn()
        e1 = record()
        out.append(elapsed(e0, e1) / per)
    return out


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    """Run the rows (`argv` as the command line's), print them, and return one dict a row:
    name, size, peer, ours_ms, peer_ms, ratio, key (TARGETS), and for the cold row first_ms, next_ms."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    ap.add_argument("--only", default="", help="comma-separated rows: add, softmax, layer_norm (4096x4096), softmax5000, layer_norm5000 (4096x5000), gemm (the example's "
                    "GPU tile, 128x256x64 over 8 warps, with cuBLAS, Triton and the cold compile), gemm-wide (256x128x64, 16 warps), attention64, attention128, cold")
    ap.add_argument("--no-cold", action="store_true", help="`--only gemm` without the cold compile (bench/readme_table.py times it itself)")
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F  # noqa: N812

    import anodize as az
    from suite import time_events
    import tile_add
    import tile_attention
    import tile_gemm
    import tile_layernorm
    import tile_softmax

    dev = az.device(0)
    rows: list[str] = []
    results: list[dict[str, object]] = []
    reps = args.reps

    def ours(fn, r=reps):  # noqa: ANN001, ANN202
        return time_events(fn, r, "anodize", dev.stream)

    def theirs(fn, r=reps):  # noqa: ANN001, ANN202
        return time_events(fn, r, "torch")

    def row(name: str, size: str, t_ours: list[float], peer: str, t_peer: list[float], key: str, flops: float = 0.0) -> None:
        mo, mp = statistics.median(t_ours), statistics.median(t_peer)
        ratio = mp / mo
        tf = f" ({flops / mo / 1e9:.1f} vs {flops / mp / 1e9:.1f} TFLOP/s)" if flops else ""
        met = "met" if ratio >= TARGETS[key] else "missed"
        line = f"| {name} | {size} | {mo:.4f} | {peer} | {mp:.4f} | {ratio:.3f}x | >= {TARGETS[key]}x {met} |{tf}"
        rows.append(line)
        results.append({"name": name, "size": size, "peer": peer, "ours_ms": mo, "peer_ms": mp, "ratio": ratio, "key": key,
                        "ours_tflops": flops / mo / 1e9 if flops else None})
        print(line, flush=True)

    def section(fn):  # noqa: ANN001, ANN202
        try:
            fn()
        except Exception:  # noqa: BLE001 - one failed row must not stop the others
            print(f"FAILED {fn.__name__}:\n{traceback.format_exc()}", flush=True)
        try:
            torch.cuda.synchronize()
            dev.synchronize()
        except Exception:  # noqa: BLE001
            print(f"FAILED sync after {fn.__name__}:\n{traceback.format_exc()}", flush=True)

    print("| kernel | size | anodize ms | peer | peer ms | ratio | target |", flush=True)

    def add() -> None:
        n = 1 << (24 if args.quick else 28)
        a = torch.rand(n, device="cuda")
        b = torch.rand(n, device="cuda")
        c = torch.empty_like(a)
        c2 = torch.empty_like(a)
        cfg = az.LaunchConfig.for_tiles((n,), (tile_add.BLOCK,))
        launch = tile_add.add[cfg]
        launch(a, b, c)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b)
        c3 = torch.empty_like(a)
        t_ours, t_peer, t_ctl = paired([lambda: launch(a, b, c), lambda: torch.add(a, b, out=c2), lambda: torch.add(a, b, out=c3)],
                                       [batched_ours, batched_torch, batched_torch])
        row("tile add", f"2^{n.bit_length() - 1} f32", t_ours, "torch.add(out=)", t_peer, "add")
        spread(t_ours, t_peer, t_ctl)

    def batched_ours(fn, batches: int = 10):  # noqa: ANN001, ANN202
        from cuda.core import EventOptions

        opts = EventOptions(timing_enabled=True)
        return time_batched(fn, lambda: dev.stream.record(options=opts), lambda e0, e1: (e1.sync(), e1 - e0)[1], dev.stream.sync, batches)

    def batched_torch(fn, batches: int = 10):  # noqa: ANN001, ANN202
        def record():  # noqa: ANN202
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e

        return time_batched(fn, record, lambda e0, e1: (e1.synchronize(), e0.elapsed_time(e1))[1], torch.cuda.synchronize, batches)

    def paired(fns, timers, rounds: int = 15) -> list[list[float]]:  # noqa: ANN001
        """Interleaved rounds: each round times every fn in one batch of 10 calls (order reversed
        every other round), so drift of clocks and temperature falls on all sides alike."""
        out: list[list[float]] = [[] for _ in fns]
        for r in range(rounds):
            order = list(range(len(fns)))[:: -1 if r % 2 else 1]
            for i in order:
                out[i] += timers[i](fns[i], batches=1)
        return out

    def spread(t_ours: list[float], t_peer: list[float], t_ctl: list[float]) -> None:
        """The noise floor beside a ratio: the peer timed again in a third slot of the same rounds."""
        mo, mp, mc = (statistics.median(x) for x in (t_ours, t_peer, t_ctl))
        print(f"  (interleaved rounds of 10 calls; anodize {min(t_ours):.4f}-{max(t_ours):.4f} ms, peer {min(t_peer):.4f}-{max(t_peer):.4f}; "
              f"control, the peer in a second slot: {mc:.4f} ms, {mp / mc:.4f}x the peer's first slot)", flush=True)

    def gemm(mod=tile_gemm, label="GEMM f16->f32 acc->f16") -> None:  # noqa: ANN001
        s = 1024 if args.quick else 4096
        a = torch.randn(s, s, device="cuda", dtype=torch.float16)
        b = torch.randn(s, s, device="cuda", dtype=torch.float16)
        c = torch.empty(s, s, device="cuda", dtype=torch.float16)
        if mod is tile_gemm:  # the example's tile on a GPU: a constant of the kernel
            bm, bn, bk = tile_gemm.tiles_for(dev)
            k = mod.gemm.specialize(T="f16", BM=bm, BN=bn, BK=bk)
        else:
            bm, bn, bk = mod.BM, mod.BN, mod.BK
            k = mod.gemm.specialize(T="f16")
        launch = k[az.LaunchConfig.for_tiles((s, s), (bm, bn))]
        launch(a, b, c, s)
        torch.cuda.synchronize()
        ref = a @ b
        torch.testing.assert_close(c.float(), ref.float(), rtol=2e-2, atol=0.5)
        art = k.compile()
        engine = "wgmma" if "wgmma" in art.ptx else "mma.sync" if "mma.sync" in art.ptx else "generic"
        print(f"  ({label} {bm}x{bn}x{bk}, {mod.gemm.num_warps} warps: {engine}, {art.resources.registers} registers, "
              f"{art.resources.spill_stores} bytes spilled, {art.dynamic_shared_bytes} bytes of dynamic shared memory)", flush=True)
        t_ours = batched_ours(lambda: launch(a, b, c, s))
        flops = 2.0 * s**3
        row(f"{label} {bm}x{bn}x{bk}", f"{s}^3", t_ours, "torch.matmul (cuBLAS)", batched_torch(lambda: torch.matmul(a, b, out=ref)), "gemm-cublas", flops)
        if mod is tile_gemm:
            try:
                tm = triton_matmul()
            except ImportError as e:
                print(f"(Triton unavailable: {e})", flush=True)
                return
            c3 = torch.empty_like(c)
            tm(a, b, c3)
            torch.cuda.synchronize()
            torch.testing.assert_close(c3.float(), ref.float(), rtol=2e-2, atol=0.5)
            row(f"{label} {bm}x{bn}x{bk}", f"{s}^3", t_ours, "Triton tutorial matmul", batched_torch(lambda: tm(a, b, c3)), "gemm-triton", flops)

    def gemm_wide() -> None:
        import tile_gemm_wide

        gemm(tile_gemm_wide, "GEMM f16->f32 acc->f16, 16 warps")

    def softmax(cols: int = 4096) -> None:
        s = 4096
        x = torch.randn(s, cols, device="cuda")
        y = torch.empty_like(x)
        width = tile_softmax.block_cols(cols)
        launch = tile_softmax.softmax.specialize(cols=width)[az.LaunchConfig.for_tiles((s, width), (tile_softmax.ROWS, width))]
        launch(x, y)
        torch.cuda.synchronize()
        torch.testing.assert_close(y, torch.softmax(x, dim=1))
        t_ours, t_peer, t_ctl = paired([lambda: launch(x, y), lambda: torch.softmax(x, dim=1), lambda: torch.softmax(x, dim=1)],
                                       [batched_ours, batched_torch, batched_torch])
        row("fused softmax", f"{s}x{cols} f32", t_ours, "torch.softmax", t_peer, "softmax" if cols == s else "softmax-ragged")
        spread(t_ours, t_peer, t_ctl)

    def layer_norm(cols: int = 4096) -> None:
        s = 4096
        x = torch.randn(s, cols, device="cuda")
        w = torch.randn(cols, device="cuda")
        b = torch.randn(cols, device="cuda")
        y = torch.empty_like(x)
        width = tile_layernorm.block_cols(cols)
        launch = tile_layernorm.layer_norm.specialize(cols=width)[az.LaunchConfig.for_tiles((s, width), (tile_layernorm.ROWS, width))]
        eps = np.float32(1e-5)
        launch(x, w, b, y, eps)
        torch.cuda.synchronize()
        torch.testing.assert_close(y, F.layer_norm(x, (cols,), w, b, 1e-5), rtol=1e-4, atol=1e-4)
        t_ours, t_peer, t_ctl = paired([lambda: launch(x, w, b, y, eps), lambda: F.layer_norm(x, (cols,), w, b, 1e-5),
                                        lambda: F.layer_norm(x, (cols,), w, b, 1e-5)], [batched_ours, batched_torch, batched_torch])
        row("layer norm", f"{s}x{cols} f32", t_ours, "F.layer_norm", t_peer, "layer_norm" if cols == s else "layer_norm-ragged")
        spread(t_ours, t_peer, t_ctl)

    def softmax5000() -> None:  # rows of 5000: a ragged last pass, no padding (docs/tiles.md, "Layout")
        softmax(5000)

    def layer_norm5000() -> None:
        layer_norm(5000)

    def attention(d: int) -> None:
        bsz, heads, seq = (1, 4, 1024) if args.quick else (4, 16, 4096)
        q, k, v = (torch.randn(bsz, heads, seq, d, device="cuda", dtype=torch.float16) for _ in range(3))
        o = torch.empty(bsz * heads * seq, d, device="cuda", dtype=torch.float16)
        bm, bn = tile_attention.tiles_for(d, tile_attention.has_tensor_cores(dev))
        flat = [t.reshape(bsz * heads * seq, d) for t in (q, k, v)]
        cfg = az.LaunchConfig.for_tiles((bsz * heads * seq, d), (bm, d))
        launch = tile_attention.attention.specialize(BM=bm, BN=bn, D=d)[cfg]
        scale = np.float32(d ** -0.5)
        launch(*flat, o, seq, scale)
        torch.cuda.synchronize()
        ref = F.scaled_dot_product_attention(q, k, v)
        torch.testing.assert_close(o.view(bsz, heads, seq, d).float(), ref.float(), rtol=2e-2, atol=2e-2)
        r = 3 if not args.quick else reps
        flops = 4.0 * bsz * heads * seq * seq * d
        row(f"attention fwd d{d}", f"b{bsz} h{heads} s{seq} f16", ours(lambda: launch(*flat, o, seq, scale), r),
            "F.scaled_dot_product_attention", theirs(lambda: F.scaled_dot_product_attention(q, k, v), r), "attention", flops)

    def attention64() -> None:
        attention(64)

    def attention128() -> None:
        attention(128)

    def cold() -> None:
        r = cold_compile()  # the figure: no stage hooks
        br = cold_compile(hooks=True)  # the breakdown
        r["first_stages"], r["next_stages"] = br["first_stages"], br["next_stages"]
        for key, label, spec in (("first", "first in the process", "f16"), ("next", "next specialisation", "bf16")):
            ms = r[key] * 1e3
            st = r[f"{key}_stages"]
            parts = ", ".join(f"{n} {v * 1e3:.0f}" for n, v in st.items())
            print(f"| cold compile, GEMM tile kernel, {label} | {spec}, sm_90 | {ms:.0f} ms | | | | <= 300 ms {'met' if ms <= 300 else 'missed'} | (a hooked run's stages: {parts} ms)", flush=True)
        results.append({"name": "cold", "first_ms": r["first"] * 1e3, "next_ms": r["next"] * 1e3})
        print(f"  (cold compile: {'wgmma' if r['wgmma'] else 'not wgmma'}, {r['registers']} registers, {r['spills']} bytes spilled)", flush=True)

    only = {x.strip().replace("-", "_") for x in args.only.split(",") if x.strip()}
    if "gemm" in only and not args.no_cold:
        only.add("cold")  # `--only gemm`: anodize vs cuBLAS vs Triton, and the cold compile
    for fn in (add, softmax, layer_norm, softmax5000, layer_norm5000, gemm, gemm_wide, attention64, attention128, cold):
        if only and fn.__name__ not in only:
            continue
        t0 = time.perf_counter()
        section(fn)
        print(f"  ({fn.__name__}: {time.perf_counter() - t0:.1f} s wall, first launch compiles)", flush=True)
    return results


if __name__ == "__main__":
    main()

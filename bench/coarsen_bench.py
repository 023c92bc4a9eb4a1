"""One-element-per-thread kernels, coarsened or not, beside PyTorch, Triton and CuPy, in one run.

    python3 bench/coarsen_bench.py [--log2n 28] [--side 16384] [--reps 20]

Every anodize variant is compiled in this process with `compile_gpu` and launched raw
(`launch_grid` / `hidden_args`: what the runtime passes), so the three builds of one
kernel run on the same buffers: `ANODIZE_COARSEN_CHUNKS=0` (one index per thread, the
build before coarsening), 1 (4 indices per thread, the default), 2 (8 indices per thread
in two 16-byte chunks, as Triton's 1024-element blocks of 128 threads).  The row
"anodize safe launch" is `kernel[cfg](...)`, the default build through the runtime.
Each anodize result is checked against NumPy before timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from suite import fmt, time_events  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--side", type=int, default=16384)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    from cuda.core import LaunchConfig as CC, launch

    import anodize as az
    import peers
    from kernels import copy as az_copy
    from saxpy import saxpy
    from stencil2d import reference as stencil_ref
    from stencil2d import stencil2d
    from vecadd import vecadd

    from anodize.codegen.artifact import hidden_args, launch_grid
    from anodize.codegen.driver import compile_gpu

    dev = az.device(0)
    n = 1 << args.log2n
    side = args.side
    rng = np.random.default_rng(0)
    a_h = rng.random(n, dtype=np.float32)
    b_h = rng.random(n, dtype=np.float32)
    u_h = rng.random((side, side), dtype=np.float32)
    a, b, c = dev.to_device(a_h), dev.to_device(b_h), dev.empty(n, az.f32)
    u, o = dev.to_device(u_h), dev.empty((side, side), az.f32)
    fault = dev.zeros(32, az.u8)
    alpha = 2.5
    cfg1 = az.LaunchConfig.for_num_elems(n, block=256)
    cfg2 = az.LaunchConfig.for_shape((side, side), block=(32, 8))
    moved = {"copy": 8 * n, "vecadd": 12 * n, "saxpy": 12 * n, "stencil2d": 8 * side * side}
    sample = np.r_[0:4099, n - 4099 : n, rng.integers(0, n, 100000)]
    want = {
        "copy": a_h[sample],
        "vecadd": (a_h + b_h)[sample],
        "saxpy": (np.float32(alpha) * a_h + b_h)[sample],
    }
    rows: dict[str, dict[str, list[float]]] = {k: {} for k in moved}
    regs: dict[str, str] = {}
    kernels = {
        "copy": (az_copy, cfg1, lambda: (a, c)),
        "vecadd": (vecadd, cfg1, lambda: (a, b, c)),
        "saxpy": (saxpy, cfg1, lambda: (np.float32(alpha), a, b, c)),
        "stencil2d": (stencil2d, cfg2, lambda: (u, o)),
    }
    stencil_want = None
    for chunks in ("0", "1", "2"):
        os.environ["ANODIZE_COARSEN_CHUNKS"] = chunks
        label = {"0": "anodize, 1 index/thread", "1": "anodize, coarsened x4 (default)", "2": "anodize, coarsened x8"}[chunks]
        for name, (k, cfg, argv) in kernels.items():
            ck = compile_gpu(k, dev.arch)
            handle = dev.load(ck)
            flat: list[object] = []
            for p, v in zip(ck.params, argv(), strict=True):
                if p.is_slice:
                    flat.append(v.ptr)
                    flat.extend(int(x) for x in v.shape)
                else:
                    flat.append(v)
            flat += hidden_args(ck, fault.ptr, cfg.grid, cfg.block, cfg.rank)
            ccfg = CC(grid=launch_grid(ck, cfg.grid), block=cfg.block)
            run = lambda handle=handle, ccfg=ccfg, flat=flat: launch(dev.stream, ccfg, handle, *flat)  # noqa: E731
            run()
            dev.synchronize()
            if name == "stencil2d":
                got = o.to_host()
                if stencil_want is None:
                    stencil_want = stencil_ref(u_h)
                np.testing.assert_allclose(got, stencil_want, rtol=1e-5, atol=1e-6)
            else:
                np.testing.assert_array_equal(c.to_host()[sample], want[name])
            assert int(fault.to_host().view(np.uint32)[0]) == 0
            rows[name][label] = time_events(run, args.reps, "anodize", dev.stream)
            r = ck.resources
            regs[f"{name} / {label}"] = f"coarsen {ck.coarsen}, {r.registers} registers, spills {r.spill_stores}/{r.spill_loads}"
    os.environ.pop("ANODIZE_COARSEN_CHUNKS", None)
    rows["vecadd"]["anodize safe launch (default)"] = time_events(lambda: vecadd[cfg1](a, b, c), args.reps, "anodize", dev.stream)
    rows["saxpy"]["anodize safe launch (default)"] = time_events(lambda: saxpy[cfg1](alpha, a, b, c), args.reps, "anodize", dev.stream)
    rows["stencil2d"]["anodize safe launch (default)"] = time_events(lambda: stencil2d[cfg2](u, o), args.reps, "anodize", dev.stream)
    np.testing.assert_allclose(o.to_host(), stencil_want, rtol=1e-5, atol=1e-6)
    import cupy as cp

    ca, cb, cu = cp.asarray(a_h), cp.asarray(b_h), cp.asarray(u_h)
    for k, d in peers.cupy_peers(ca, cb, alpha, cu).items():
        for pname, fn in d.items():
            rows[k][pname] = time_events(fn, args.reps, "cupy")
    del ca, cb, cu
    cp.get_default_memory_pool().free_all_blocks()
    import torch

    ta, tb, tu = torch.from_numpy(a_h).cuda(), torch.from_numpy(b_h).cuda(), torch.from_numpy(u_h).cuda()
    for maker in (peers.torch_peers, peers.triton_peers):
        for k, d in maker(ta, tb, alpha, tu).items():
            if maker is peers.torch_peers and k == "stencil2d":
                continue  # conv2d: 3% of the ceiling, not a peer worth the time
            for pname, fn in d.items():
                rows[k][pname] = time_events(fn, args.reps, "torch")
    ceil_ms = statistics.median(rows["copy"]["CuPy copyto"])
    ceil = moved["copy"] / (ceil_ms * 1e-3) / 1e9
    print(f"## coarsening: {dev.name}, n = 2^{args.log2n} f32, stencil {side}x{side} f32, {args.reps} event-timed runs\n")
    print(f"Copy ceiling (CuPy `copyto`): {ceil:,.0f} GB/s\n")
    print("| kernel | implementation | median ms (min-max) | GB/s | % of ceiling | vs PyTorch | vs Triton |")
    print("|---|---|---|---|---|---|---|")
    for k, d in rows.items():
        torch_ms = next((statistics.median(v) for n_, v in d.items() if n_.startswith("PyTorch")), None)
        triton_ms = statistics.median(d["Triton"]) if "Triton" in d else None
        for pname, ms in d.items():
            med = statistics.median(ms)
            gbs = moved[k] / (med * 1e-3) / 1e9
            vt = f"{torch_ms / med:.2f}x" if torch_ms else "-"
            vtr = f"{triton_ms / med:.2f}x" if triton_ms else "-"
            print(f"| {k} | {pname} | {fmt(ms)} | {gbs:,.0f} | {100 * gbs / ceil:.1f}% | {vt} | {vtr} |")
    print()
    for key, v in regs.items():
        print(f"- {key}: {v}")


if __name__ == "__main__":
    main()

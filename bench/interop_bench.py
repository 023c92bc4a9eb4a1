"""The same kernels over anodize buffers and over PyTorch tensors (through the CUDA array
interface, and through DLPack alone), f16 and bf16: the issue's claim is that a kernel over a
DLPack-wrapped tensor runs as fast as over an anodize buffer (zero-copy, the same memory).

    python3 bench/interop_bench.py [--m 4096 --n 4096 --k 4096] [--reps 50]

Rows: the tile GEMM (examples/tile_gemm.py, f16 and bf16 inputs, f16 output) at m x n x k and
the example vecadd on 2^26 f32; each the median of `--reps` timed launches after 10 warm-ups
(CUDA events on the launch's stream; the launch's host cost included: the tensors are passed
on every call, as a PyTorch program does).  The ratio is buffer time / tensor time (1.0: as fast).
Needs a GPU and PyTorch with CUDA.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]


class DLPackOnly:
    """A tensor seen through `__dlpack__` alone (no CUDA array interface)."""

    def __init__(self, inner: Any):
        self._inner = inner

    def __dlpack__(self, **kw: Any) -> Any:
        return self._inner.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self._inner.__dlpack_device__()


def _example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def median_ms(torch: Any, fn: Callable[[], None], reps: int) -> float:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    import numpy as np
    import torch

    import anodize as az

    dev = az.device()
    assert dev.kind == "cuda", "needs a GPU"
    # (anodize launches on its own stream; PyTorch's tensors are made and synchronised first)
    gemm = _example("tile_gemm")
    m, n, k = args.m, args.n, args.k
    print(f"{'row':44} {'buffer ms':>10} {'tensor ms':>10} {'ratio':>6}")
    for dt_name, tdt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
        ta = torch.randn(m, k, device="cuda").to(tdt)
        tb = torch.randn(k, n, device="cuda").to(tdt)
        tc = torch.empty(m, n, device="cuda", dtype=torch.float16)
        torch.cuda.synchronize()
        ba, bb = dev.empty((m, k), getattr(az, dt_name)), dev.empty((k, n), getattr(az, dt_name))
        bc = dev.empty((m, n), az.f16)
        buf_ms = median_ms(torch, lambda: gemm.run(ba, bb, bc, m, n, k, dev), args.reps)
        for how, wrap in (("CUDA array interface", lambda v: v), ("DLPack", DLPackOnly)):
            a, b, c = wrap(ta), wrap(tb), wrap(tc)
            t_ms = median_ms(torch, lambda: gemm.run(a, b, c, m, n, k, dev), args.reps)
            print(f"{f'tile GEMM {m}x{n}x{k} {dt_name}, {how}':44} {buf_ms:10.3f} {t_ms:10.3f} {buf_ms / t_ms:6.2f}")
    vec = _example("vecadd")
    nv = 1 << 26
    x, y, z = (torch.rand(nv, device="cuda") for _ in range(3))
    bx, by, bz = dev.to_device(np.ones(nv, np.float32)), dev.to_device(np.ones(nv, np.float32)), dev.empty(nv, az.f32)
    cfg = az.LaunchConfig.for_num_elems(nv)
    buf_ms = median_ms(torch, lambda: vec.vecadd[cfg](bx, by, bz), args.reps)
    for how, wrap in (("CUDA array interface", lambda v: v), ("DLPack", DLPackOnly)):
        a, b, c = wrap(x), wrap(y), wrap(z)
        t_ms = median_ms(torch, lambda: vec.vecadd[cfg](a, b, c), args.reps)
        print(f"{f'vecadd 2^26 f32, {how}':44} {buf_ms:10.3f} {t_ms:10.3f} {buf_ms / t_ms:6.2f}")


if __name__ == "__main__":
    sys.exit(main())

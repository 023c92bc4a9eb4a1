"""The same kernels over anodize buffers and over PyTorch tensors (through the CUDA array
interface, and through DLPack alone), f16 and bf16: the issue's claim is that a kernel over a
DLPack-wrapped tensor runs as fast as over an anodize buffer (zero-copy, the same memory).

    python3 bench/interop_bench.py [--m 4096 --n 4096 --k 4096] [--reps 50]

Rows (`gemm_rows`, `vecadd_rows`; bench/readme_table.py runs them too): the tile GEMM
(examples/tile_gemm.py, f16 and bf16 inputs, f16 output) at m x n x k and the example vecadd on
2^26 f32, every output checked against PyTorch first; each the median of `--reps` timed launches after 10 warm-ups
(CUDA events on the launch's stream; the launch's host cost included: the tensors are passed
on every call, as a PyTorch program does), and the mean of 50 launches back to back (the GPU
kept busy, so the host cost hides behind the kernels: the kernel's own speed over that memory).
The ratio is buffer time / tensor time (1.0: as fast).  A one-launch gap between the two is the
host cost of reading the arguments: for DLPack, the producer's `__dlpack__` (PyTorch's with a
stream named: about 22 us on an H100 host, 5 without) and our capsule read.
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


def back_to_back_ms(torch: Any, fn: Callable[[], None], launches: int = 50) -> float:
    """The mean of `launches` calls queued back to back, timed by events around all of them."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(launches):
        fn()
    e.record()
    e.synchronize()
    return float(s.elapsed_time(e)) / launches


# (label, buffer ms, tensor ms: one launch from idle; buffer ms, tensor ms: back to back)
Row = tuple[str, float, float, float, float]


def gemm_rows(torch: Any, dev: Any, m: int, n: int, k: int, reps: int) -> list[Row]:
    """The tile GEMM over anodize buffers and over the same-shaped PyTorch tensors, f16 and bf16,
    the tensors passed as they are (CUDA array interface) and through DLPack alone; each output
    checked against torch.matmul first."""
    import anodize as az

    gemm = _example("tile_gemm")
    out: list[Row] = []
    for dt_name, tdt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
        ta = torch.randn(m, k, device="cuda").to(tdt)
        tb = torch.randn(k, n, device="cuda").to(tdt)
        tc = torch.empty(m, n, device="cuda", dtype=torch.float16)
        ref = (ta.float() @ tb.float()).half()
        torch.cuda.synchronize()
        ba, bb = (dev.to_device(t.cpu().view(torch.int16).numpy()).view(getattr(az, dt_name)) for t in (ta, tb))  # the same bits
        bc = dev.empty((m, n), az.f16)
        gemm.run(ba, bb, bc, m, n, k, dev)
        got = torch.from_numpy(bc.to_host().astype("float32"))
        torch.testing.assert_close(got, ref.float().cpu(), rtol=2e-2, atol=0.5)
        buf_ms = median_ms(torch, lambda: gemm.run(ba, bb, bc, m, n, k, dev), reps)
        buf_b2b = back_to_back_ms(torch, lambda: gemm.run(ba, bb, bc, m, n, k, dev))
        for how, wrap in (("CUDA array interface", lambda v: v), ("DLPack", DLPackOnly)):
            tc.zero_()
            a, b, c = wrap(ta), wrap(tb), wrap(tc)
            gemm.run(a, b, c, m, n, k, dev)
            dev.synchronize()
            torch.testing.assert_close(tc.float(), ref.float(), rtol=2e-2, atol=0.5)
            t_ms = median_ms(torch, lambda: gemm.run(a, b, c, m, n, k, dev), reps)
            t_b2b = back_to_back_ms(torch, lambda: gemm.run(a, b, c, m, n, k, dev))
            out.append((f"tile GEMM {m}x{n}x{k} {dt_name}, {how}", buf_ms, t_ms, buf_b2b, t_b2b))
    return out


def vecadd_rows(torch: Any, dev: Any, nv: int, reps: int) -> list[Row]:
    """The example vecadd over anodize buffers and over PyTorch tensors (CUDA array interface,
    DLPack alone), each output checked first."""
    import numpy as np

    import anodize as az

    vec = _example("vecadd")
    x, y, z = (torch.rand(nv, device="cuda") for _ in range(3))
    bx, by, bz = dev.to_device(x.cpu().numpy()), dev.to_device(y.cpu().numpy()), dev.empty(nv, az.f32)
    want = (x + y).cpu().numpy()
    cfg = az.LaunchConfig.for_num_elems(nv)
    vec.vecadd[cfg](bx, by, bz)
    np.testing.assert_array_equal(bz.to_host(), want)
    buf_ms = median_ms(torch, lambda: vec.vecadd[cfg](bx, by, bz), reps)
    buf_b2b = back_to_back_ms(torch, lambda: vec.vecadd[cfg](bx, by, bz))
    out: list[Row] = []
    for how, wrap in (("CUDA array interface", lambda v: v), ("DLPack", DLPackOnly)):
        z.zero_()
        a, b, c = wrap(x), wrap(y), wrap(z)
        vec.vecadd[cfg](a, b, c)
        dev.synchronize()
        np.testing.assert_array_equal(z.cpu().numpy(), want)
        t_ms = median_ms(torch, lambda: vec.vecadd[cfg](a, b, c), reps)
        t_b2b = back_to_back_ms(torch, lambda: vec.vecadd[cfg](a, b, c))
        size = f"2^{nv.bit_length() - 1}" if nv & (nv - 1) == 0 else str(nv)
        out.append((f"vecadd {size} f32, {how}", buf_ms, t_ms, buf_b2b, t_b2b))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    import torch

    import anodize as az

    dev = az.device()
    assert dev.kind == "cuda", "needs a GPU"
    # (anodize launches on its own stream; PyTorch's tensors are made and synchronised first)
    print(f"{'row':44} {'one launch: buffer ms':>22} {'tensor ms':>10} {'ratio':>6} {'back to back: buffer ms':>24} {'tensor ms':>10} {'ratio':>6}")
    for label, buf_ms, t_ms, bb, tb in gemm_rows(torch, dev, args.m, args.n, args.k, args.reps) + vecadd_rows(torch, dev, 1 << 26, args.reps):
        print(f"{label:44} {buf_ms:22.3f} {t_ms:10.3f} {buf_ms / t_ms:6.2f} {bb:24.3f} {tb:10.3f} {bb / tb:6.2f}")


if __name__ == "__main__":
    sys.exit(main())

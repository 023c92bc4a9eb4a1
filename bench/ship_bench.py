"""The shipping targets of issue 30, measured on a GPU (docs/deploy.md, "Measuring").

    python bench/ship_bench.py first-result [--runs 5]   # fresh process: built vecadd vs CuPy RawKernel
    python bench/ship_bench.py custom-op [--calls 20000] # az.torch op vs the plain launch (torch CUDA tensors)
    python bench/ship_bench.py custom-op --cpu           # the same on the CPU backend (torch CPU tensors)
    python bench/ship_bench.py foreign [--calls 20000]   # a foreign CUDA C++ kernel: anodize vs CuPy RawKernel

first-result: builds examples/vecadd.py with `anodize build` (once), then times, in fresh
processes, from interpreter start to the first checked result of vecadd on 2^20 floats:
(a) `import vecadd_kernels` and launch through it, (b) CuPy's RawKernel of the same kernel in
CUDA C++ with CuPy's kernel cache warm (a first run fills it), CUDA initialisation included in
both; and the import of the loader alone.  Prints the median of `--runs` per variant.
custom-op / foreign: host time per call (perf_counter_ns around each call; the stream is
drained every 256 calls outside the timed region): median and p90 in microseconds.
custom-op --cpu: CPU time per call (`time.process_time` over batches of 1000 calls, variants
interleaved batch by batch, torch on one thread, 256 elements): median and minimum over the
batches; pin it to a core (`taskset -c 0`) on a loaded machine.  The plain launch takes NumPy
views of the tensors (the CPU backend's plain launch takes no tensors); the Buffer row is the
plain launch's quick path (anodize Buffers, a fresh output each call) for comparison.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CUDA_VECADD = r"""
extern "C" __global__ void vecadd(const float* a, const float* b, float* c, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

ANODIZE_FIRST = """
import time, sys
t0 = time.perf_counter()
import vecadd_kernels as K
t_import = time.perf_counter() - t0
import numpy as np, anodize as az
n = 1 << 20
dev = az.device(0)
x = np.ones(n, np.float32)
a, b, c = dev.to_device(x), dev.to_device(x), dev.empty(n, az.f32)
K.vecadd[az.LaunchConfig.for_num_elems(n, block=256)](a, b, c)
assert c.to_host()[n - 1] == 2.0
print(f"{time.perf_counter() - T0:.4f} {t_import * 1e3:.2f}")
"""

CUPY_FIRST = """
import time
import numpy as np, cupy as cp
src = {src!r}
k = cp.RawKernel(src, "vecadd")
n = 1 << 20
a = cp.asarray(np.ones(n, np.float32)); b = cp.asarray(np.ones(n, np.float32)); c = cp.empty(n, cp.float32)
k(((n + 255) // 256,), (256,), (a, b, c, cp.int64(n)))
assert float(c[n - 1].get()) == 2.0
print(f"{{time.perf_counter() - T0:.4f}} 0")
"""


def _fresh(code: str, cwd: str) -> tuple[float, float]:
    # T0: the interpreter's start, as close as a script gets (before any import of its own)
    prog = "import time; T0 = time.perf_counter()\n" + code
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, cwd=cwd, check=False)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(r.stdout + r.stderr)
    _inner, imp = r.stdout.split()
    return wall, float(imp)


def first_result(runs: int) -> None:
    out = tempfile.mkdtemp(prefix="azship-")
    subprocess.run([sys.executable, "-m", "anodize", "build", str(ROOT / "examples" / "vecadd.py"), "--arch", "sm_90", "-o", out], check=True)
    rows: dict[str, list[tuple[float, float]]] = {"anodize built": [], "cupy RawKernel (warm cache)": []}
    _fresh(CUPY_FIRST.format(src=CUDA_VECADD), out)  # fills CuPy's kernel cache
    for _ in range(runs):
        rows["anodize built"].append(_fresh(ANODIZE_FIRST, out))
        rows["cupy RawKernel (warm cache)"].append(_fresh(CUPY_FIRST.format(src=CUDA_VECADD), out))
    for name, vals in rows.items():
        wall = statistics.median(v[0] for v in vals)
        imp = statistics.median(v[1] for v in vals)
        extra = f", loader import {imp:.1f} ms" if imp else ""
        print(f"{name:30s} fresh process to first result: {wall:.3f} s (median of {runs}){extra}")
    a = statistics.median(v[0] for v in rows["anodize built"])
    c = statistics.median(v[0] for v in rows["cupy RawKernel (warm cache)"])
    print(f"speed-up over CuPy: {c / a:.2f}x (target >= 1.2x)")


def _per_call(fn: Callable[[], object], calls: int, sync: Callable[[], None]) -> tuple[float, float]:
    for _ in range(200):
        fn()
    sync()
    clock = time.perf_counter_ns
    out: list[int] = []
    for k in range(calls):
        t = clock()
        fn()
        out.append(clock() - t)
        if k % 256 == 255:
            sync()
    out.sort()
    return statistics.median(out) / 1e3, out[int(len(out) * 0.9)] / 1e3


def custom_op(calls: int) -> None:
    import torch

    sys.path.insert(0, str(ROOT / "examples"))
    import anodize as az
    from vecadd import vecadd

    op = az.torch.custom_op(vecadd, name="azbench::vecadd", outputs=lambda a, b: {"c": (a.shape, az.f32)},
                            config=lambda a, b: az.LaunchConfig.for_num_elems(a.numel(), block=256))
    n = 1 << 16
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    c = torch.empty(n, device="cuda")
    cfg = az.LaunchConfig.for_num_elems(n, block=256)
    launch = vecadd[cfg]
    rows = {
        "plain launch vecadd[cfg](a, b, c) (c preallocated)": _per_call(lambda: launch(a, b, c), calls, torch.cuda.synchronize),
        "plain launch + torch.empty for c": _per_call(lambda: launch(a, b, torch.empty(n, device="cuda")), calls, torch.cuda.synchronize),
        "az.torch op(a, b)": _per_call(lambda: op(a, b), calls, torch.cuda.synchronize),
        "torch.add(a, b) (reference)": _per_call(lambda: torch.add(a, b), calls, torch.cuda.synchronize),
    }
    for name, (med, p90) in rows.items():
        print(f"{name:55s} median {med:6.2f} us  p90 {p90:6.2f} us")
    base = rows["plain launch + torch.empty for c"][0]
    print(f"custom op over the plain launch with its allocation: {rows['az.torch op(a, b)'][0] - base:+.2f} us (target <= 2 us)")


def custom_op_cpu(calls: int) -> None:
    import numpy as np
    import torch

    os.environ["ANODIZE_DEVICE"] = "cpu"
    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT / "examples"))
    import anodize as az
    from vecadd import vecadd

    op = az.torch.custom_op(vecadd, name="azbench::vecadd_cpu", outputs=lambda a, b: {"c": (a.shape, az.f32)},
                            config=lambda a, b: az.LaunchConfig.for_num_elems(a.numel(), block=256))
    n = 256
    a, b = torch.rand(n), torch.rand(n)
    an, bn = a.numpy(), b.numpy()
    dev = az.device("cpu")
    ba, bb = dev.to_device(an), dev.to_device(bn)
    launch = vecadd[az.LaunchConfig.for_num_elems(n, block=256)]
    rows: dict[str, Callable[[], object]] = {
        "plain launch vecadd[cfg](a, b, c) (NumPy views, c preallocated)": (lambda c=torch.empty(n).numpy(): launch(an, bn, c)),
        "plain launch + torch.empty for c (NumPy views)": lambda: launch(an, bn, torch.empty(n).numpy()),
        "plain launch + dev.empty for c (anodize Buffers)": lambda: launch(ba, bb, dev.empty(n, az.f32)),
        "az.torch op(a, b)": lambda: op(a, b),
        "torch.add(a, b) (reference)": lambda: torch.add(a, b),
    }
    assert torch.equal(op(a, b), a + b)
    batch = 1000
    got: dict[str, list[float]] = {k: [] for k in rows}
    for fn in rows.values():
        for _ in range(200):
            fn()
    for _ in range(max(1, calls // batch)):
        for name, fn in rows.items():
            t = time.process_time()
            for _ in range(batch):
                fn()
            got[name].append((time.process_time() - t) / batch * 1e6)
    for name, vals in got.items():
        print(f"{name:66s} median {statistics.median(vals):6.2f} us  min {min(vals):6.2f} us (CPU time)")
    med = {k: statistics.median(v) for k, v in got.items()}
    base = med["plain launch + torch.empty for c (NumPy views)"]
    print(f"custom op over the plain launch with its allocation: {med['az.torch op(a, b)'] - base:+.2f} us (target <= 2 us)")
    print(f"custom op over the Buffer quick path with its allocation: {med['az.torch op(a, b)'] - med['plain launch + dev.empty for c (anodize Buffers)']:+.2f} us")
    np.testing.assert_array_equal(op(a, b).numpy(), an + bn)


def foreign(calls: int) -> None:
    import cupy as cp
    import numpy as np

    import anodize as az
    from anodize import DisjointSlice, Slice, f32, i64

    n = 1 << 16
    k = az.foreign.cuda(CUDA_VECADD, "vecadd", {"a": Slice[f32], "b": Slice[f32], "c": DisjointSlice[f32], "n": i64})
    k = az.launch_contract(domain=1, block=256, requires=lambda a, b, c, n: len(a) >= n and len(b) >= n and len(c) >= n)(k)
    dev = az.device(0)
    x = np.ones(n, np.float32)
    a, b, c = dev.to_device(x), dev.to_device(x), dev.empty(n, az.f32)
    cfg = az.LaunchConfig.for_num_elems(n, block=256)
    launch = k[cfg]
    nn = np.int64(n)
    ours = _per_call(lambda: launch(a, b, c, nn), calls, dev.synchronize)
    assert float(c.to_host()[-1]) == 2.0
    raw = cp.RawKernel(CUDA_VECADD, "vecadd")
    ca, cb, cc = cp.asarray(x), cp.asarray(x), cp.empty(n, cp.float32)
    grid, block = ((n + 255) // 256,), (256,)
    cn = cp.int64(n)
    theirs = _per_call(lambda: raw(grid, block, (ca, cb, cc, cn)), calls, cp.cuda.Device().synchronize)
    print(f"anodize foreign (checked launch)  median {ours[0]:6.2f} us  p90 {ours[1]:6.2f} us")
    print(f"CuPy RawKernel                    median {theirs[0]:6.2f} us  p90 {theirs[1]:6.2f} us")
    print(f"anodize / CuPy: {ours[0] / theirs[0]:.2f} (target <= 1.0)")


def main() -> None:
    p = argparse.ArgumentParser(description="issue 30's shipping targets")
    p.add_argument("what", choices=["first-result", "custom-op", "foreign"])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--cpu", action="store_true", help="custom-op on the CPU backend (CPU time)")
    args = p.parse_args()
    if not args.cpu:
        os.environ.pop("ANODIZE_DEVICE", None)
    if args.what == "first-result":
        first_result(args.runs)
    elif args.what == "custom-op":
        custom_op_cpu(args.calls) if args.cpu else custom_op(args.calls)
    else:
        foreign(args.calls)


if __name__ == "__main__":
    main()

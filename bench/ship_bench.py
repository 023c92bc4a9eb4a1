"""The shipping targets of issue 30, measured on a GPU (docs/deploy.md, "Measuring").

    python bench/ship_bench.py first-result [--runs 5] [--trace]   # fresh process: built vecadd vs CuPy RawKernel
    python bench/ship_bench.py custom-op [--calls 20000] [--trace]  # az.torch op vs the plain launch (torch CUDA tensors)
    python bench/ship_bench.py custom-op --cpu           # the same on the CPU backend (torch CPU tensors)
    python bench/ship_bench.py custom-op --fake          # its CUDA host path on tests/fakecuda.py's fake GPU (no GPU)
    python bench/ship_bench.py foreign [--calls 20000]   # a foreign CUDA C++ kernel: anodize vs CuPy RawKernel

first-result: builds examples/vecadd.py with `anodize build` (once), then times, in fresh
processes, from interpreter start to the first checked result of vecadd on 2^20 floats:
(a) `import vecadd_kernels` and launch through it, (b) CuPy's RawKernel of the same kernel in
CUDA C++ with CuPy's kernel cache warm (a first run fills it), CUDA initialisation included in
both; and the import of the loader alone.  Prints the median of `--runs` per variant; the
built package runs three times: as is, with `ANODIZE_EARLY_INIT=1` (its import starts the GPU)
and with `ANODIZE_INIT_BESIDE=0` (cuInit before cuda.core's import starts; the default runs it beside).
first-result --trace: then one more process per variant with a timeline (each stage, and
the runtime's first-GPU calls with the thread they ran on: cuInit, the primary context,
cuda.core's import, the device, the module load), `python -c pass`'s own start, and the
slowest imports by `python -X importtime`.
custom-op --trace: then each stage of the op's call timed alone (the dispatcher around a
no-op op, the op's body without it, its allocation, config lookup, launch, stream lookup);
with --cpu, the same stages on the CPU backend.
custom-op / foreign: host time per call (perf_counter_ns around each call; the stream is
drained every 256 calls outside the timed region): median and p90 in microseconds.
custom-op --cpu: CPU time per call (`time.process_time` over batches of 1000 calls, variants
interleaved batch by batch, torch on one thread, 256 elements): median and minimum over the
batches; pin it to a core (`taskset -c 0`) on a loaded machine.  The plain launch takes NumPy
views of the tensors (the CPU backend's plain launch takes no tensors); the Buffer row is the
plain launch's quick path (anodize Buffers, a fresh output each call) for comparison.
custom-op --fake: the op's CUDA host path with no GPU: PyTorch CPU tensors dressed as CUDA ones
on tests/fakecuda.py's fake GPU, whose launch is a no-op (CPU time, as --cpu).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

sys.path.insert(0, str(ROOT / "bench"))
from ship_scripts import (  # noqa: E402
    ANODIZE_FIRST, CUDA_DEVICE_WRAPS, CUDA_VECADD, CUPY_FIRST, CUPY_TRACE, DRIVER_FLOOR, FIRST_TRACE, TRACE_WRAPS,  # noqa: F401
)


def _fresh(code: str, cwd: str, env: dict[str, str] | None = None, flags: tuple[str, ...] = ()) -> tuple[float, float]:
    """(wall seconds from spawning the process to its exit, the loader import's ms)."""
    wall, imp, _out, _err = _fresh_run(code, cwd, env, flags)
    return wall, imp


def _fresh_run(code: str, cwd: str, env: dict[str, str] | None = None, flags: tuple[str, ...] = ()) -> tuple[float, float, str, str]:
    # T0: the interpreter's start, as close as a script gets (before any import of its own)
    prog = "import time; T0 = time.perf_counter()\n" + code
    t = time.perf_counter()
    r = subprocess.run([sys.executable, *flags, "-c", prog], capture_output=True, text=True, cwd=cwd, check=False,
                       env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(r.stdout + r.stderr)
    _inner, imp = r.stdout.splitlines()[-1].split()
    return wall, float(imp), r.stdout, r.stderr


EARLY = {"ANODIZE_EARLY_INIT": "1"}  # a built package's import starts the GPU (docs/deploy.md)
BESIDE = {"ANODIZE_INIT_BESIDE": "0"}  # cuInit before cuda.core's import (the default: beside it, runtime/device.py `cuda_device`)


def first_result(runs: int, trace: bool) -> None:
    out = tempfile.mkdtemp(prefix="azship-")
    subprocess.run([sys.executable, "-m", "anodize", "build", str(ROOT / "examples" / "vecadd.py"), "--arch", "sm_90", "-o", out], check=True)
    cupy = CUPY_FIRST.format(src=CUDA_VECADD)
    variants: dict[str, tuple[str, dict[str, str]]] = {
        "anodize built": (ANODIZE_FIRST, {}),
        "anodize built, ANODIZE_EARLY_INIT=1": (ANODIZE_FIRST, EARLY),
        "anodize built, ANODIZE_INIT_BESIDE=0": (ANODIZE_FIRST, BESIDE),
        "cupy RawKernel (warm cache)": (cupy, {}),
    }
    rows: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    _fresh(cupy, out)  # fills CuPy's kernel cache
    for _ in range(runs):
        for name, (code, env) in variants.items():
            rows[name].append(_fresh(code, out, env))
    for name, vals in rows.items():
        wall = statistics.median(v[0] for v in vals)
        imp = statistics.median(v[1] for v in vals)
        extra = f", loader import {imp:.1f} ms" if imp else ""
        print(f"{name:36s} fresh process to first result: {wall:.3f} s (median of {runs}){extra}")
    c = statistics.median(v[0] for v in rows["cupy RawKernel (warm cache)"])
    for name in ("anodize built", "anodize built, ANODIZE_EARLY_INIT=1", "anodize built, ANODIZE_INIT_BESIDE=0"):
        a = statistics.median(v[0] for v in rows[name])
        print(f"speed-up over CuPy ({name}): {c / a:.2f}x (target >= 1.2x)")
    if trace:
        first_result_trace(out, runs)


def first_result_trace(out: str, runs: int) -> None:
    """A timeline of one fresh process per variant (stages and the runtime's first-GPU calls, by
    thread), the interpreter's own start, and the slowest imports (`python -X importtime`)."""
    bare = statistics.median(_bare_start() for _ in range(max(runs, 3)))
    print(f"\ninterpreter start to exit, `python -c pass`: {bare * 1e3:.1f} ms (median)")
    for name, code, env in (("anodize built", FIRST_TRACE, {}), ("anodize built, ANODIZE_EARLY_INIT=1", FIRST_TRACE, EARLY),
                            ("anodize built, ANODIZE_INIT_BESIDE=0", FIRST_TRACE, BESIDE),
                            ("cupy RawKernel (warm cache)", CUPY_TRACE.format(src=CUDA_VECADD), {})):
        wall, _imp, stdout, _err = _fresh_run(code, out, env)
        _print_timeline(name, wall, stdout)
        if env is not BESIDE:  # (its imports are the plain run's)
            _wall, _imp, _o, err = _fresh_run(code, out, env, ("-X", "importtime"))
            _print_imports(err)
    floor = f"CUBIN = {str(Path(out) / 'vecadd_kernels' / 'vecadd.sm_90.cubin')!r}\n" + DRIVER_FLOOR
    for name, env in (("driver floor (cuda.bindings only, cuModuleLoadData)", {"FLOOR_LOAD": "module"}),
                      ("driver floor, cuLibraryLoadData", {"FLOOR_LOAD": "library"}),
                      ("driver floor, context started before NumPy's import", {"FLOOR_EARLY": "1"}),
                      ("driver floor, CUDA_MODULE_LOADING=EAGER", {"CUDA_MODULE_LOADING": "EAGER"})):
        try:
            walls = [_fresh_run(floor, out, env) for _ in range(max(1, runs // 3))]
        except SystemExit as e:  # the floor is a yardstick: its failure leaves the rest standing
            print(f"\n{name}: failed: {str(e)[-400:]}")
            continue
        walls.sort(key=lambda w: w[0])
        print(f"\n{name}: fresh process to first result {walls[len(walls) // 2][0]:.3f} s (median of {len(walls)})")
        _print_timeline(name, walls[len(walls) // 2][0], walls[len(walls) // 2][2])


def _print_timeline(name: str, wall: float, stdout: str) -> None:
    line = next(x for x in stdout.splitlines() if x.startswith("TRACE "))
    events = sorted(json.loads(line[6:]), key=lambda e: (e[2], -e[3]))
    print(f"\n{name}: process wall {wall * 1e3:.1f} ms (spawn to exit); ms from the script's first line:")
    print(f"  {'start':>8s} {'end':>8s} {'took':>8s}  {'thread':22s} stage")
    for what, thread, t0, t1 in events:
        print(f"  {t0 * 1e3:8.1f} {t1 * 1e3:8.1f} {(t1 - t0) * 1e3:8.1f}  {thread[:22]:22s} {what}")


def _bare_start() -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t


def _print_imports(stderr: str, top: int = 12) -> None:
    """The top-level imports by cumulative time and the modules by their own time (`-X importtime`)."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        own, cum, name = line[len("import time:"):].split("|", 2)
        rows.append((int(own), int(cum), name.rstrip(), (len(name) - len(name.lstrip()) - 1) // 2))
    total = sum(c for _o, c, _n, depth in rows if depth == 0)
    print(f"  imports: {total / 1e3:.1f} ms in all; top level by cumulative ms:")
    for own, cum, name, depth in sorted((r for r in rows if r[3] == 0), key=lambda r: -r[1])[:top]:
        print(f"    {cum / 1e3:8.1f}  {name.strip()}")
    print("  by own ms (any depth):")
    for own, cum, name, depth in sorted(rows, key=lambda r: -r[0])[:top]:
        print(f"    {own / 1e3:8.1f}  {name.strip()}")


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
        "az.torch op through the dispatcher (torch.ops.azbench.vecadd)": _per_call(lambda: op._op(a, b), calls, torch.cuda.synchronize),
        "torch.add(a, b) (reference)": _per_call(lambda: torch.add(a, b), calls, torch.cuda.synchronize),
    }
    for name, (med, p90) in rows.items():
        print(f"{name:55s} median {med:6.2f} us  p90 {p90:6.2f} us")
    base = rows["plain launch + torch.empty for c"][0]
    print(f"custom op over the plain launch with its allocation: {rows['az.torch op(a, b)'][0] - base:+.2f} us (target <= 2 us)")
    assert torch.equal(op(a, b), a + b) and torch.equal(c, a + b)


def custom_op_trace(calls: int, where: str = "cuda") -> None:
    """Each stage of the op's call timed alone (per-call median and p90, us): the dispatcher
    around a no-op op, the op's body without the dispatcher, and its parts.  `where="cpu"`:
    the same stages on the CPU backend with torch's CPU tensors (the plain launch takes their
    NumPy views; no stream)."""
    import torch

    sys.path.insert(0, str(ROOT / "examples"))
    import anodize as az
    from anodize.torch import _IMPLS, _launch
    from vecadd import vecadd

    gpu = where == "cuda"
    config = lambda a, b: az.LaunchConfig.for_num_elems(a.numel(), block=256)  # noqa: E731
    name = f"azbench::vecadd_t{where}"
    op = az.torch.custom_op(vecadd, name=name, outputs=lambda a, b: {"c": (a.shape, az.f32)}, config=config)
    impls = _IMPLS[name]
    n = 1 << 16 if gpu else 256
    a, b = torch.rand(n, device=where), torch.rand(n, device=where)
    c = torch.empty(n, device=where)
    lib = torch.library.Library("azbench", "FRAGMENT")
    lib.define(f"noop{where}(Tensor a, Tensor b) -> Tensor")
    lib.impl(f"noop{where}", lambda a, b: c, "CUDA" if gpu else "CPU")
    noop = getattr(torch.ops.azbench, f"noop{where}")
    launch = vecadd[config(a, b)]
    raw, index = impls.raw, a.get_device()
    body = impls.cuda if gpu else impls.cpu
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    for _ in range(3):  # the first call plans; the later ones take the launcher's quick pass
        assert torch.equal(op(a, b), a + b)
    la, lb, lc = (a, b, c) if gpu else (a.numpy(), b.numpy(), c.numpy())
    rows: dict[str, Callable[[], object]] = {
        "op(a, b) (eager: no dispatcher)": lambda: op(a, b),
        "op._op(a, b) (through the dispatcher, as torch.ops.ns.op)": lambda: op._op(a, b),
        "op.default(a, b) (the overload, through the dispatcher)": lambda: op.default(a, b),
        "dispatcher alone: no-op custom op (returns c)": lambda: noop(a, b),
        f"op body without the dispatcher: impls.{where}(a, b)": lambda: body(a, b),
        "  outputs + torch.empty (impls.allocate, spread)": lambda: impls.allocate((a, b), True),
        "  outputs + torch.empty (impls.allocate, Size)": lambda: impls.allocate((a, b)),
        "  config(a, b) + vecadd[cfg]": lambda: vecadd[config(a, b)],
        "  _launch([a, b, c]) (the fallback path)": lambda: _launch(torch, launch, [a, b, c], impls.slices, raw),
    }
    if gpu:
        rows["  current raw stream"] = lambda: raw(index)
    rows.update({
        f"plain launch vecadd[cfg](a, b, c){'' if gpu else ' (NumPy views)'}": lambda: launch(la, lb, lc),
        f"torch.empty(n, device='{where}')": lambda: torch.empty(n, device=where),
        "torch.add(a, b)": lambda: torch.add(a, b),
    })
    print(f"\ncustom-op stages ({where} tensors of {n} f32; {calls} calls each):")
    for label, fn in rows.items():
        med, p90 = _per_call(fn, calls, sync)
        print(f"  {label:55s} median {med:6.2f} us  p90 {p90:6.2f} us")


def _interleaved_cpu_times(rows: dict[str, Callable[[], object]], calls: int, width: int, what: str) -> dict[str, list[float]]:
    """Each row's CPU microseconds a call, batches of 1,000 interleaved across the rows after 200
    warm-up calls each; printed (median, min) and returned."""
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
        print(f"{name:{width}s} median {statistics.median(vals):6.2f} us  min {min(vals):6.2f} us ({what})")
    return got


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
        "az.torch op through the dispatcher (op._op)": lambda: op._op(a, b),
        "torch.add(a, b) (reference)": lambda: torch.add(a, b),
    }
    assert torch.equal(op(a, b), a + b)
    got = _interleaved_cpu_times(rows, calls, 66, "CPU time")
    med = {k: statistics.median(v) for k, v in got.items()}
    base = med["plain launch + torch.empty for c (NumPy views)"]
    print(f"custom op over the plain launch with its allocation: {med['az.torch op(a, b)'] - base:+.2f} us (target <= 2 us)")
    print(f"custom op over the Buffer quick path with its allocation: {med['az.torch op(a, b)'] - med['plain launch + dev.empty for c (anodize Buffers)']:+.2f} us")
    np.testing.assert_array_equal(op(a, b).numpy(), an + bn)


def _dress_as_cuda() -> None:
    """PyTorch CPU tensors dressed as CUDA ones on tests/fakecuda.py's fake GPU (its launches a
    no-op): `is_cuda`, `get_device`, `__cuda_array_interface__`, the current raw stream (0: the
    legacy default stream) and the pointer's device patched, for the rest of the process."""
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    import fakecuda

    from anodize.runtime import device as devmod, lazy

    T = torch.Tensor
    T.is_cuda = property(lambda t: True)  # type: ignore[assignment,method-assign]
    T.get_device = lambda t: 0  # type: ignore[method-assign]
    T.__cuda_array_interface__ = property(lambda t: {  # type: ignore[attr-defined]
        "shape": tuple(t.shape), "typestr": "<f4", "data": (t.data_ptr(), False), "version": 2, "strides": None, "stream": None})
    torch._C._cuda_getCurrentRawStream = lambda index: 0
    lazy.cuda_device().pointer_device = lambda ptr: 0
    dev, _calls = fakecuda.record_launches(fakecuda.Patch())
    fakecuda.cuda_device._cu_launch = lambda *a: None
    devmod._GPUS[0] = dev


def custom_op_fake(calls: int) -> None:
    """custom-op's rows on the fake GPU: the op's CUDA host path with a no-op launch, CPU time
    per call (batches of 1000, variants interleaved): median and minimum."""
    import torch

    os.environ.pop("ANODIZE_DEVICE", None)
    torch.set_num_threads(1)
    _dress_as_cuda()
    sys.path.insert(0, str(ROOT / "examples"))
    import anodize as az
    from vecadd import vecadd

    op = az.torch.custom_op(vecadd, name="azbench::vecadd_fake", outputs=lambda a, b: {"c": (a.shape, az.f32)},
                            config=lambda a, b: az.LaunchConfig.for_num_elems(a.numel(), block=256))
    n = 1 << 16
    a, b, c = torch.rand(n), torch.rand(n), torch.empty(n)
    launch = vecadd[az.LaunchConfig.for_num_elems(n, block=256)]
    rows: dict[str, Callable[[], object]] = {
        "plain launch vecadd[cfg](a, b, c) (c preallocated)": lambda: launch(a, b, c),
        "plain launch + torch.empty for c": lambda: launch(a, b, torch.empty(n, device="cpu")),
        "az.torch op(a, b)": lambda: op(a, b),
        "az.torch op through the dispatcher (op._op)": lambda: op._op(a, b),
    }
    got = _interleaved_cpu_times(rows, calls, 55, "CPU time, fake GPU")
    base, mine = "plain launch + torch.empty for c", "az.torch op(a, b)"
    print(f"custom op over the plain launch with its allocation: {statistics.median(got[mine]) - statistics.median(got[base]):+.2f} us "
          f"(medians; minima {min(got[mine]) - min(got[base]):+.2f}; target <= 2 us)")


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
    p.add_argument("--fake", action="store_true", help="custom-op's host path on tests/fakecuda.py's fake GPU (CPU time, no GPU)")
    p.add_argument("--trace", action="store_true", help="first-result: a timeline of each variant's fresh process and its "
                   "slowest imports; custom-op: each stage of the op's call timed alone")
    args = p.parse_args()
    if not args.cpu:
        os.environ.pop("ANODIZE_DEVICE", None)
    if args.what == "first-result":
        first_result(args.runs, args.trace)
    elif args.what == "custom-op" and args.fake:
        custom_op_fake(args.calls)
    elif args.what == "custom-op":
        custom_op_cpu(args.calls) if args.cpu else custom_op(args.calls)
        if args.trace:
            custom_op_trace(args.calls, "cpu" if args.cpu else "cuda")
    else:
        foreign(args.calls)


if __name__ == "__main__":
    main()

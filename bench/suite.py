"""The GPU benchmark suite: one command, every table measured side by side in one run.

    python3 bench/suite.py [--quick] [--write bench/RESULTS.md] [--numba-path /tmp/site_numpy]

Tables (median of event-timed runs, with min-max spread):
  1. bandwidth: copy, vecadd, saxpy, stencil2d as % of the device-to-device copy ceiling,
     anodize beside CuPy, PyTorch, Triton and numba-cuda;
  2. launch overhead: empty and 4-argument kernels, per launch on the host;
  3. compile: cold compile (check + codegen + PTX + cubin) and cached load, fresh interpreters;
  4. bounds checks: checked vs unchecked builds, time and registers.
The tooling rows (checker throughput, mypy plugin overhead) need mypy on the host and
come from bench/check_throughput.py and bench/mypy_overhead.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

Runner = Callable[[], None]


def fmt(ms: list[float]) -> str:
    return f"{statistics.median(ms):.4f} ({min(ms):.4f}-{max(ms):.4f})"


def time_events(fn: Runner, reps: int, backend: str, stream: object = None) -> list[float]:
    """Event-timed milliseconds per call, after a warm-up; each backend times on its own stream."""
    if backend == "anodize" and stream is None:  # the CPU backend: a launch returns when it has run
        fn()
        out = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1e3)
        return out
    if backend == "anodize":
        from cuda.core import EventOptions

        opts = EventOptions(timing_enabled=True)
        fn()
        stream.sync()  # type: ignore[attr-defined]
        out = []
        for _ in range(reps):
            e0 = stream.record(options=opts)  # type: ignore[attr-defined]
            fn()
            e1 = stream.record(options=opts)  # type: ignore[attr-defined]
            e1.sync()
            out.append(e1 - e0)
        return out
    if backend == "torch":
        import torch

        fn()
        torch.cuda.synchronize()
        out = []
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            out.append(e0.elapsed_time(e1))
        return out
    import cupy as cp

    fn()
    cp.cuda.get_current_stream().synchronize()
    out = []
    for _ in range(reps):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        out.append(cp.cuda.get_elapsed_time(e0, e1))
    return out


def host_launch_us(fn: Runner, launches: int, sync: Runner) -> list[float]:
    """Per-launch host microseconds, 5 batches of launches/5, the queue drained between batches."""
    fn()
    sync()
    out = []
    per = max(launches // 5, 1)
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(per):
            fn()
        out.append((time.perf_counter() - t) / per * 1e6)
        sync()
    return out


Results = dict[str, dict[str, list[float]]]


def bandwidth_results(args: argparse.Namespace, dev: object = None) -> tuple[Results, dict[str, int], str]:
    """kernel -> implementation -> event-timed ms, every anodize result checked; the bytes each
    kernel moves; and the copy ceiling's implementation ("CuPy copyto", else anodize's copy).
    `dev` defaults to GPU 0; on the CPU backend (`az.device("cpu")`) only anodize's rows run."""
    import anodize as az
    from kernels import copy as az_copy
    from saxpy import saxpy
    from stencil2d import stencil2d
    from vecadd import vecadd

    n = 1 << args.log2n
    rows = cols = args.side
    dev = az.device(0) if dev is None else dev
    gpu = dev.kind == "cuda"  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)
    a_h = rng.random(n, dtype=np.float32)
    b_h = rng.random(n, dtype=np.float32)
    u_h = rng.random((rows, cols), dtype=np.float32)
    a, b, c = dev.to_device(a_h), dev.to_device(b_h), dev.empty(n, az.f32)
    u, o = dev.to_device(u_h), dev.empty((rows, cols), az.f32)
    alpha = 2.5
    cfg1 = az.LaunchConfig.for_num_elems(n, block=256)
    cfg2 = az.LaunchConfig.for_shape((rows, cols), block=(32, 8))
    bytes_moved = {"copy": 2 * 4 * n, "vecadd": 3 * 4 * n, "saxpy": 3 * 4 * n, "stencil2d": 2 * 4 * rows * cols}
    results: dict[str, dict[str, list[float]]] = {k: {} for k in bytes_moved}
    ours = {
        "copy": lambda: az_copy[cfg1](a, c),
        "vecadd": lambda: vecadd[cfg1](a, b, c),
        "saxpy": lambda: saxpy[cfg1](alpha, a, b, c),
        "stencil2d": lambda: stencil2d[cfg2](u, o),
    }
    from stencil2d import reference as stencil_ref

    want = {"copy": lambda: a_h, "vecadd": lambda: a_h + b_h, "saxpy": lambda: np.float32(alpha) * a_h + b_h}
    for k, fn in ours.items():
        results[k]["anodize"] = time_events(fn, args.reps, "anodize", dev.stream)
        if k == "stencil2d":
            np.testing.assert_allclose(o.to_host(), stencil_ref(u_h), rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_allclose(c.to_host(), want[k](), rtol=1e-6)
    # grid-stride versions: 16-byte chunks of 4 elements, one chunk per thread
    from kernels import copy_gs, vecadd_gs

    cfg_gs = az.LaunchConfig.for_num_elems(-(-n // 4), block=256)
    results["copy"]["anodize (grid-stride)"] = time_events(lambda: copy_gs[cfg_gs](a, c), args.reps, "anodize", dev.stream)
    results["vecadd"]["anodize (grid-stride)"] = time_events(lambda: vecadd_gs[cfg_gs](a, b, c), args.reps, "anodize", dev.stream)
    np.testing.assert_array_equal(c.to_host(), a_h + b_h)  # vecadd_gs ran last
    import peers

    ceiling = "anodize"
    try:
        if not gpu:
            raise ImportError("the CPU backend: no GPU peers")
        import cupy as cp

        ca, cb, cu = cp.asarray(a_h), cp.asarray(b_h), cp.asarray(u_h)
        for k, d in peers.cupy_peers(ca, cb, alpha, cu).items():
            for name, fn in d.items():
                results[k][name] = time_events(fn, args.reps, "cupy")
        ceiling = "CuPy copyto"
        del ca, cb, cu
        cp.get_default_memory_pool().free_all_blocks()
    except ImportError:
        pass
    for maker, backend in ((peers.torch_peers, "torch"), (peers.triton_peers, "torch")):
        try:
            if not gpu:
                raise ImportError("the CPU backend: no GPU peers")
            import torch

            ta = torch.from_numpy(a_h).cuda()
            tb = torch.from_numpy(b_h).cuda()
            tu = torch.from_numpy(u_h).cuda()
            for k, d in maker(ta, tb, alpha, tu).items():
                for name, fn in d.items():
                    results[k][name] = time_events(fn, args.reps, backend)
            del ta, tb, tu
            torch.cuda.empty_cache()
        except ImportError:
            pass
    numba = numba_results(args) if gpu else {}
    for k in bytes_moved:
        if k in numba:
            results[k]["numba-cuda"] = numba[k]
    return results, bytes_moved, ceiling


def bandwidth(args: argparse.Namespace, lines: list[str]) -> dict[str, float]:
    results, bytes_moved, ceiling = bandwidth_results(args)
    rows = cols = args.side
    ceiling_ms = results["copy"][ceiling]
    ceil_gbs = bytes_moved["copy"] / (statistics.median(ceiling_ms) * 1e-3) / 1e9
    lines += [
        f"### Bandwidth (n = 2^{args.log2n} f32; stencil {rows}x{cols} f32; {args.reps} event-timed runs)",
        "",
        f"Copy ceiling ({ceiling}, device to device, bytes read + written): {ceil_gbs:,.0f} GB/s.",
        "",
        "| kernel | implementation | median ms (min-max) | GB/s | % of copy ceiling | anodize speed-up |",
        "|---|---|---|---|---|---|",
    ]
    pct: dict[str, float] = {}
    for k, d in results.items():
        ours_med = statistics.median(d["anodize"])
        for name, ms in d.items():
            gbs = bytes_moved[k] / (statistics.median(ms) * 1e-3) / 1e9
            p = 100 * gbs / ceil_gbs
            if name == "anodize":
                pct[k] = p
            ratio = statistics.median(ms) / ours_med
            lines.append(f"| {k} | {name} | {fmt(ms)} | {gbs:,.0f} | {p:.1f}% | {ratio:.2f}x |")
    lines.append("")
    return pct


def numba_results(args: argparse.Namespace) -> dict[str, list[float]]:
    if not args.numba_path:
        return {}
    argv = ["--log2n", str(args.log2n), "--rows", str(args.side), "--cols", str(args.side), "--reps", str(args.reps),
            "--launches", str(args.launches)]
    return peer_process("numba_peer.py", argv, args.numba_path)


def peer_process(script: str, argv: list[str], pythonpath: str) -> dict:  # type: ignore[type-arg]
    """Run bench/`script` in its own interpreter with `pythonpath` first on its path (numba-cuda
    needs an older NumPy than anodize's) and return the JSON object on its last line of output;
    {} (and its stderr printed) when it fails."""
    env = dict(os.environ, PYTHONPATH=pythonpath + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, str(ROOT / "bench" / script), *argv]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        print(f"{script} failed:\n" + r.stderr[-2000:], file=sys.stderr)
        return {}
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def launch_results(args: argparse.Namespace, dev: object = None) -> dict[str, dict[str, list[float]]]:
    """"empty" / "4 arguments" -> implementation -> host microseconds a launch (`host_launch_us`).
    On the CPU backend (`dev`, default GPU 0) only anodize's safe launch runs."""
    import anodize as az
    from kernels import empty, four

    dev = az.device(0) if dev is None else dev
    gpu = dev.kind == "cuda"  # type: ignore[attr-defined]
    sync = dev.synchronize  # type: ignore[attr-defined]
    small = dev.empty(32, az.f32)  # type: ignore[attr-defined]
    small_b = dev.empty(32, az.f32)  # type: ignore[attr-defined]
    out = dev.empty(32, az.f32)  # type: ignore[attr-defined]
    cfg = az.LaunchConfig(1, 32)
    rows: dict[str, dict[str, list[float]]] = {"empty": {}, "4 arguments": {}}
    le = empty[cfg]
    l4 = four[cfg]
    rows["empty"]["anodize safe launch"] = host_launch_us(lambda: le(), args.launches, sync)
    rows["4 arguments"]["anodize safe launch"] = host_launch_us(lambda: l4(small, small_b, out, 32), args.launches, sync)
    if not gpu:
        return rows
    from cuda.core import LaunchConfig as CC, launch

    from anodize.runtime.compile import compile_for_device

    s = dev.stream  # type: ignore[attr-defined]
    ke = compile_for_device(empty, dev)
    k4 = compile_for_device(four, dev)
    ccfg = CC(grid=1, block=32)
    flat4 = (small.ptr, 32, small_b.ptr, 32, out.ptr, 32, np.int64(32), k4.fault_address, np.int32(1))
    flat0 = (ke.fault_address, np.int32(1))
    rows["empty"]["raw cuda.core launch"] = host_launch_us(lambda: launch(s, ccfg, ke.handle, *flat0), args.launches, s.sync)
    rows["4 arguments"]["raw cuda.core launch"] = host_launch_us(lambda: launch(s, ccfg, k4.handle, *flat4), args.launches, s.sync)
    try:
        import cupy as cp

        mod = cp.RawModule(code=__import__("peers").STENCIL_CU)
        fe, f4 = mod.get_function("empty"), mod.get_function("four")
        x = cp.empty(32, cp.float32)
        csync = cp.cuda.get_current_stream().synchronize
        rows["empty"]["CuPy RawKernel"] = host_launch_us(lambda: fe((1,), (32,), ()), args.launches, csync)
        rows["4 arguments"]["CuPy RawKernel"] = host_launch_us(lambda: f4((1,), (32,), (x, x, x, cp.int64(32))), args.launches, csync)
    except ImportError:
        pass
    try:
        import torch

        t = torch.empty(32, device="cuda")
        t2 = torch.empty(32, device="cuda")
        rows["4 arguments"]["PyTorch add(out=) (tiny)"] = host_launch_us(
            lambda: torch.add(t, t2, out=t), args.launches, torch.cuda.synchronize
        )
        rows["empty"]["PyTorch fill_ (tiny, closest to empty)"] = host_launch_us(
            lambda: t.fill_(1.0), args.launches, torch.cuda.synchronize
        )
    except ImportError:
        pass
    numba = numba_results(argparse.Namespace(**{**vars(args), "log2n": 10, "side": 64, "reps": 2})) if args.numba_path else {}
    if numba:
        rows["empty"]["numba-cuda"] = numba["launch_empty_us"]
        rows["4 arguments"]["numba-cuda"] = numba["launch_four_us"]
    return rows


def launch_overhead(args: argparse.Namespace, lines: list[str]) -> dict[str, float]:
    rows = launch_results(args)
    lines += [
        f"### Launch overhead (host microseconds per launch, {args.launches} launches in 5 batches; median (min-max) of batches)",
        "",
        "| kernel | implementation | us per launch | vs raw cuda.core |",
        "|---|---|---|---|",
    ]
    ratios = {}
    for k, d in rows.items():
        raw = statistics.median(d["raw cuda.core launch"])
        for name, us in d.items():
            r = statistics.median(us) / raw
            if name == "anodize safe launch":
                ratios[k] = r
            lines.append(f"| {k} | {name} | {statistics.median(us):.2f} ({min(us):.2f}-{max(us):.2f}) | {r:.2f}x |")
    lines.append("")
    return ratios


def compile_times(args: argparse.Namespace, lines: list[str]) -> dict[str, float]:
    import tempfile

    cache = tempfile.mkdtemp(prefix="az-bench-cache-")
    code = (
        "import sys, time; sys.path.insert(0, %r)\n"
        "import anodize, vecadd, saxpy\n"
        "t = time.perf_counter(); k = vecadd.vecadd.compile(arch='sm_90')\n"
        "t1 = time.perf_counter(); k = saxpy.saxpy.compile(arch='sm_90')\n"
        "t2 = time.perf_counter()\n"
        "print((t1 - t) * 1e3, (t2 - t1) * 1e3)\n"
    ) % str(ROOT / "examples")

    def run(cache_on: bool) -> tuple[float, float]:
        env = dict(os.environ, ANODIZE_CACHE="on" if cache_on else "off", ANODIZE_CACHE_DIR=cache)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        first, second = r.stdout.strip().splitlines()[-1].split()
        return float(first), float(second)

    runs = getattr(args, "compile_runs", 5)
    cold_runs = [run(False) for _ in range(runs)]
    run(True)  # fill
    warm_runs = [run(True) for _ in range(runs)]
    cold = [x for x, _ in cold_runs]
    cold2 = [y for _, y in cold_runs]
    warm = [x for x, _ in warm_runs]
    warm2 = [y for _, y in warm_runs]
    lines += [
        f"### Compile time (vecadd, sm_90, fresh interpreter after `import anodize`, {runs} runs)",
        "",
        "| what | median ms (min-max) |",
        "|---|---|",
        f"| cold compile, first kernel in the process (imports of the checker and llvmlite included), cache off | {statistics.median(cold):.1f} ({min(cold):.1f}-{max(cold):.1f}) |",
        f"| cold compile, second kernel (saxpy): check + codegen + PTX + cubin, cache off | {statistics.median(cold2):.1f} ({min(cold2):.1f}-{max(cold2):.1f}) |",
        f"| cached load from the disk cache, first kernel (runtime imports included) | {statistics.median(warm):.2f} ({min(warm):.2f}-{max(warm):.2f}) |",
        f"| cached load from the disk cache, second kernel (saxpy) | {statistics.median(warm2):.2f} ({min(warm2):.2f}-{max(warm2):.2f}) |",
    ]
    out = {"cold_first": statistics.median(cold), "cold_second": statistics.median(cold2), "cached": statistics.median(warm), "cached_second": statistics.median(warm2)}
    if args.numba_path:
        nb = numba_results(argparse.Namespace(**{**vars(args), "log2n": 10, "side": 64, "reps": 2, "launches": 100}))
        if nb:
            lines.append(f"| numba-cuda eager compile of vecadd (first in its process, PTX + cubin) | {nb['compile_vecadd_ms']:.1f} |")
            out["numba_first"] = nb["compile_vecadd_ms"]
    lines.append("")
    return out


def bounds_checks(args: argparse.Namespace, lines: list[str]) -> dict[str, dict[str, float]]:
    """kernel -> {"cost_pct": the checked build's extra time, "checks_left": its bounds checks}."""
    import anodize as az
    from kernels import gather
    from stencil2d import stencil2d

    from anodize.runtime.compile import compile_for_device

    dev = az.device(0)
    rows = cols = args.side
    n = 1 << args.log2n
    rng = np.random.default_rng(1)
    u, o = dev.to_device(rng.random((rows, cols), dtype=np.float32)), dev.empty((rows, cols), az.f32)
    a = dev.to_device(rng.random(n, dtype=np.float32))
    idx = dev.to_device(rng.integers(0, n, n, dtype=np.int64))
    c = dev.empty(n, az.f32)
    out: dict[str, dict[str, float]] = {}
    lines += [
        "### Bounds checks (checked build vs `bounds_checks=False`, same launch path)",
        "",
        "| kernel | build | checks left | registers | median ms (min-max) | cost |",
        "|---|---|---|---|---|---|",
    ]
    from cuda.core import LaunchConfig as CC, launch

    for name, k, cfg, argv in (
        ("stencil2d", stencil2d, az.LaunchConfig.for_shape((rows, cols), block=(32, 8)), (u, o)),
        ("gather", gather, az.LaunchConfig.for_num_elems(n, block=256), (a, idx, c)),
    ):
        meds: dict[bool, float] = {}
        rows_out: list[str] = []
        for checked in (True, False):
            lk = compile_for_device(k, dev, bounds_checks=checked)
            flat: list[object] = []
            for p, v in zip(lk.compiled.params, argv):
                flat.append(v.ptr)
                flat.extend(int(x) for x in (v.shape if p.rank == 2 else (len(v),)))
            from anodize.codegen.artifact import hidden_args, launch_grid

            flat += hidden_args(lk.compiled, lk.fault_address, cfg.grid, cfg.block, cfg.rank)
            ccfg = CC(grid=launch_grid(lk.compiled, cfg.grid), block=cfg.block)
            ms = time_events(lambda: launch(dev.stream, ccfg, lk.handle, *flat), args.reps, "anodize", dev.stream)
            meds[checked] = statistics.median(ms)
            if checked:
                checks_left = lk.compiled.bounds_checks
            rows_out.append(
                f"| {name} | {'checked' if checked else 'unchecked'} | {lk.compiled.bounds_checks} | "
                f"{lk.compiled.resources.registers} | {fmt(ms)} |"
            )
        cost = 100 * (meds[True] - meds[False]) / meds[False]
        out[name] = {"cost_pct": cost, "checks_left": float(checks_left)}
        lines.append(rows_out[0] + f" {cost:+.1f}% |")
        lines.append(rows_out[1] + " baseline |")
    lines.append("")
    dev.check()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--side", type=int, default=16384)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--numba-path", default="")
    ap.add_argument("--write", default="")
    ap.add_argument("--only", default="bandwidth,launch,compile,bounds")
    args = ap.parse_args()
    import anodize as az

    dev = az.device(0)
    lines = [
        f"## {datetime.date.today().isoformat()}: {dev.name}, anodize {az.__version__}",
        "",
        f"Command: `python3 bench/suite.py {' '.join(sys.argv[1:])}`",
        "",
    ]
    summary: dict[str, object] = {}
    only = set(args.only.split(","))
    if "bandwidth" in only:
        summary["bandwidth_pct"] = bandwidth(args, lines)
    if "launch" in only:
        summary["launch_ratio"] = launch_overhead(args, lines)
    if "compile" in only:
        summary["compile_ms"] = compile_times(args, lines)
    if "bounds" in only:
        summary["bounds_cost_pct"] = bounds_checks(args, lines)
    text = "\n".join(lines)
    print(text)
    print("SUMMARY " + json.dumps(summary))
    if args.write:
        with open(args.write, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()

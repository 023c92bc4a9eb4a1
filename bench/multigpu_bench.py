"""Several GPUs, measured in one run against their targets.

    python3 bench/multigpu_bench.py [--repeat 10] [--json out.json]

1. Peer copy, 1 GiB, GPU 0 -> GPU 1: `dst.copy_from(src)` between anodize Buffers (one
   `cuMemcpyPeerAsync` on GPU 1's stream, ordered by events; runtime/peer.py) vs CuPy's
   `cudaMemcpyPeer` (`cupy.cuda.runtime.memcpyPeer`, peer access enabled both ways) over the
   same bytes.  Target: anodize >= 80% of CuPy's bandwidth.  `copy_to` (which also allocates
   on GPU 1) is reported alongside, with no target.
2. Data-parallel vecadd over 2^30 f32: the whole vector on GPU 0, vs half of it on each of
   GPU 0 and GPU 1 (the data already on each device), timed from the first launch to the
   last device's synchronisation.  Target: two GPUs >= 1.8x one GPU.
3. All-reduce (sum) of 256 MiB of f32 per GPU through NCCL (CuPy's `cupy.cuda.nccl`, the
   binding examples/data_parallel.py uses): on anodize Buffers, queued on each device's
   anodize stream, vs on CuPy arrays on CuPy's streams, with the same communicators.
   Target: anodize within 5% of CuPy.

Each figure is the median of `--repeat` timed runs after a warm-up.  With fewer than two
GPUs (or without CuPy, which the baselines and NCCL need) it prints why and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GIB = 1 << 30


def _refuse(why: str) -> None:
    print(f"multigpu_bench: not run: {why}")
    sys.exit(0)


def _median_s(fn: Callable[[], None], repeat: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_example_{name}", ROOT / "examples" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---- 1. peer copy ---------------------------------------------------------------------------------


def bench_peer_copy(az: Any, cp: Any, repeat: int) -> dict[str, Any]:
    import numpy as np

    g0, g1 = az.device(0), az.device(1)
    n = GIB // 4
    src = g0.full(n, 1.5, az.f32)
    dst = g1.empty(n, az.f32)

    def anodize_copy() -> None:
        dst.copy_from(src)
        g1.synchronize()

    def anodize_copy_to() -> None:
        out = src.copy_to(g1)
        g1.synchronize()
        del out

    t_az = _median_s(anodize_copy, repeat)
    t_to = _median_s(anodize_copy_to, repeat)
    assert float(dst[n - 1]) == 1.5

    peer_ok = bool(cp.cuda.runtime.deviceCanAccessPeer(0, 1) and cp.cuda.runtime.deviceCanAccessPeer(1, 0))
    arrays = []
    for here, there, make in ((0, 1, lambda: cp.full(n, 1.5, dtype=cp.float32)), (1, 0, lambda: cp.empty(n, dtype=cp.float32))):
        with cp.cuda.Device(here):
            if peer_ok:
                try:
                    cp.cuda.runtime.deviceEnablePeerAccess(there)
                except cp.cuda.runtime.CUDARuntimeError:
                    pass  # already enabled
            arrays.append(make())
    a, b = arrays

    def cupy_copy() -> None:
        # cudaMemcpyPeer between two devices returns before the copy ends (it is asynchronous
        # with respect to the host for device-to-device copies: the first run timed 1 GiB in
        # 4.7 us), so wait for both devices, as the anodize side waits for its copy
        cp.cuda.runtime.memcpyPeer(b.data.ptr, 1, a.data.ptr, 0, n * 4)
        for d in (0, 1):
            with cp.cuda.Device(d):
                cp.cuda.runtime.deviceSynchronize()

    t_cp = _median_s(cupy_copy, repeat)
    np.testing.assert_array_equal(cp.asnumpy(b[-4:]), np.full(4, 1.5, np.float32))
    bw = lambda t: GIB / t / 1e9  # noqa: E731
    return {
        "name": "peer copy 1 GiB, GPU 0 -> GPU 1",
        "anodize_GBps": bw(t_az),
        "anodize_copy_to_GBps": bw(t_to),
        "cupy_GBps": bw(t_cp),
        "peer_access": peer_ok,
        "ratio": t_cp / t_az,
        "target": ">= 0.80 of CuPy",
        "pass": t_cp / t_az >= 0.80,
    }


# ---- 2. data-parallel vecadd ----------------------------------------------------------------------


def bench_data_parallel(az: Any, repeat: int) -> dict[str, Any]:
    vecadd = _load_example("vecadd").vecadd
    g0, g1 = az.device(0), az.device(1)
    n = 1 << 30
    half = n // 2
    # one GPU: the whole vector
    a, b, c = g0.full(n, 1.0, az.f32), g0.full(n, 2.0, az.f32), g0.empty(n, az.f32)
    cfg = az.LaunchConfig.for_num_elems(n, block=256)

    def one() -> None:
        vecadd[cfg](a, b, c)
        g0.synchronize()

    t1 = _median_s(one, repeat)
    assert float(c[n - 1]) == 3.0
    del a, b, c
    g0.synchronize()
    # two GPUs: half on each, already there
    shards = [(d, d.full(half, 1.0, az.f32), d.full(half, 2.0, az.f32), d.empty(half, az.f32)) for d in (g0, g1)]
    cfg2 = az.LaunchConfig.for_num_elems(half, block=256)

    def two() -> None:
        for _, x, y, z in shards:
            vecadd[cfg2](x, y, z)  # each on its own device's stream: they run at once
        for d, *_ in shards:
            d.synchronize()

    t2 = _median_s(two, repeat)
    assert all(float(z[half - 1]) == 3.0 for *_, z in shards)
    return {
        "name": "data-parallel vecadd 2^30 f32, 2 GPUs vs 1",
        "one_gpu_ms": t1 * 1e3,
        "two_gpus_ms": t2 * 1e3,
        "speedup": t1 / t2,
        "target": ">= 1.8x",
        "pass": t1 / t2 >= 1.8,
    }


# ---- 3. NCCL all-reduce -----------------------------------------------------------------------------


def bench_allreduce(az: Any, cp: Any, repeat: int) -> dict[str, Any]:
    from cupy.cuda import nccl

    example = _load_example("data_parallel")
    g0, g1 = az.device(0), az.device(1)
    n = (256 << 20) // 4
    bufs = [g0.full(n, 1.0, az.f32), g1.full(n, 2.0, az.f32)]

    def on_anodize() -> None:
        why = example.nccl_allreduce(bufs)  # the example's code path
        assert why is None, why
        for b in bufs:
            b.device.synchronize()

    t_az = _median_s(on_anodize, repeat)
    comms = example._communicators(nccl, [0, 1])  # the same communicators
    arrays = []
    for k in (0, 1):
        with cp.cuda.Device(k):
            arrays.append(cp.full(n, float(k + 1), dtype=cp.float32))

    def on_cupy() -> None:
        nccl.groupStart()
        for k, (comm, x) in enumerate(zip(comms, arrays)):
            with cp.cuda.Device(k):
                stream = cp.cuda.get_current_stream().ptr
                comm.allReduce(x.data.ptr, x.data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream)
        nccl.groupEnd()
        for k in (0, 1):
            with cp.cuda.Device(k):
                cp.cuda.get_current_stream().synchronize()

    t_cp = _median_s(on_cupy, repeat)
    ratio = t_az / t_cp
    return {
        "name": "NCCL all-reduce 256 MiB f32 x 2 GPUs",
        "anodize_ms": t_az * 1e3,
        "cupy_ms": t_cp * 1e3,
        "anodize_over_cupy": ratio,
        "target": "within 5% (<= 1.05)",
        "pass": ratio <= 1.05,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()

    from anodize.runtime import gpu_count

    count = gpu_count()
    if count < 2:
        _refuse(f"it needs two CUDA GPUs, and this machine has {count}")
    try:
        import cupy as cp
    except Exception as e:  # noqa: BLE001
        _refuse(f"CuPy is needed for the baselines and NCCL (pip install anodize[nccl]): {type(e).__name__}: {e}")
    import anodize as az

    rows: list[dict[str, Any]] = []
    for bench in (lambda: bench_peer_copy(az, cp, args.repeat), lambda: bench_data_parallel(az, args.repeat)):
        rows.append(bench())
    try:
        from cupy.cuda import nccl  # noqa: F401
    except Exception as e:  # noqa: BLE001
        rows.append({"name": "NCCL all-reduce", "skipped": f"cupy.cuda.nccl unavailable: {e}"})
    else:
        rows.append(bench_allreduce(az, cp, args.repeat))

    print(f"multigpu_bench on {', '.join(d.describe() for d in az.devices()[:2])} (median of {args.repeat})")
    for r in rows:
        figures = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items() if k not in ("name", "pass"))
        verdict = "" if "pass" not in r else ("PASS" if r["pass"] else "FAIL")
        print(f"  {r['name']}: {figures}  {verdict}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()

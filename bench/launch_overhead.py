"""Host-side launch cost: anodize's validated launch vs a raw cuda.core launch of the same kernel.

    python3 bench/launch_overhead.py [--launches 20000] [--n 4096]

For each kernel (an empty one and vecadd) the same compiled, loaded kernel is
launched two ways on the same stream:

* anodize:   `kernel[config](*args)`: the safe launch, with every check
  (contract, argument kinds/dtypes/shapes/device, aliasing, `requires`)
* cuda.core: `cuda.core.launch(stream, config, handle, *flat_args)` with the
  flat ABI arguments prepared once (pointers, lengths, fault slot, rank)

Each launch is timed on its own with `perf_counter_ns`; the stream is drained
every `--drain` launches, outside the timed region, so the driver queue never
fills.  Prints the median, p10 and p90 in microseconds and anodize's median
over cuda.core's.  Needs a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))


def _time_launches(launch: Callable[[], None], count: int, drain: int, sync: Callable[[], None]) -> list[float]:
    launch()  # warm-up: compile, load, plan
    sync()
    out: list[float] = []
    clock = time.perf_counter_ns
    for k in range(count):
        t0 = clock()
        launch()
        t1 = clock()
        out.append((t1 - t0) / 1000.0)
        if (k + 1) % drain == 0:
            sync()
    sync()
    return out


def _stats(samples: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(samples, n=10)
    return statistics.median(samples), q[0], q[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20_000)
    ap.add_argument("--n", type=int, default=4096, help="vecadd length")
    ap.add_argument("--drain", type=int, default=500, help="synchronise every this many launches")
    args = ap.parse_args()

    import anodize as az
    from anodize.runtime import gpu_available

    if not gpu_available():
        print("launch_overhead: needs a CUDA GPU (see `anodize doctor`)", file=sys.stderr)
        return 1
    from cuda.core import LaunchConfig as CuLaunchConfig
    from cuda.core import launch as cu_launch
    from kernels import empty
    from vecadd import vecadd

    from anodize.runtime.compile import compile_for_device

    dev = az.device(0)
    stream = dev.stream
    n = args.n
    a = dev.to_device(np.random.rand(n).astype(np.float32))
    b = dev.to_device(np.random.rand(n).astype(np.float32))
    c = dev.empty(n, az.f32)

    cases = []
    cfg_empty = az.LaunchConfig(1, 32)
    cfg_vec = az.LaunchConfig.for_num_elems(n, block=256)
    for label, k, cfg, kargs, flat in (
        ("empty", empty, cfg_empty, (), []),
        ("vecadd", vecadd, cfg_vec, (a, b, c), [a.ptr, np.int64(n), b.ptr, np.int64(n), c.ptr, np.int64(n)]),
    ):
        loaded = compile_for_device(k, dev)
        from anodize.codegen.artifact import hidden_args, launch_grid

        raw_args = (*flat, *hidden_args(loaded.compiled, loaded.fault_address, cfg.grid, cfg.block, cfg.rank))
        raw_cfg = CuLaunchConfig(grid=launch_grid(loaded.compiled, cfg.grid), block=cfg.block, shmem_size=cfg.shared_mem)
        handle = loaded.handle

        def safe(k=k, cfg=cfg, kargs=kargs) -> None:  # type: ignore[no-untyped-def]
            k[cfg](*kargs)

        def raw(handle=handle, raw_cfg=raw_cfg, raw_args=raw_args) -> None:  # type: ignore[no-untyped-def]
            cu_launch(stream, raw_cfg, handle, *raw_args)

        anodize_us = _stats(_time_launches(safe, args.launches, args.drain, dev.synchronize))
        raw_us = _stats(_time_launches(raw, args.launches, args.drain, dev.synchronize))
        cases.append((label, anodize_us, raw_us))

    np.testing.assert_allclose(c.to_host(), a.to_host() + b.to_host())
    print(f"launch overhead on {dev.describe()}, {args.launches} launches each, microseconds per launch")
    print(f"{'kernel':<8} {'anodize median':>15} {'(p10-p90)':>14} {'cuda.core median':>17} {'(p10-p90)':>14} {'ratio':>6}")
    for label, (am, a10, a90), (rm, r10, r90) in cases:
        print(
            f"{label:<8} {am:>15.2f} {f'{a10:.2f}-{a90:.2f}':>14} {rm:>17.2f} {f'{r10:.2f}-{r90:.2f}':>14} "
            f"{am / rm:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CPU-side cost of a safe launch: anodize's Python overhead with the final cuda.core `launch` a no-op.

    python3 bench/launch_microbench.py [--launches 200000] [--repeat 7]

Runs anywhere (no GPU needed).  A `HostGpu` (tests/fakecuda.py, the fake CUDA
backend the tests use too) is a real `CudaDevice` of the runtime (`kind == "cuda"`,
the GPU launch path, a cuda.core `LaunchConfig`), whose memory is host memory and
whose kernels are compiled by the real codegen for sm_90 (ptxas included when
present); only the last call, cuda.core's `launch(stream, config, kernel, *args)`,
is replaced by a no-op.  So

    anodize = the whole `kernel[config](*args)` path up to and including the launch call
    raw     = `noop(stream, config, handle, *flat_args)` with the flat arguments prepared once

and `anodize - raw` is what anodize adds to a raw cuda.core launch on the host.  On a GPU the
ratio is (raw launch + overhead) / raw launch: for 1.1x the overhead must stay under ~0.4 us
(empty kernel, raw 4.1 us on the H200) and ~0.47 us (vecadd, raw 4.7 us).

Cases: the empty kernel; vecadd on the same buffers every launch; vecadd alternating
between two sets of buffers (the identity fast path misses every time); `fill`, with
scalars and a `requires` over them; a generic kernel (examples/generic_saxpy.py), whose
launch first finds its specialisation from the arguments' dtypes.  Each case reports the fastest batch of 500 launches
(ns per launch), which filters out preemption on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import anodize as az

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))  # fakecuda: the fake CUDA backend the tests use


@az.launch_contract(domain=1, block=64, requires=lambda out, value, rows, cols: rows * cols == len(out))
@az.kernel
def fill(out: az.DisjointSlice[az.i32], value: az.i32, rows: az.i64, cols: az.i64) -> None:
    i = az.thread.index_1d()
    if i in out:
        out[i] = value


def _noop(*args: Any) -> None:
    return None


def make_device() -> Any:
    """A CudaDevice whose memory is host memory and whose launches go to `_noop` (tests/fakecuda.py)."""
    from fakecuda import HostGpu

    from anodize.runtime import cuda_device

    cuda_device._cu_launch = _noop  # the one call replaced: cuda.core.launch
    dev = HostGpu("no-op GPU (launch replaced)")
    from anodize.runtime import device as devmod

    devmod._DEFAULT = dev  # argument-less kernels launch on the default device
    return dev


def _time(fn: Callable[[], None], launches: int, repeat: int) -> float:
    """ns per call: the fastest of `repeat` x (`launches` / 500) batches of 500 calls.

    The fastest batch is the cost without preemption or a stray GC pass (the machine may be
    shared): what the code itself costs."""
    batch = 500
    clock = time.perf_counter_ns
    best = float("inf")
    for _ in range(repeat):
        for _ in range(max(1, launches // batch)):
            t0 = clock()
            for _ in range(batch):
                fn()
            best = min(best, (clock() - t0) / batch)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n", type=int, default=4096)
    args = ap.parse_args(argv)

    from anodize.runtime.compile import compile_for_device
    from kernels import empty
    from vecadd import vecadd

    dev = make_device()
    n = args.n
    a = dev.to_device(np.ones(n, np.float32))
    b = dev.to_device(np.ones(n, np.float32))
    c = dev.empty(n, az.f32)
    a2 = dev.to_device(np.ones(n, np.float32))
    b2 = dev.to_device(np.ones(n, np.float32))
    c2 = dev.empty(n, az.f32)
    out = dev.empty(n, az.i32)
    cfg_empty = az.LaunchConfig(1, 32)
    cfg_vec = az.LaunchConfig.for_num_elems(n, block=256)
    cfg_fill = az.LaunchConfig.for_num_elems(n, block=64)
    from cuda.core import LaunchConfig as CuLaunchConfig

    rows: list[tuple[str, float, float]] = []

    def case(label: str, k: Any, cfg: Any, safe: Callable[[], None], flat: list[Any]) -> None:
        loaded = compile_for_device(k, dev)
        from anodize.codegen.artifact import hidden_args, launch_grid

        raw_args = (*flat, *hidden_args(loaded.compiled, loaded.fault_address, cfg.grid, cfg.block, cfg.rank))
        raw_cfg = CuLaunchConfig(grid=launch_grid(loaded.compiled, cfg.grid), block=cfg.block, shmem_size=cfg.shared_mem)
        handle = loaded.handle
        stream = dev._stream

        def raw() -> None:
            _noop(stream, raw_cfg, handle, *raw_args)

        safe()
        rows.append((label, _time(safe, args.launches, args.repeat), _time(raw, args.launches, args.repeat)))

    case("empty", empty, cfg_empty, lambda: empty[cfg_empty](), [])
    case("vecadd", vecadd, cfg_vec, lambda: vecadd[cfg_vec](a, b, c), [a.ptr, n, b.ptr, n, c.ptr, n])
    flip = [(a, b, c), (a2, b2, c2)]
    state = [0]

    def alternating() -> None:
        state[0] ^= 1
        vecadd[cfg_vec](*flip[state[0]])

    case("vecadd, two buffer sets alternating", vecadd, cfg_vec, alternating, [a.ptr, n, b.ptr, n, c.ptr, n])
    sets = [(a, b, c), (a2, b2, c2), (a2, b, c)]
    turn = [0]

    def rotating() -> None:
        turn[0] = (turn[0] + 1) % 3
        vecadd[cfg_vec](*sets[turn[0]])

    case("vecadd, three sets rotating (every check runs)", vecadd, cfg_vec, rotating, [a.ptr, n, b.ptr, n, c.ptr, n])
    rows_ = n // 64
    case(
        "fill (scalars, requires rows*cols == len(out))", fill, cfg_fill,
        lambda: fill[cfg_fill](out, 7, rows_, 64), [out.ptr, n, np.int32(7), np.int64(rows_), np.int64(64)],
    )
    from generic_saxpy import saxpy as gsaxpy

    two = np.float32(2.0)
    case(
        "generic saxpy (T from the dtypes)", gsaxpy.specialize(T="f32"), cfg_vec,
        lambda: gsaxpy[cfg_vec](two, a, b, c), [two, a.ptr, n, b.ptr, n, c.ptr, n],
    )
    # the alternating case pays for its own Python (a list index, a tuple unpack): measure that too
    base_state = [0]

    def alt_base() -> None:
        base_state[0] ^= 1
        _noop(*flip[base_state[0]])

    alt_cost = _time(alt_base, args.launches, args.repeat) - _time(lambda: _noop(a, b, c), args.launches, args.repeat)

    def rot_base() -> None:
        turn[0] = (turn[0] + 1) % 3
        _noop(*sets[turn[0]])

    rot_cost = _time(rot_base, args.launches, args.repeat) - _time(lambda: _noop(a, b, c), args.launches, args.repeat)

    print(f"anodize launch overhead with cuda.core `launch` replaced by a no-op ({sys.version.split()[0]})")
    print(f"{'case':<48} {'anodize ns':>11} {'raw ns':>8} {'overhead ns':>12}")
    for label, ours, raw in rows:
        extra = alt_cost if label.startswith("vecadd, two") else rot_cost if label.startswith("vecadd, three") else 0.0
        print(f"{label:<48} {ours - extra:>11.0f} {raw:>8.0f} {ours - extra - raw:>12.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The CPU backend on barrier kernels: a 2^20-element block reduction beside the same-size
element-wise kernel, in one run (issue 16, item 5: at most 3x its time).

Rows (all on `az.device("cpu")`, through the ordinary launch path, best of `--repeat`):

* elementwise: `y[i] = x[i] * 2`, one element per thread (the reference);
* block.reduce: one element per thread, `az.block.reduce`, the leader writes the block's
  sum (2^20 / 256 = 4096 blocks);
* shared tree: the unsafe-tier reduction by hand (shared array, 8 barriers in a uniform
  `while`), one element per thread;
* examples/reduce_sum.py: grid-stride loop, warp shuffles, shared memory, 2 barriers.

    python bench/cpu_barrier_bench.py [--n 1048576] [--repeat 7] [--threaded-blocks 4]

The ratio (reduction time over element-wise time) is the figure that matters: the machine
this runs on may be shared and loaded, which moves absolute times but both rows alike.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import anodize as az  # noqa: E402
from anodize import AtomicSlice, DisjointSlice, Slice, f32, kernel, launch_contract, thread  # noqa: E402

BLOCK = 256


@launch_contract(domain=1, block=BLOCK)
@kernel
def scale(x: Slice[f32], y: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in y and i in x:
        y[i] = x[i] * 2.0


@launch_contract(domain=1, block=BLOCK)
@kernel
def block_sum(x: Slice[f32], partial: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    v = x[i] if i in x else f32(0.0)
    s = az.block.reduce(v, "sum")
    b = thread.block_witness_1d()
    if thread.is_block_leader():
        partial[b] = s


@launch_contract(domain=1, block=BLOCK, requires=lambda x, total: len(total) == 1)
@kernel
def tree_sum(x: Slice[f32], total: AtomicSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        red = az.shared.array(BLOCK, f32)
        t = thread.tid_x()
        red[t] = x[i] if i in x else f32(0.0)
        az.syncthreads()
        s = BLOCK // 2
        while s > 0:
            if t < s:
                red[t] += red[t + s]
            az.syncthreads()
            s = s // 2
        if t == 0:
            total.add(0, red[0])


def best(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threaded-blocks", type=int, default=4, help="blocks to time on the old runner (0: skip)")
    a = ap.parse_args(argv)
    from examples.reduce_sum import reduce_sum  # noqa: PLC0415

    dev = az.device("cpu")
    n = a.n
    blocks = -(-n // BLOCK)
    x_h = np.random.default_rng(16).random(n, dtype=np.float32)
    x = dev.to_device(x_h)
    y = dev.empty(n, az.f32)
    partial = dev.zeros(blocks, az.f32)
    total = dev.zeros(1, az.f32)
    total2 = dev.zeros(1, az.f32)
    cfg = az.LaunchConfig(grid=blocks, block=BLOCK)
    runs = {
        "elementwise": lambda: scale[cfg](x, y),
        "block.reduce": lambda: block_sum[cfg](x, partial),
        "shared tree": lambda: tree_sum[cfg](x, total),
        "examples/reduce_sum.py": lambda: reduce_sum[az.LaunchConfig(grid=64, block=BLOCK)](x, total2),
    }
    for f in runs.values():  # compile, and check the answers once
        f()
    ref = x_h.astype(np.float64)
    np.testing.assert_array_equal(y.to_host(), x_h * 2)
    np.testing.assert_allclose(partial.to_host(), np.pad(ref, (0, blocks * BLOCK - n)).reshape(blocks, BLOCK).sum(1), rtol=1e-5)
    assert abs(float(total.to_host()[0]) - ref.sum()) <= 1e-4 * ref.sum()
    out = {name: best(f, a.repeat) for name, f in runs.items()}
    base = out["elementwise"]
    print(f"CPU backend, n = {n} f32, block {BLOCK}, best of {a.repeat} ({os.cpu_count()} host cores)")
    print(f"{'kernel':<24} {'ms':>9} {'x elementwise':>14}")
    for name, s in out.items():
        print(f"{name:<24} {s * 1e3:9.2f} {s / base:14.2f}")
    print(f"ratio block.reduce / elementwise = {out['block.reduce'] / base:.2f} (target <= 3)")
    if a.threaded_blocks:
        t = threaded_block_seconds(x_h, a.threaded_blocks)
        print(f"before (one host thread per GPU thread): {t * 1e3:.0f} ms per block of {BLOCK}, "
              f"so about {t * blocks:.0f} s for the {blocks} blocks")
    return out


def threaded_block_seconds(x_h: np.ndarray, nblocks: int) -> float:
    """The block reduction on the one-host-thread-per-GPU-thread runner (the CPU backend's
    only barrier runner before the split), over `nblocks` blocks: seconds per block."""
    from anodize.codegen.driver import compile_cpu  # noqa: PLC0415

    ck = compile_cpu(block_sum, split_barriers=False)
    assert ck.cpu_entry is not None
    x = np.ascontiguousarray(x_h[: nblocks * BLOCK])
    part = np.zeros(nblocks, np.float32)
    rec = np.zeros(4, np.uint64)
    flat = [x.ctypes.data, len(x), part.ctypes.data, len(part)]
    t0 = time.perf_counter()
    ck.cpu_entry((nblocks, 1, 1), (BLOCK, 1, 1), flat, rec.ctypes.data, 1, 0)
    return (time.perf_counter() - t0) / nblocks


if __name__ == "__main__":
    main()

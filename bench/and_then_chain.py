"""Host cost of an `and_then` chain (issue 32): per op, beside plain launches and a graph replay.

    python3 bench/and_then_chain.py [--device cpu|0|fake] [--chain 1000] [--n 1024] [--rounds 5] [--pipeline N [--slots 3] [--iters 256]] [--clock wall|thread]

The chain copies a small vector back and forth between two buffers (`bench/kernels.py`'s
`copy`), `--chain` kernels long, issued on the device's own stream four ways:

* plain:       `copy[cfg](x, y)`, `copy[cfg](y, x)`, ... (the safe launch)
* then-chain:  `copy[cfg].op(...)` sequenced with `.then` (built per round, then queued)
* and_then:    `az.value(None).and_then(lambda _: copy[cfg].op(...))` x chain: each step's op
               is built by its function while the chain is queued
* graph:       `az.capture` of the `and_then` chain, `graph.replay(wait=False)`
* graph x8:    eight such replays queued back to back, then one wait (per kernel of all eight):
               the per-kernel cost of a replay, as bench/graph_replay.py measures it (the issue's
               "replays at the current per-kernel cost")
* op.run:      `copy[cfg].op(...).run()` per kernel: one lazy op at a time, each run and waited for
               (a whole submission per kernel: handle, in-flight registration, a completion event,
               the host's wait for it and the kernel's fault-record read)
* plain+sync:  `copy[cfg](x, y)` then `dev.synchronize()` per kernel: the round trip `op.run`
               cannot beat; "op.run - plain+sync" is the submission's own cost

"host" is the time to build and queue the work (until the call returns; on the CPU backend
the kernels run inline, so it includes them), "done" adds the wait for completion.  Both per
kernel, median over rounds; the modes take turns within each round.  `--clock thread` times "host" with the issuing thread's CPU time
(`time.thread_time`) instead of the wall clock: on a shared machine the wall clock counts the
time other processes hold the cores; on the CPU backend (`run` queues on the calling thread)
the thread's CPU time is all of the work.  The target: and_then host <= plain host + 2 us per op, and the
graph replay at the per-kernel cost of bench/graph_replay.py.

`--device fake` runs the GPU device's host path on tests/fakecuda.py's fake driver with the
kernels not run (cuda.core's `launch`, and the fake device's own, return at once): what is left is the host cost of queueing
on a GPU (driver calls there are near free), so "and_then - plain" approximates the host
overhead per op on a real GPU.

`--pipeline N` then runs examples/async_double_buffer.py on N elements (16 chunks, `--slots`
device buffers and streams, `--iters` steps of the kernel per element): the multi-buffered
`and_then` pipeline beside its serial form, in one run, medians of `--rounds` after two
warm-up rounds (target >= 1.8x on the H200), and the breakdown that bounds it: one chunk's
upload, kernel and download times, their sum over the chunks, and the ideal overlapped time
for that many slots (a stream per slot runs its chunk's stages in order, so two slots cap
the speed-up at 2x; three reach max(upload, kernel, download) per chunk).
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


REPLAYS = 8  # the `graph xN` row: replays queued back to back, then one wait


def _measure(modes: list[tuple[Callable[[], Any], Callable[[Any], None]]], rounds: int, clock: Callable[[], float] = time.perf_counter) -> list[tuple[float, float]]:
    """For each (issue, wait) mode, the median over rounds of (host seconds to build and queue,
    seconds to completion), by `clock`.  The modes take turns within each round, so a burst of
    load on a shared machine lands on all of them rather than on one mode's rounds."""
    for issue, wait in modes:
        wait(issue())  # warm-up
    hosts: list[list[float]] = [[] for _ in modes]
    walls: list[list[float]] = [[] for _ in modes]
    for _ in range(rounds):
        for m, (issue, wait) in enumerate(modes):
            t0 = clock()
            h = issue()
            t1 = clock()
            wait(h)
            t2 = clock()
            hosts[m].append(t1 - t0)
            walls[m].append(t2 - t0)
    return [(statistics.median(h), statistics.median(w)) for h, w in zip(hosts, walls)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cpu, fake (the fake CUDA driver, kernels not run), or a GPU ordinal (default: the default device)")
    ap.add_argument("--chain", type=int, default=1000, help="kernels in the chain")
    ap.add_argument("--n", type=int, default=1024, help="vector length")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pipeline", type=int, default=0, help="also run the multi-buffered pipeline on N elements")
    ap.add_argument("--slots", type=int, default=3, help="the pipeline's device buffers (and streams): 2 is a double buffer")
    ap.add_argument("--iters", type=int, default=256, help="the pipeline kernel's steps per element")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall", help="time with the wall clock or the thread's CPU time")
    args = ap.parse_args()

    import anodize as az
    from anodize.runtime import streams as S
    from anodize.runtime.submission import _start
    from kernels import copy

    fake = args.device == "fake"
    if fake:  # tests/fakecuda.py: a CudaDevice on a fake driver; its kernels' launches return at once
        sys.path.insert(0, str(ROOT / "tests"))
        import fakecuda

        import cuda.core

        fakecuda.run_entry = lambda *a: None
        dev = fakecuda.install(fakecuda.Patch())[0]
        cuda.core.launch = lambda *a: None  # (the fake driver's logging launch, as cheap as a plain launch's)
        # a plain launch calls cuda.core's `launch` directly too, as a CudaDevice's does (the fake
        # device's own `launch` adds two Python calls that a GPU's plain launch does not make)
        dev.launch_call = lambda handle, config: (cuda.core.launch, (dev._stream, config, handle))
    else:
        dev = az.device() if args.device is None else az.device("cpu") if args.device == "cpu" else az.device(int(args.device))
    n, chain = args.n, args.chain
    cfg = az.LaunchConfig.for_num_elems(n, block=256)
    data = np.random.default_rng(3).random(n, dtype=np.float32)
    x, y = dev.to_device(data), dev.empty(n, az.f32)
    launch = copy[cfg]

    def on_stream(op: az.Op) -> Any:  # `op.run()` without its wait: queued on the device's stream
        return _start(op, S.SingleLane(dev, S.device_lane(dev)))

    def plain() -> None:
        for k in range(chain):
            if k % 2:
                launch(y, x)
            else:
                launch(x, y)

    def then_chain() -> Any:
        op: az.Op = launch.op(x, y)
        for k in range(1, chain):
            op = op.then(launch.op(y, x) if k % 2 else launch.op(x, y))
        return on_stream(op)

    def step(k: int) -> Callable[[Any], az.Op]:
        src, dst = (y, x) if k % 2 else (x, y)
        return lambda _: launch.op(src, dst)

    steps = [step(k) for k in range(chain)]

    def and_then_op() -> az.Op:
        op: az.Op = az.value(None, device=dev)
        for f in steps:
            op = op.and_then(f)
        return op

    def and_then() -> Any:
        return on_stream(and_then_op())

    graph = az.capture(and_then_op())

    def replay() -> Any:
        return graph.replay(wait=False)

    def replays() -> Any:  # back to back, as bench/graph_replay.py times them: the per-kernel cost
        for _ in range(REPLAYS - 1):
            graph.replay(wait=False)
        return graph.replay(wait=False)

    def single() -> None:
        for k in range(chain):
            (launch.op(y, x) if k % 2 else launch.op(x, y)).run()

    def synced() -> None:  # what `op.run` waits for, without the op: a launch and a device synchronisation
        for k in range(chain):
            if k % 2:
                launch(y, x)
            else:
                launch(x, y)
            dev.synchronize()

    def sync(_: Any = None) -> None:
        dev.synchronize()

    def wait(h: Any) -> None:
        h.wait()

    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    started = time.perf_counter()
    modes = [(plain, sync), (then_chain, wait), (and_then, wait), (replay, wait), (replays, wait), (single, sync), (synced, sync)]
    timed = _measure(modes, args.rounds, clock)
    (h_plain, w_plain), (h_then, w_then), (h_and, w_and), (h_graph, w_graph), (h_reps, w_reps), (h_one, w_one), (h_sync, w_sync) = timed
    h_reps, w_reps = h_reps / REPLAYS, w_reps / REPLAYS
    if not fake:  # (the fake device runs no kernel)
        np.testing.assert_array_equal(y.to_host(), data)  # an even chain ends with y == x == data

    us = 1e6 / chain
    print(f"and_then chain on {dev.describe()}: {chain} copy kernels (n={n}), median of {args.rounds} rounds, {args.clock} clock")
    print(f"{'mode':<12} {'host us/op':>11} {'done us/op':>11}")
    rows = (("plain", h_plain, w_plain), ("then-chain", h_then, w_then), ("and_then", h_and, w_and), ("graph", h_graph, w_graph),
            (f"graph x{REPLAYS}", h_reps, w_reps), ("op.run", h_one, w_one), ("plain+sync", h_sync, w_sync))
    for name, h, w in rows:
        print(f"{name:<12} {h * us:>11.3f} {w * us:>11.3f}")
    extra = (h_and - h_plain) * us
    print(f"and_then host cost beyond a plain launch: {extra:.3f} us/op (target <= 2 us): {'met' if extra <= 2 else 'NOT met'}")
    print(f"graph replay (to completion) vs plain: {w_graph / w_plain:.2f}x; one replay {w_graph * us:.3f} us/kernel to completion, "
          f"{REPLAYS} back to back {w_reps * us:.3f} (the per-kernel cost: bench/graph_replay.py's way)")
    print(f"op.run beyond a launch and a device synchronisation: {(w_one - w_sync) * us:.3f} us/op (a submission: handle, "
          f"in-flight registration, completion event, fault-record read)")
    print(f"(timed part: {time.perf_counter() - started:.1f} s)")
    if args.pipeline:
        import importlib.util

        spec = importlib.util.spec_from_file_location("_double_buffer", ROOT / "examples" / "async_double_buffer.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.main(n=args.pipeline, chunks=16, iters=args.iters, slots=args.slots, rounds=args.rounds, dev=dev, check=not fake)
    return 0


if __name__ == "__main__":
    sys.exit(main())

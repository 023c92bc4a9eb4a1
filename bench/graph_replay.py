"""Per-kernel cost of a 100-kernel chain: CUDA-graph replay (`az.capture`) vs one-by-one launches.

    python3 bench/graph_replay.py [--chain 100] [--reps 200] [--n 4096]

The chain copies a small vector back and forth between two buffers, `--chain`
kernels long (`bench/kernels.py`'s `copy`).  Three ways, each timed from the
first submission to the end of a device synchronisation, divided by the number
of kernels:

* one by one:   `copy[cfg](x, y)`, `copy[cfg](y, x)`, ... (the safe launch, all checks)
* graph:        `graph.replay(wait=False)` of `az.capture(chain op)`
* graph, 2 sets: replays alternating between two buffer sets (the cached executable
  graph per address set)

Also prints the host time to issue the work (before the synchronisation) and the
ratio of the one-by-one cost over the replay cost.  Needs a GPU.
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
sys.path.insert(0, str(ROOT / "bench"))


def _measure(issue: Callable[[], None], sync: Callable[[], None], rounds: int) -> tuple[float, float]:
    """Median over rounds of (host issue seconds, wall seconds to completion)."""
    issue()
    sync()  # warm-up
    hosts: list[float] = []
    walls: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        issue()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        hosts.append(t1 - t0)
        walls.append(t2 - t0)
    return statistics.median(hosts), statistics.median(walls)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chain", type=int, default=100, help="kernels in the chain")
    ap.add_argument("--reps", type=int, default=200, help="chains per timed round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=4096, help="vector length")
    args = ap.parse_args()

    import anodize as az
    from anodize.runtime import gpu_available

    if not gpu_available():
        print("graph_replay: needs a CUDA GPU (see `anodize doctor`)", file=sys.stderr)
        return 1
    from kernels import copy

    dev = az.device(0)
    n, chain, reps = args.n, args.chain, args.reps
    cfg = az.LaunchConfig.for_num_elems(n, block=256)
    data = np.random.default_rng(3).random(n, dtype=np.float32)
    x, y = dev.to_device(data), dev.empty(n, az.f32)
    x2, y2 = dev.to_device(data), dev.empty(n, az.f32)

    def chain_op(a: az.Buffer, b: az.Buffer) -> az.Op:
        op: az.Op = copy[cfg].op(a, b)
        for k in range(1, chain):
            op = op.then(copy[cfg].op(b, a) if k % 2 else copy[cfg].op(a, b))
        return op

    def one_by_one() -> None:
        launch_ab, launch_ba = copy[cfg], copy[cfg]
        for _ in range(reps):
            for k in range(chain):
                if k % 2:
                    launch_ba(y, x)
                else:
                    launch_ab(x, y)

    t0 = time.perf_counter()
    graph = az.capture(chain_op(x, y))
    t_capture = time.perf_counter() - t0
    last: list[az.Handle] = []

    def replay() -> None:
        for _ in range(reps):
            last.append(graph.replay(wait=False))

    def replay_two_sets() -> None:
        for r in range(reps):
            last.append(graph.replay(*((x, y) if r % 2 == 0 else (x2, y2)), wait=False))

    def sync_graph() -> None:
        # the last replay completes after every earlier one (each waits for the one before it,
        # as they share buffers); its fault check reads the same fault slot they wrote
        last[-1].wait()
        last.clear()
        dev.synchronize()

    kernels = chain * reps
    h_one, w_one = _measure(one_by_one, dev.synchronize, args.rounds)
    h_rep, w_rep = _measure(replay, sync_graph, args.rounds)
    h_two, w_two = _measure(replay_two_sets, sync_graph, args.rounds)

    # correctness: an even chain copies x -> y -> x ..., ending with y == x == data
    np.testing.assert_array_equal(y.to_host(), data)
    np.testing.assert_array_equal(y2.to_host(), data)

    us = 1e6 / kernels
    print(f"graph replay on {dev.describe()}: chain of {chain} copy kernels (n={n}), {reps} chains per round")
    print(f"capture + instantiate: {t_capture * 1e3:.2f} ms")
    print(f"{'mode':<22} {'wall us/kernel':>15} {'host us/kernel':>15}")
    print(f"{'one by one':<22} {w_one * us:>15.3f} {h_one * us:>15.3f}")
    print(f"{'graph replay':<22} {w_rep * us:>15.3f} {h_rep * us:>15.3f}")
    print(f"{'graph, 2 buffer sets':<22} {w_two * us:>15.3f} {h_two * us:>15.3f}")
    print(f"ratio one-by-one / replay (wall): {w_one / w_rep:.2f}x; host issue: {h_one / h_rep:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

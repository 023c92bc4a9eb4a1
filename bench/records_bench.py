"""Records and bundles on the GPU (issue 29's targets), beside numba-cuda.

    python bench/records_bench.py --log2n 24 --json /tmp/records.json
    PYTHONPATH=/tmp/site_numpy python3 bench/records_numba_peer.py --log2n 24   # the peer, its own process

1. The particle step of examples/particles.py over 2^log2n 32-byte records: event-timed ms,
   its bandwidth counted in the record bytes it reads and writes (2 x 32 bytes a record),
   against the copy ceiling (bench/kernels.copy_gs over the same bytes as f32).
2. A bundle kernel against the same kernel with separate slice parameters
   (tests/runtime/rt_bundle_kernels.py: advance / advance_separate): event-timed ms, and
   the per-launch host microseconds of each on a tiny n (the launch dominates): the same
   arguments every launch (the memos hit), and three sets of outputs in turn (they miss: every
   launch checked).
`--cpu` runs part 2's host timing on the CPU backend, `--fake` on the GPU device's host path with
cuda.core's launch a no-op (bench/launch_microbench.py's `HostGpu`, tests/fakecuda.py): neither needs
a GPU, and both count the CPU time of the process (`time.process_time`), not wall time, so that
a loaded machine's preemption does not count.  Bundle and separate launches alternate, round by round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "runtime"))

import anodize as az  # noqa: E402


def _particles(n: int) -> np.ndarray:
    from particles import Particle

    rng = np.random.default_rng(3)
    h = np.zeros(n, Particle.dtype)
    h["pos"] = rng.random((n, 3), dtype=np.float32)
    h["vel"] = rng.standard_normal((n, 3), dtype=np.float32)
    h["mass"] = np.float32(1.0)
    return h


def particle_part(args: argparse.Namespace, dev: az.Device) -> dict[str, object]:
    from kernels import copy_gs
    from particles import Particle, particle_step, reference
    from suite import time_events

    n = 1 << args.log2n
    h = _particles(n)
    a, b = dev.to_device(h), dev.empty(n, Particle)
    dt = np.float32(0.05)
    cfg = az.LaunchConfig.for_num_elems(n, block=256)
    particle_step[cfg](a, dt, b)
    got = b.to_host()
    want = reference(h, dt)
    for name in Particle.dtype.names:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)
    ms = time_events(lambda: particle_step[cfg](a, dt, b), args.reps, "anodize", dev.stream)
    words = n * Particle.dtype.itemsize // 4
    fa, fc = a.view(az.f32).view(words), b.view(az.f32).view(words)  # the same bytes, as f32
    ccfg = az.LaunchConfig.for_num_elems(words, block=256)
    copy_ms = time_events(lambda: copy_gs[ccfg](fa, fc), args.reps, "anodize", dev.stream)
    nbytes = 2 * n * Particle.dtype.itemsize
    best, ceiling = min(ms), min(copy_ms)
    return {
        "n": n, "record_bytes": Particle.dtype.itemsize, "particle_ms": ms, "copy_ms": copy_ms,
        "particle_gbs": nbytes / best / 1e6, "copy_gbs": nbytes / ceiling / 1e6, "fraction_of_copy": ceiling / best,
    }


def bundle_part(args: argparse.Namespace, dev: az.Device, gpu: bool) -> dict[str, object]:
    import rt_bundle_kernels as K
    from suite import host_launch_us, time_events

    out: dict[str, object] = {}
    for label, n in (("big", 1 << args.log2n), ("tiny", args.tiny)):
        if label == "big" and not gpu:
            continue
        rng = np.random.default_rng(1)
        pos = dev.to_device(rng.standard_normal(n, dtype=np.float32))
        vel = dev.to_device(rng.standard_normal(n, dtype=np.float32))
        o, h = dev.empty(n, az.f32), dev.zeros(1, az.u32)
        s = K.State(pos=pos, vel=vel, out=o, hits=h)
        cfg = az.LaunchConfig.for_num_elems(n, block=256)
        launch_b, launch_s = K.advance[cfg], K.advance_separate[cfg]

        def bundle() -> None:
            launch_b(s, 0.5)

        def separate() -> None:
            launch_s(pos, vel, o, h, 0.5)

        # three sets of outputs in turn: no launch repeats one of the last two (the memos miss)
        outs = [(dev.empty(n, az.f32), dev.zeros(1, az.u32)) for _ in range(3)]
        states = [K.State(pos=pos, vel=vel, out=a, hits=b) for a, b in outs]
        turn = [0]

        def bundle_rot() -> None:
            t = turn[0] = (turn[0] + 1) % 3
            launch_b(states[t], 0.5)

        def separate_rot() -> None:
            t = turn[0] = (turn[0] + 1) % 3
            launch_s(pos, vel, *outs[t], 0.5)

        if label == "big":
            out["bundle_ms"] = time_events(bundle, args.reps, "anodize", dev.stream)
            out["separate_ms"] = time_events(separate, args.reps, "anodize", dev.stream)
        else:
            sync = dev.synchronize
            timer = host_launch_us if gpu else cpu_launch_us
            hb, hs, rb, rs = [], [], [], []
            for _ in range(args.rounds):  # alternate, so drift hits both alike
                hb += timer(bundle, args.launches, sync)
                hs += timer(separate, args.launches, sync)
                rb += timer(bundle_rot, args.launches, sync)
                rs += timer(separate_rot, args.launches, sync)
            out["bundle_host_us"] = statistics.median(hb)
            out["separate_host_us"] = statistics.median(hs)
            out["bundle_extra_host_us"] = statistics.median(hb) - statistics.median(hs)
            out["rotating_bundle_host_us"] = statistics.median(rb)
            out["rotating_separate_host_us"] = statistics.median(rs)
            out["rotating_bundle_extra_host_us"] = statistics.median(rb) - statistics.median(rs)
    if "bundle_ms" in out:
        out["bundle_vs_separate"] = min(out["bundle_ms"]) / min(out["separate_ms"])  # type: ignore[arg-type]
    return out


def cpu_launch_us(fn: Callable[[], None], launches: int, sync: Callable[[], None]) -> list[float]:
    """Per-launch CPU microseconds of the process (`time.process_time`), 5 batches of launches/5."""
    fn()
    sync()
    out = []
    per = max(launches // 5, 1)
    for _ in range(5):
        t = time.process_time()
        for _ in range(per):
            fn()
        out.append((time.process_time() - t) / per * 1e6)
        sync()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2n", type=int, default=24)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--tiny", type=int, default=4096)
    ap.add_argument("--launches", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu", action="store_true", help="the CPU backend: part 2's host timing only")
    ap.add_argument("--fake", action="store_true", help="the GPU device's host path, cuda.core's launch a no-op: part 2's host timing only")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.fake:
        from launch_microbench import make_device

        dev = make_device()
    else:
        dev = az.device("cpu" if args.cpu else 0)
    gpu = not (args.cpu or args.fake)
    res: dict[str, object] = {"device": dev.describe()}
    if gpu:
        res["particles"] = particle_part(args, dev)
    res["bundle"] = bundle_part(args, dev, gpu=gpu)
    text = json.dumps(res, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

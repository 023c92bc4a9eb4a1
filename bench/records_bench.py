"""Records and bundles on the GPU (issue 29's targets), beside numba-cuda.

    python3 bench/records_bench.py --log2n 24 --json /tmp/records.json [--numba-path /tmp/site_numpy]
    PYTHONPATH=/tmp/site_numpy python3 bench/records_numba_peer.py --log2n 24   # the peer alone

1. The particle step of examples/particles.py over 2^log2n 32-byte records: event-timed ms,
   its bandwidth counted in the record bytes it reads and writes (2 x 32 bytes a record),
   against the copy ceiling of the same bytes: the faster of a device-to-device memcpy and
   bench/kernels.copy_gs at one 16-byte chunk a thread (`copy_ceiling`; both printed, each
   checked).  With `--numba-path` numba-cuda's same kernel runs beside it in its own process
   (bench/records_numba_peer.py) and `vs_numba` is numba's best time / ours.
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
    ceiling = copy_ceiling(dev, a, b, args.reps)
    nbytes = 2 * n * Particle.dtype.itemsize
    best = min(ms)
    out: dict[str, object] = {
        "n": n, "record_bytes": Particle.dtype.itemsize, "particle_ms": ms, "particle_gbs": nbytes / best / 1e6,
        **{f"{k}_ms": v for k, v in ceiling.items()},
        **{f"{k}_gbs": nbytes / min(v) / 1e6 for k, v in ceiling.items()},
    }
    ceil_name = min(ceiling, key=lambda k: min(ceiling[k]))
    out["ceiling"] = ceil_name
    out["ceiling_gbs"] = out[f"{ceil_name}_gbs"]
    out["fraction_of_copy"] = min(ceiling[ceil_name]) / best
    if args.numba_path:
        from suite import peer_process

        nb = peer_process("records_numba_peer.py", ["--log2n", str(args.log2n), "--reps", str(args.reps)], args.numba_path)
        if nb:
            out["numba_particle_ms"] = nb["numba_particle_ms"]
            out["vs_numba"] = min(nb["numba_particle_ms"]) / best  # > 1: anodize is faster
    return out


def copy_ceiling(dev: az.Device, a: az.Buffer, b: az.Buffer, reps: int) -> dict[str, list[float]]:
    """The copy ceiling over the particle step's bytes (`a` read, `b` written), measured two ways:
    the driver's device-to-device memcpy (`b.copy_from(a)`, cuMemcpyDtoDAsync on the device's
    stream) and bench/kernels.copy_gs over the same bytes as f32 (16-byte accesses, one 4-word
    chunk a thread: the grid of bench/suite.py's grid-stride rows).  The faster is the ceiling.
    Launching copy_gs with one thread a word (4x the threads it needs) read 1,790 GB/s on an
    H100 where the particle step read 2,860: that grid is not a ceiling."""
    from kernels import copy_gs
    from suite import time_events

    words = a.nbytes // 4
    fa, fc = a.view(az.f32).view(words), b.view(az.f32).view(words)  # the same bytes, as f32
    memcpy_ms = time_events(lambda: b.copy_from(a), reps, "anodize", dev.stream)
    if not np.array_equal(b.view(az.u8).to_host(), a.view(az.u8).to_host()):
        raise AssertionError("the device-to-device memcpy did not copy the records")
    b.view(az.u8).fill(0)
    gcfg = az.LaunchConfig.for_num_elems(-(-words // 4), block=256)
    kernel_ms = time_events(lambda: copy_gs[gcfg](fa, fc), reps, "anodize", dev.stream)
    if not np.array_equal(b.view(az.u8).to_host(), a.view(az.u8).to_host()):
        raise AssertionError("copy_gs did not copy the records")
    return {"copy_memcpy": memcpy_ms, "copy_kernel": kernel_ms}


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
    ap.add_argument("--numba-path", default="", help="run bench/records_numba_peer.py beside it with this PYTHONPATH "
                    "(numba-cuda needs an older NumPy: /tmp/site_numpy on the GPU image) and print its time and ratio")
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

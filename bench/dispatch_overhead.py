"""Dispatch cost of the launch forms, side by side in one run: a held launcher against the
config built inline on every call (plain and generic kernels), and `torch.add`.

    python3 bench/dispatch_overhead.py [--n 4096] [--launches 2000] [--rounds 7] [--json out.json]
    python3 bench/dispatch_overhead.py --cpu      # the CPU backend: host time only

Forms (the same tiny arrays, every launch validated in full):

* held tile / SIMT / generic: `L = k[cfg]` once, then `L(a, b, c)` (`L(a, b, c, BLOCK, 0)`)
* per-call for_tiles / for_num_elems / LaunchConfig(g, b): `k[az.LaunchConfig.for_tiles(...)](a, b, c)`
* per-call generic: `add4[az.LaunchConfig.for_tiles(...)](a, b, c, BLOCK, 0)` (`az.Constant`s)
* torch.add: `torch.add(a, b, out=c)` (GPU only)
* build for_tiles, k[for_tiles] (no launch): the per-call form's extra host work alone

Two figures a form: host microseconds a launch (`--launches` launches in a loop, one sync
after it, outside the time), and event-timed microseconds a launch over the same loop (what a
stream of launches costs the GPU: the host's rate, once it is slower than the kernel).  Each
is the median of `--rounds` interleaved rounds.  Results: bench/RESULTS.md.
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
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "examples"))

import anodize as az  # noqa: E402
from anodize import DisjointSlice, Slice, f32, tile  # noqa: E402
from tile_add import BLOCK, add  # noqa: E402  (the examples' kernels: the tile add, 1024 a tile over 8 warps)
from vecadd import vecadd as vadd  # noqa: E402  (256 threads a block)


@az.launch_contract(domain=1, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@az.tile_kernel(num_warps=8)
def add4(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], TILE: az.Constant[int], V: az.Constant[int]) -> None:
    pid = tile.program_id_1d()  # `V` only picks a specialisation, as in bench/tile_add_probe.py
    tile.store(c, pid, tile.load(a, pid, TILE) + tile.load(b, pid, TILE))


def forms(n: int, a: object, b: object, c: object, torch: object) -> dict[str, tuple[Callable[[], object], str]]:
    """name -> (one launch, its backend for event timing: "anodize", "torch" or "host")."""
    LC = az.LaunchConfig
    held_t = add[LC.for_tiles((n,), (BLOCK,))]
    held_v = vadd[LC.for_num_elems(n, 256)]
    held_g = add4[LC.for_tiles((n,), (BLOCK,))]
    grid = -(-n // 256)
    out: dict[str, tuple[Callable[[], object], str]] = {
        "held tile launcher": (lambda: held_t(a, b, c), "anodize"),
        "per-call for_tiles": (lambda: add[LC.for_tiles((n,), (BLOCK,))](a, b, c), "anodize"),
        "held SIMT launcher": (lambda: held_v(a, b, c), "anodize"),
        "per-call for_num_elems": (lambda: vadd[LC.for_num_elems(n, 256)](a, b, c), "anodize"),
        "per-call LaunchConfig(g, b)": (lambda: vadd[LC(grid, 256)](a, b, c), "anodize"),
        "held generic launcher": (lambda: held_g(a, b, c, BLOCK, 0), "anodize"),
        "per-call generic (Constants)": (lambda: add4[LC.for_tiles((n,), (BLOCK,))](a, b, c, BLOCK, 0), "anodize"),
        "build for_tiles (no launch)": (lambda: LC.for_tiles((n,), (BLOCK,)), "host"),
        "add[for_tiles] (no launch)": (lambda: add[LC.for_tiles((n,), (BLOCK,))], "host"),
    }
    if torch is not None:
        out["torch.add(out=)"] = (lambda: torch.add(a, b, out=c), "torch")  # type: ignore[attr-defined]
    return out


def _loop(fn: Callable[[], object], count: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(count):
            fn()

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096, help="elements (a tiny kernel: the launch dominates)")
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cpu", action="store_true", help="the CPU backend, host time only")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    n, count = args.n, args.launches
    torch = None
    if args.cpu:
        dev = az.device("cpu")
        a, b = dev.to_device(np.ones(n, np.float32)), dev.to_device(np.ones(n, np.float32))
        c = dev.empty(n, az.f32)

        def sync() -> None:
            pass
    else:
        import torch as _torch

        torch = _torch
        dev = az.device(0)
        a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        c = torch.empty_like(a)

        def sync() -> None:
            dev.synchronize()
            torch.cuda.synchronize()  # type: ignore[attr-defined]

    cases = forms(n, a, b, c, torch)
    for fn, _ in cases.values():  # warm-up: compile, load, plan, specialise
        fn()
    sync()
    if torch is not None:
        want = (a + b).cpu().numpy()  # type: ignore[operator, attr-defined]
        for name, (fn, be) in cases.items():
            if be == "anodize":
                c.zero_()  # type: ignore[attr-defined]
                fn()
                sync()
                np.testing.assert_allclose(c.cpu().numpy(), want, err_msg=name)  # type: ignore[attr-defined]
    host: dict[str, list[float]] = {k: [] for k in cases}
    event: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for name, (fn, be) in cases.items():
            run = _loop(fn, count)
            sync()
            t0 = time.perf_counter()
            run()
            t1 = time.perf_counter()
            sync()
            host[name].append((t1 - t0) / count * 1e6)
            if torch is not None and be != "host":
                from suite import time_events

                ms = time_events(run, 1, be, dev.stream)
                event[name].append(ms[0] / count * 1e3)
    held_of = {"per-call for_tiles": "held tile launcher", "per-call for_num_elems": "held SIMT launcher",
               "per-call LaunchConfig(g, b)": "held SIMT launcher", "per-call generic (Constants)": "held generic launcher"}
    where = "CPU backend" if args.cpu else dev.describe()
    print(f"dispatch overhead on {where}: n={n}, {count} launches a round, median of {args.rounds} rounds, us a launch")
    print(f"(anodize from {Path(az.__file__).parent})")
    print(f"{'form':<30} {'host us':>8} {'(min)':>7} {'vs held':>8} {'event us':>9} {'(min)':>7}")
    rows = []
    for name in cases:
        h = statistics.median(host[name])
        e = statistics.median(event[name]) if event[name] else None
        held = held_of.get(name)
        extra = h - statistics.median(host[held]) if held else None
        e_min = min(event[name]) if event[name] else None
        rows.append({"form": name, "host_us": h, "host_min_us": min(host[name]), "event_us": e, "event_min_us": e_min, "vs_held_us": extra})
        print(f"{name:<30} {h:>8.2f} {min(host[name]):>7.2f} {'' if extra is None else f'{extra:+8.2f}':>8} "
              f"{'' if e is None else f'{e:9.2f}'} {'' if e_min is None else f'{e_min:7.2f}'}")
    if args.json is not None:
        args.json.write_text(json.dumps({"device": where, "anodize": az.__file__, "n": n, "launches": count, "rounds": args.rounds, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

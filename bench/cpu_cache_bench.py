"""The CPU backend's machine-code cache: fresh processes, one after another, on one cache.

    python bench/cpu_cache_bench.py [--runs 5] [--tree DIR]

For examples/vecadd.py and the tile softmax of examples/tile_softmax.py, with a new cache
directory (`ANODIZE_CACHE=on`): one process to fill it, then `--runs` fresh processes, each
timed two ways: the whole process (`python examples/vecadd.py`, interpreter start to exit)
and, in a separate process, the kernel's first `compile_for_device` on the CPU device (what
a launch waits for before it runs: cache load or check + compile + JIT).  Medians.  `--tree`
runs another checkout's examples with its own `.venv` (the "before" of a comparison);
byte-compile both trees first (`python -m compileall -q anodize checker codegen runtime
examples`: the VM sets PYTHONDONTWRITEBYTECODE=1).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

LOAD = """
import sys, time
sys.path.insert(0, "examples")
t0 = time.perf_counter()
import anodize as az
from anodize.runtime import compile as rc
import {module} as m
dev = az.device("cpu")
k = m.{kernel}{spec}
t1 = time.perf_counter()
rc.compile_for_device(k, dev)
t2 = time.perf_counter()
print("LOAD_MS", (t2 - t1) * 1e3, "IMPORT_MS", (t1 - t0) * 1e3)
"""

CASES = {
    "vecadd": ("vecadd", "vecadd", ""),
    "tile_softmax": ("tile_softmax", "softmax", ".specialize(cols=1000)"),
}


def _median_runs(cmd: list[str], cwd: str, env: dict[str, str], runs: int, parse: bool) -> tuple[float, float | None]:
    walls, loads = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout
        walls.append((time.perf_counter() - t0) * 1e3)
        if parse:
            loads.append(float(out.split("LOAD_MS")[1].split()[0]))
    return statistics.median(walls), (statistics.median(loads) if loads else None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    tree = os.path.abspath(args.tree)
    py = os.path.join(tree, ".venv", "bin", "python")
    py = py if os.path.exists(py) else sys.executable
    for name, (module, kernel, spec) in CASES.items():
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, ANODIZE_CACHE="on", ANODIZE_CACHE_DIR=cache, ANODIZE_DEVICE="cpu")
            subprocess.run([py, f"examples/{module}.py"], cwd=tree, env=env, capture_output=True, check=True)  # fills the cache
            wall, _ = _median_runs([py, f"examples/{module}.py"], tree, env, args.runs, False)
            _, load = _median_runs([py, "-c", LOAD.format(module=module, kernel=kernel, spec=spec)], tree, env, args.runs, True)
        print(f"{name}: fresh process, second run, whole process {wall:.0f} ms (median of {args.runs}); "
              f"first compile_for_device {load:.1f} ms")


if __name__ == "__main__":
    main()

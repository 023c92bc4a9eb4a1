"""The mypy plugin's overhead: wall time of mypy over fixtures/ and examples/ with the plugin
against without it, measured in one run of this script.

    python bench/mypy_overhead.py [--repeat 5] [--warm-runs 3] [--json]

Each measurement runs `python -m mypy` over each folder with an empty cache (cold,
the CI case) and then `--warm-runs` times again over the unchanged files (warm, the editor
case: a warm run is 0.2 s a folder, so one sample per repeat is mostly the machine's noise).
With and without the plugin alternate (cold runs pairwise, warm runs one by one), so drift
in the machine's load hits both; the ratio is of the medians (of `--repeat` cold and
`--repeat` x `--warm-runs` warm samples a side).  Target: cold and warm ratio <= 1.15.

First the anodize that mypy imports is byte-compiled, as pip leaves an installed package:
with `PYTHONDONTWRITEBYTECODE` set (or a fresh checkout) every plugin run would otherwise
compile anodize's sources again (about 0.3 s a run), a cost no installed package has.
The machine's load average is printed with the figures (the dev VM is shared), and so is
the CPU time of mypy together with the plugin's engine worker (this script adopts the worker
when mypy exits, Linux), so that the work the worker does beside mypy is counted too (on the
shared dev VM it proved as noisy as wall time: both vary by 20-30% between identical runs).
"""

from __future__ import annotations

import argparse
import json
import os
import py_compile
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("fixtures", "examples")
TARGET = 1.15


def _root(tmp: Path) -> Path:
    """A scratch root linking the folders, so `import anodize` is the installed package."""
    root = tmp / "root"
    root.mkdir()
    for name in FOLDERS:
        if (REPO / name).is_dir():
            (root / name).symlink_to(REPO / name, target_is_directory=True)
    return root


def _config(root: Path, plugin: bool) -> Path:
    cfg = root / f"mypy-{'plugin' if plugin else 'plain'}.ini"
    text = "[mypy]\n"
    if plugin:
        text += "plugins = anodize.checker.mypy_plugin\n"
    cfg.write_text(text)
    return cfg


def _adopt_orphans() -> bool:
    """Become the reaper of our descendants (Linux): the plugin's engine worker, orphaned when
    mypy exits, is then reaped here and its CPU time counted with mypy's."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _reap(deadline_s: float = 2.0) -> None:
    """Wait for the orphaned workers (they end on mypy's exit) so that RUSAGE_CHILDREN holds them."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no children left
        if pid == 0:
            time.sleep(0.005)


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _once(root: Path, cfg: Path, cache: Path) -> tuple[float, float]:
    """mypy over each folder (one process each: fixture and example modules share names):
    wall seconds, and CPU seconds of mypy and any worker it started."""
    elapsed = cpu = 0.0
    for folder in FOLDERS:
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(cfg), "--cache-dir", str(cache / folder), folder]
        c0 = _cpu()
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        elapsed += time.perf_counter() - t0
        _reap()
        cpu += _cpu() - c0
        if "INTERNAL ERROR" in proc.stdout + proc.stderr or proc.returncode not in (0, 1):
            raise SystemExit(f"mypy failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return elapsed, cpu


def _compile_anodize(root: Path) -> str:
    """Byte-compile (as pip does on install) the anodize package mypy will import from `root`;
    returns its folder.  Linked folders are followed: the cache sits where imports look."""
    out = subprocess.run(
        [sys.executable, "-c", "import anodize, os; print(os.path.dirname(anodize.__file__))"],
        cwd=root, capture_output=True, text=True, check=True,
    )
    pkg = out.stdout.strip()
    for dirpath, dirnames, filenames in os.walk(pkg, followlinks=True):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            if name.endswith(".py"):
                py_compile.compile(os.path.join(dirpath, name), quiet=2)
    return pkg


def _paired(plain: list[float], plugin: list[float]) -> float:
    return round(statistics.median(b / a for a, b in zip(plain, plugin, strict=True)), 3)


def measure(repeat: int, warm_runs: int = 3) -> dict[str, object]:
    times: dict[str, list[float]] = {"plain_cold": [], "plugin_cold": [], "plain_warm": [], "plugin_warm": []}
    cpus: dict[str, list[float]] = {k: [] for k in times}
    reaper = _adopt_orphans()
    files = sum(1 for f in FOLDERS for _ in (REPO / f).rglob("*.py"))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="az-mypy-bench-") as tmp_s:
        tmp = Path(tmp_s)
        root = _root(tmp)
        package = _compile_anodize(root)
        cfgs = {"plain": _config(root, False), "plugin": _config(root, True)}
        for i in range(repeat):
            order = ("plain", "plugin") if i % 2 == 0 else ("plugin", "plain")
            # cold: each side on an empty cache of its own; then warm, on those caches, the two
            # sides alternating run by run (a burst of the machine's other work then lands on
            # both, not on one side's block of runs)
            runs = [(kind, "cold") for kind in order]
            for j in range(warm_runs):
                runs += [(kind, "warm") for kind in (order if j % 2 == 0 else order[::-1])]
            for kind, phase in runs:
                wall, cpu = _once(root, cfgs[kind], tmp / f"cache-{kind}-{i}")
                times[f"{kind}_{phase}"].append(wall)
                cpus[f"{kind}_{phase}"].append(cpu)
    med = {k: statistics.median(v) for k, v in times.items()}
    cmed = {k: statistics.median(v) for k, v in cpus.items()}
    return {
        "files": files,
        "repeat": repeat,
        "warm_runs": warm_runs,
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "ratio_cold": round(med["plugin_cold"] / med["plain_cold"], 3),
        "ratio_warm": round(med["plugin_warm"] / med["plain_warm"], 3),
        # the median of the ratios of runs made next to each other (a repeat's two cold runs; a
        # warm run and the other side's warm run right after it): slow drift cancels in each pair
        "ratio_cold_paired": _paired(times["plain_cold"], times["plugin_cold"]),
        "ratio_warm_paired": _paired(times["plain_warm"], times["plugin_warm"]),
        # the same ratios of the fastest runs (the least disturbed by the machine's other work)
        "ratio_cold_min": round(min(times["plugin_cold"]) / min(times["plain_cold"]), 3),
        "ratio_warm_min": round(min(times["plugin_warm"]) / min(times["plain_warm"]), 3),
        "target": TARGET,
        # CPU time (user + system) of mypy and of the plugin's worker: the work done beside mypy
        "cpu_median_s": {k: round(v, 3) for k, v in cmed.items()},
        "runs_s": {k: [round(x, 3) for x in v] for k, v in times.items()},  # every run, in order
        "cpu_runs_s": {k: [round(x, 3) for x in v] for k, v in cpus.items()},
        "cpu_ratio_cold": round(cmed["plugin_cold"] / cmed["plain_cold"], 3),
        "cpu_ratio_warm": round(cmed["plugin_warm"] / cmed["plain_warm"], 3),
        "cpu_counts_worker": reaper,
        "load_avg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # before, after
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "anodize": package,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warm-runs", type=int, default=3, help="warm runs after each cold one (default 3)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = measure(args.repeat, args.warm_runs)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        m = res["median_s"]
        assert isinstance(m, dict)
        print(f"mypy over {', '.join(FOLDERS)} ({res['files']} files), median of {res['repeat']} cold and "
              f"{res['repeat'] * res['warm_runs']} warm runs a side")  # type: ignore[operator]
        print(f"  cold cache: without plugin {m['plain_cold']:.3f} s, with plugin {m['plugin_cold']:.3f} s, "
              f"ratio {res['ratio_cold']:.3f}")
        print(f"  warm cache: without plugin {m['plain_warm']:.3f} s, with plugin {m['plugin_warm']:.3f} s, "
              f"ratio {res['ratio_warm']:.3f}")
        print(f"  median of paired ratios: cold {res['ratio_cold_paired']:.3f}, warm {res['ratio_warm_paired']:.3f}; "
              f"fastest runs: cold {res['ratio_cold_min']:.3f}, warm {res['ratio_warm_min']:.3f}")
        cold_ok, warm_ok = res["ratio_cold"] <= TARGET, res["ratio_warm"] <= TARGET  # type: ignore[operator]
        print(f"  target: cold and warm ratio <= {TARGET}: cold {'met' if cold_ok else 'NOT met'}, "
              f"warm {'met' if warm_ok else 'NOT met'}")
        c = res["cpu_median_s"]
        assert isinstance(c, dict)
        who = "mypy and the plugin's worker" if res["cpu_counts_worker"] else "mypy only: the worker is not counted"
        print(f"  CPU time ({who}): cold {c['plain_cold']:.3f} s vs {c['plugin_cold']:.3f} s, ratio "
              f"{res['cpu_ratio_cold']:.3f}; warm {c['plain_warm']:.3f} s vs {c['plugin_warm']:.3f} s, ratio {res['cpu_ratio_warm']:.3f}")
        load = res["load_avg_1min"]
        assert isinstance(load, list)
        print(f"  machine: {res['cpus']} CPUs, 1-min load average {load[0]} before, {load[1]} after; anodize from {res['anodize']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

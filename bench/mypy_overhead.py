"""The mypy plugin's overhead: wall time of mypy over fixtures/ and examples/ with the plugin
against without it, measured in one run of this script.

    python bench/mypy_overhead.py [--repeat 5] [--json]

Each measurement runs `python -m mypy` over each folder with an empty cache (cold,
the CI case) and then again over the unchanged files (warm, the editor case).  With and without the plugin alternate, so drift in the machine's
load hits both; the ratio is of the medians.  Target: cold ratio <= 1.15.
"""

from __future__ import annotations

import argparse
import json
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


def _once(root: Path, cfg: Path, cache: Path) -> float:
    """mypy over each folder (one process each: fixture and example modules share names)."""
    elapsed = 0.0
    for folder in FOLDERS:
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(cfg), "--cache-dir", str(cache / folder), folder]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        elapsed += time.perf_counter() - t0
        if "INTERNAL ERROR" in proc.stdout + proc.stderr or proc.returncode not in (0, 1):
            raise SystemExit(f"mypy failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def measure(repeat: int) -> dict[str, object]:
    times: dict[str, list[float]] = {"plain_cold": [], "plugin_cold": [], "plain_warm": [], "plugin_warm": []}
    files = sum(1 for f in FOLDERS for _ in (REPO / f).rglob("*.py"))
    with tempfile.TemporaryDirectory(prefix="az-mypy-bench-") as tmp_s:
        tmp = Path(tmp_s)
        root = _root(tmp)
        cfgs = {"plain": _config(root, False), "plugin": _config(root, True)}
        for i in range(repeat):
            order = ("plain", "plugin") if i % 2 == 0 else ("plugin", "plain")
            for kind in order:
                cache = tmp / f"cache-{kind}-{i}"
                times[f"{kind}_cold"].append(_once(root, cfgs[kind], cache))
                times[f"{kind}_warm"].append(_once(root, cfgs[kind], cache))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "files": files,
        "repeat": repeat,
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "ratio_cold": round(med["plugin_cold"] / med["plain_cold"], 3),
        "ratio_warm": round(med["plugin_warm"] / med["plain_warm"], 3),
        "target": TARGET,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = measure(args.repeat)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        m = res["median_s"]
        assert isinstance(m, dict)
        print(f"mypy over {', '.join(FOLDERS)} ({res['files']} files), median of {res['repeat']} runs each")
        print(f"  cold cache: without plugin {m['plain_cold']:.3f} s, with plugin {m['plugin_cold']:.3f} s, "
              f"ratio {res['ratio_cold']:.3f}")
        print(f"  warm cache: without plugin {m['plain_warm']:.3f} s, with plugin {m['plugin_warm']:.3f} s, "
              f"ratio {res['ratio_warm']:.3f}")
        print(f"  target: cold ratio <= {TARGET}: {'met' if res['ratio_cold'] <= TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

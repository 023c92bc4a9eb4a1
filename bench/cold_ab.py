"""A/B measurements for the GEMM tile's cold compile: two builds of anodize (or two PTX modules)
side by side in one machine session, runs interleaved so a drift of the machine falls on both.

    python3 bench/cold_ab.py ptxas OLD.ptx NEW.ptx [...] [--runs 5]
        ptxas alone (the compile's own options: -O1 for the wgmma tile, -arch=sm_90a -v) on each
        module: wall ms and ptxas's own "Compile time", median and min.
    python3 bench/cold_ab.py cold SITE_OLD SITE_NEW [--runs 5]
        bench/tile_bench.py's `cold_compile` (fresh interpreter, ANODIZE_CACHE=off, after
        `import anodize` and `import tile_gemm`, the f16 128x256x64 compile for sm_90; then the
        bf16 one) with anodize imported from SITE (a directory holding the `anodize` package
        laid out as installed, byte-compiled: `site` below builds one).
    python3 bench/cold_ab.py runtime OLD.ptx NEW.ptx [...] [--rounds 15] [--per 40]
        GEMM 4096^3 f16 (examples/tile_gemm.py's kernel) launched from each PTX module in one
        process: the module replaces the compile's PTX (same kernel, same parameters), each result
        checked against torch; after a warm-up, per round `--per` launches between two CUDA events
        for each module in turn; median and min ms per launch.
    python3 bench/cold_ab.py site SRC DEST
        lay out SRC's packages (pyproject's package-dir map) as an installed `anodize` in DEST and
        compile them to bytecode.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

PACKAGE_DIRS = {"anodize": "anodize", "anodize/checker": "checker", "anodize/codegen": "codegen", "anodize/runtime": "runtime"}


def make_site(src: Path, dest: Path) -> None:
    import compileall

    if dest.exists():
        shutil.rmtree(dest)
    for pkg, d in PACKAGE_DIRS.items():
        shutil.copytree(src / d, dest / pkg, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(str(dest), quiet=2)


def ptxas_times(files: list[str], runs: int) -> None:
    try:
        from anodize.codegen.toolchain import find_ptxas  # the compile's own ptxas

        exe = find_ptxas() or "ptxas"
    except ImportError:
        exe = shutil.which("ptxas") or "ptxas"
    rows: dict[str, tuple[list[float], list[float]]] = {f: ([], []) for f in files}
    regs: dict[str, str] = {}
    out = Path(os.environ.get("TMPDIR", "/tmp"), f"cold_ab_{os.getpid()}.cubin")
    for _ in range(runs):
        for f in files:
            opts = ["-O1"] if "wgmma.mma_async" in Path(f).read_text() else []
            t0 = time.perf_counter()
            r = subprocess.run([exe, *opts, "-arch=sm_90a", "-v", "-o", str(out), f], capture_output=True, text=True)
            wall = (time.perf_counter() - t0) * 1e3
            if r.returncode:
                raise SystemExit(f"ptxas failed on {f}:\n{r.stderr}")
            m = re.search(r"Compile time = ([\d.]+) ms", r.stderr)
            rows[f][0].append(wall)
            rows[f][1].append(float(m.group(1)) if m else float("nan"))
            m = re.search(r"Used (\d+) registers", r.stderr)
            regs[f] = m.group(1) if m else "?"
    print(f"ptxas ({exe}), {runs} interleaved runs each: wall ms median (min); ptxas's own compile time median (min)")
    for f, (w, c) in rows.items():
        print(f"  {Path(f).name:28s} wall {statistics.median(w):6.1f} ({min(w):6.1f})   own {statistics.median(c):6.1f} ({min(c):6.1f})   "
              f"{regs[f]} registers   [{', '.join(f'{x:.0f}' for x in w)}]")


def cold(sites: list[str], runs: int) -> None:
    from tile_bench import _bytecode, cold_compile

    _bytecode()
    rows: dict[str, dict[str, list[float]]] = {s: {"first": [], "next": []} for s in sites}
    regs: dict[str, int] = {}
    base = os.environ.get("PYTHONPATH", "")
    here = os.getcwd()
    os.chdir(Path(sites[0]).parent)  # not the source tree: its `anodize/` would shadow the site's
    try:
        for _ in range(runs):
            for s in sites:
                os.environ["PYTHONPATH"] = s + (os.pathsep + base if base else "")
                r = cold_compile("sm_90")
                rows[s]["first"].append(r["first"] * 1e3)
                rows[s]["next"].append(r["next"] * 1e3)
                regs[s] = r["registers"]
    finally:
        os.environ["PYTHONPATH"] = base
        os.chdir(here)
    print(f"cold compile (tile_bench.cold_compile), {runs} interleaved fresh interpreters each: median (min-max) ms")
    for s, d in rows.items():
        f, n = d["first"], d["next"]
        print(f"  {s:28s} first {statistics.median(f):6.1f} ({min(f):.0f}-{max(f):.0f})   next {statistics.median(n):6.1f} "
              f"({min(n):.0f}-{max(n):.0f})   {regs[s]} registers   [{', '.join(f'{x:.0f}' for x in f)}]")


def runtime(files: list[str], rounds: int, per: int = 40) -> None:
    import importlib.util

    import torch

    import anodize as az
    from anodize.codegen.gpu import ptx as ptxmod
    from cuda.core import EventOptions

    os.environ["ANODIZE_CACHE"] = "off"
    dev = az.device(0)
    s = 4096
    a = torch.randn(s, s, device="cuda", dtype=torch.float16)
    b = torch.randn(s, s, device="cuda", dtype=torch.float16)
    ref = (a @ b).float()
    emit = ptxmod.emit_ptx
    launches = []
    for i, f in enumerate(files):
        text = Path(f).read_text()
        spec = importlib.util.spec_from_file_location(f"tile_gemm_ab{i}", ROOT / "examples" / "tile_gemm.py")
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        k = mod.gemm.specialize(T="f16", BM=128, BN=256, BK=64)
        c = torch.zeros(s, s, device="cuda", dtype=torch.float16)
        ptxmod.emit_ptx = lambda ir_text, *a_, text=text, **kw: (emit(ir_text, *a_, **kw)[0], text)
        try:
            launch = k[az.LaunchConfig.for_tiles((s, s), (128, 256))]
            art = k.compile()
            launch(a, b, c, s)  # (loads the module: under the override too)
        finally:
            ptxmod.emit_ptx = emit
        torch.cuda.synchronize()
        assert art.ptx == text, f"{f}: the override did not reach the compile"
        torch.testing.assert_close(c.float(), ref, rtol=2e-2, atol=0.5)
        launches.append((f, lambda launch=launch, c=c: launch(a, b, c, s), art.resources.registers))
    opts = EventOptions(timing_enabled=True)
    times: dict[str, list[float]] = {f: [] for f, _, _ in launches}
    for _ in range(3):  # warm-up (clocks up), every module
        for _, fn, _ in launches:
            for _ in range(per):
                fn()
    dev.stream.sync()
    for _ in range(rounds):
        for f, fn, _ in launches:
            e0 = dev.stream.record(options=opts)
            for _ in range(per):
                fn()
            e1 = dev.stream.record(options=opts)
            e1.sync()
            times[f].append((e1 - e0) / per)
    first = statistics.median(times[files[0]])
    print(f"GEMM {s}^3 f16, {rounds} interleaved rounds of {per} launches each: median (min) ms per launch; vs the first")
    for f, _, regs in launches:
        t = times[f]
        print(f"  {Path(f).name:28s} {statistics.median(t):.4f} ({min(t):.4f})  {2 * s**3 / statistics.median(t) / 1e9:6.1f} TFLOP/s  "
              f"{statistics.median(t) / first:.4f}x  {regs} registers")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["ptxas", "cold", "runtime", "site"])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--per", type=int, default=40, help="launches between two events (runtime)")
    args = ap.parse_args()
    if args.what == "ptxas":
        ptxas_times(args.paths, args.runs)
    elif args.what == "cold":
        cold(args.paths, args.runs)
    elif args.what == "runtime":
        runtime(args.paths, args.rounds, args.per)
    else:
        make_site(Path(args.paths[0]), Path(args.paths[1]))


if __name__ == "__main__":
    main()

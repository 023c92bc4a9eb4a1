"""Where a cold compile's time goes, without moving it: the GEMM tile kernel's first compile in
fresh interpreters (as bench/tile_bench.py's `cold_compile`, ANODIZE_CACHE=off), with a
timeline whose hooks are installed as the modules load (so no import is moved before the
clock, unlike cold_gemm.py's stage timers), the process's CPU time and ptxas's.

    python3 bench/cold_probe.py [--runs 5] [--importtime FILE]

Per run: first / next (ms), cpu (this process's CPU time during the first compile: the
Python side), ptxas_cpu (the child's), and the timeline of the first compile: when ptxas
started, when the checker started and ended, when the compile waited for ptxas and when
ptxas was done.  `--importtime FILE` also writes `python -X importtime`'s lines for the
modules the first compile imported, sorted by their own time.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

_PROBE = r"""
import sys, time, os, resource, importlib.abc, importlib.util
sys.path.insert(0, {ex!r})
import anodize
import tile_gemm
EV = []
T0 = [0.0]

def mark(name):
    EV.append((name, round((time.perf_counter() - T0[0]) * 1e3, 1)))

def patch_ptx(m):
    init, res = m.PtxasJob.__init__, m.PtxasJob.result
    def i2(self, *a, **k):
        mark("ptxas start"); sys.stderr.write("MARK-PTXAS\n"); init(self, *a, **k)
    def r2(self):
        mark("ptxas wait")
        try:
            return res(self)
        finally:
            mark("ptxas done")
    m.PtxasJob.__init__, m.PtxasJob.result = i2, r2

def patch_api(m):
    f = m.enforce_kernel
    def e2(*a, **k):
        mark("check start")
        try:
            return f(*a, **k)
        finally:
            mark("check end")
    m.enforce_kernel = e2

def patch_compile(m):
    if os.environ.get("COLD_PROBE_NO_PRELOAD"):  # importtime's own times, without the LLVM-loading thread's share
        m._preload_llvm = lambda: None

def patch_driver(m):
    if os.environ.get("COLD_PROBE_OFC"):  # ptxas -Ofc LEVEL for the wgmma tile (a measurement)
        m.WGMMA_PTXAS_FAST_COMPILE = os.environ["COLD_PROBE_OFC"]

PATCH = {{"anodize.codegen.gpu.ptx": patch_ptx, "anodize.checker.api": patch_api, "anodize.runtime.compile": patch_compile,
          "anodize.codegen.driver": patch_driver}}

class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in PATCH:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        ex = spec.loader.exec_module
        def exec_module(mod, ex=ex, name=name):
            ex(mod)
            PATCH[name](mod)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Hook())
n0 = len(sys.modules)
sys.stderr.write("MARK-T0\n")
ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
c0 = time.process_time()
T0[0] = time.perf_counter()
k = tile_gemm.gemm.specialize(T="f16", BM=128, BN=256, BK=64).compile("sm_90")
t1 = time.perf_counter()
c1 = time.process_time()
ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stderr.write("MARK-END\n")
first = (t1 - T0[0]) * 1e3
timeline = list(EV)
tile_gemm.gemm.specialize(T="bf16", BM=128, BN=256, BK=64).compile("sm_90")
t2 = time.perf_counter()
print(repr({{"first": first, "next": (t2 - t1) * 1e3, "cpu": (c1 - c0) * 1e3,
             "ptxas_cpu": (ch1.ru_utime + ch1.ru_stime - ch0.ru_utime - ch0.ru_stime) * 1e3,
             "timeline": timeline, "modules": len(sys.modules) - n0, "registers": k.resources.registers,
             "spills": k.resources.spill_stores, "anodize": anodize.__file__}}))
"""


def probe(importtime: bool = False, env: dict[str, str] | None = None) -> tuple[dict, str]:  # type: ignore[type-arg]
    from tile_bench import _bytecode  # the modules' bytecode, as an installed package has it

    _bytecode()
    code = _PROBE.format(ex=str(ROOT / "examples"))
    cmd = [sys.executable] + (["-X", "importtime"] if importtime else []) + ["-c", code]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "ANODIZE_CACHE": "off", **(env or {})},
                         check=True, cwd=str(ROOT))
    return ast.literal_eval(out.stdout.strip().splitlines()[-1]), out.stderr


def import_table(stderr: str) -> list[str]:
    """importtime's lines between the clock's start and the end of the first compile, by own time,
    with the point ptxas started marked."""
    lines, on, rows, before = stderr.splitlines(), False, [], True
    for ln in lines:
        if ln == "MARK-T0":
            on = True
        elif ln == "MARK-END":
            break
        elif ln == "MARK-PTXAS":
            before = False
        elif on and ln.startswith("import time:"):
            parts = ln.split("|")
            self_us = int(parts[0].split(":")[1])
            rows.append((self_us, int(parts[1]), parts[2].rstrip(), "before ptxas" if before else "after ptxas"))
    rows.sort(reverse=True)
    tot = {"before ptxas": 0, "after ptxas": 0}
    for s, _, _, w in rows:
        tot[w] += max(s, 0)  # (a module imported on another thread can show a negative own time)
    head = [f"own import time, ms: before ptxas started {tot['before ptxas'] / 1e3:.1f}, after {tot['after ptxas'] / 1e3:.1f}"]
    return head + [f"{s / 1e3:7.2f} {c / 1e3:7.2f}  {w:12s} {name}" for s, c, name, w in rows]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--importtime", default="")
    ap.add_argument("--no-preload", action="store_true", help="importtime without the thread that loads LLVM (clean own times)")
    args = ap.parse_args()
    rows = []
    for _ in range(args.runs):
        r, _ = probe()
        rows.append(r)
        tl = ", ".join(f"{n} {t:.0f}" for n, t in r["timeline"])
        print(f"first {r['first']:.0f} ms, next {r['next']:.0f} ms, cpu {r['cpu']:.0f} ms, ptxas cpu {r['ptxas_cpu']:.0f} ms | {tl}", flush=True)
    for key in ("first", "next", "cpu", "ptxas_cpu"):
        xs = [r[key] for r in rows]
        print(f"{key}: median {statistics.median(xs):.0f} ms, min {min(xs):.0f}, max {max(xs):.0f} ({len(xs)} runs)")
    print(f"(anodize from {rows[-1]['anodize']}; {rows[-1]['registers']} registers, {rows[-1]['spills']} bytes spilled)")
    if args.importtime:
        _, err = probe(importtime=True, env={"COLD_PROBE_NO_PRELOAD": "1"} if args.no_preload else None)
        Path(args.importtime).write_text("\n".join(import_table(err)) + "\n")
        print(f"importtime table: {args.importtime}")


if __name__ == "__main__":
    main()

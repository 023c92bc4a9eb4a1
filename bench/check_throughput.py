"""Check throughput: `anodize check` logic over a generated 10,000-line tree, on one core.

    python bench/check_throughput.py [--lines 10000] [--repeat 3] [--one-module]

`--one-module` writes the whole tree as ONE module (kernel-dense: 50,000 lines hold ~2,270
kernels, issue 34's case) instead of 250-line files.

Prints lines per second (target: at least 20,000), best and median of `--repeat` runs,
in wall time and in this process's CPU time (the second is steadier on a shared machine),
and where the CPU time goes: Python's parse, the kernel model (name resolution and the
abstract interpretation of every device function), and the rules' batched walk.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

KERNELS = [
    '''
@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def vecadd_{n}(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + b[i] * 2.0
''',
    '''
@func
def put_{n}(out: DisjointSlice[f32], i: Index1D, v: f32) -> None:
    if i in out:
        out[i] = v


@launch_contract(domain=1, block=128)
@kernel
def helper_user_{n}(a: Slice[f32], out: DisjointSlice[f32], s: f32, n: i32) -> None:
    i = thread.index_1d()
    acc = f32(0.0)
    for k in range(n):
        acc += a[k] * s
    put_{n}(out, i, acc)
''',
    '''
@launch_contract(domain=2, block=(16, 16))
@kernel
def blur_{n}(m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    if ij in out:
        r = ij.row
        c = ij.col
        left = m[r, c - 1] if c > 0 else m[r, c]
        out[ij] = (left + m[ij]) * 0.5
''',
    '''
@launch_contract(domain=1, block=256)
@kernel
def reduce_{n}(x: Slice[f32], total: AtomicSlice[f32]) -> None:
    i = thread.index_1d()
    v = x[i] if i in x else 0.0
    with az.unsafe():
        buf = az.shared.array(256, f32)
        t = thread.tid_x()
        buf[t] = v
        az.syncthreads()
        s = 128
        while s > 0:
            if t < s:
                buf[t] = buf[t] + buf[t + s]
            az.syncthreads()
            s = s // 2
        if t == 0:
            total.add(0, buf[0])
''',
    '''
@kernel
def racy_{n}(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    c[i + 1] = a[i]
    for j in thread.grid_stride(c):
        c[j] = 1.0


def launch_{n}(dev: az.Device, a: az.Buffer) -> None:
    racy_{n}[az.LaunchConfig.for_num_elems(len(a))](a, a)
''',
]
HEADER = """import numpy as np

import anodize as az
from anodize import (AtomicSlice, DisjointSlice, DisjointSlice2D, Index1D, Slice, Slice2D, f32, func, i32,
                     kernel, launch_contract, thread)
"""


PLAIN = '''

def summarize_{n}(values: list[float], scale: float = 1.0) -> dict[str, float]:
    """Plain host code: no kernels here."""
    total = 0.0
    for v in values:
        total += v * scale
    return {{"total": total, "mean": total / max(len(values), 1)}}
'''


def generate(root: Path, total_lines: int, lines_per_file: int = 250, plain_share: float = 0.0) -> int:
    n = written = 0
    file_no = 0
    while written < total_lines:
        if plain_share and (file_no % 10) < round(plain_share * 10):
            parts = ["import math\n"]
            count = 1
            while count < lines_per_file and written + count < total_lines:
                k = PLAIN.format(n=n)
                parts.append(k)
                count += k.count("\n")
                n += 1
            (root / f"plain_{file_no}.py").write_text("".join(parts))
            written += count
            file_no += 1
            continue
        parts = [HEADER]
        count = HEADER.count("\n")
        while count < lines_per_file and written + count < total_lines:
            k = KERNELS[n % len(KERNELS)].format(n=n)
            parts.append(k)
            count += k.count("\n")
            n += 1
        sub = root / f"pkg{file_no % 5}"
        sub.mkdir(exist_ok=True)
        (sub / f"kernels_{file_no}.py").write_text("".join(parts))
        written += count
        file_no += 1
    return written


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plain-share", type=float, default=0.0,
                    help="share of files that are plain Python without kernels (0.0: every file has kernels)")
    ap.add_argument("--one-module", action="store_true", help="one module of --lines lines instead of 250-line files")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

    import statistics

    from anodize.checker import api
    from anodize.checker.engine import Project
    from anodize.checker.kernel_model import ModuleModel
    from anodize.checker.rules import ALL_RULES, RuleContext
    from anodize.language.syntax import parse
    from anodize.language.walk import walk_batched

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lines = generate(root, args.lines, lines_per_file=args.lines if args.one_module else 250,
                         plain_share=args.plain_share)
        files = api.collect_files([root])
        walls: list[float] = []
        cpus: list[float] = []
        ndiag = 0
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            project = Project()
            diags = [d for f in files for d in api.check_file(f, project).diagnostics]
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            ndiag = len(diags)

        # where the time goes: the engine's steps over the same files, each timed on its own
        # (CPU time; kernel modules only -- the others are only parsed)
        phases = dict.fromkeys(("parse", "model", "rules"), 0.0)
        parse_lines = 0
        for f in files:
            src = f.read_text()
            if "anodize" not in src:
                continue
            parse_lines += src.count("\n")
            t = time.process_time()
            tree = parse(src)
            phases["parse"] += time.process_time() - t
            t = time.process_time()
            model = ModuleModel(tree, str(f), src)
            phases["model"] += time.process_time() - t
            sink: list[object] = []
            t = time.process_time()
            walk_batched(tree, [r(RuleContext(model, Project(), sink.append)) for r in ALL_RULES])
            phases["rules"] += time.process_time() - t

    rate = lines / min(walls)
    kind = "all kernel modules" if not args.plain_share else f"{args.plain_share:.0%} plain modules"
    if args.one_module:
        kind = "one kernel module"
    print(f"[{kind}] checked {lines} lines in {len(files)} files ({ndiag} diagnostics), {args.repeat} runs")
    print(f"  wall: best {min(walls):.2f} s = {rate:,.0f} lines/s, median {statistics.median(walls):.2f} s "
          f"= {lines / statistics.median(walls):,.0f} lines/s")
    print(f"  CPU:  best {min(cpus):.2f} s = {lines / min(cpus):,.0f} lines/s, median {statistics.median(cpus):.2f} s "
          f"= {lines / statistics.median(cpus):,.0f} lines/s")
    print(f"  target 20,000 lines/s on one core: {'met' if rate >= 20_000 else 'NOT met'}")
    tot = sum(phases.values()) or 1.0
    print("  CPU split: " + ", ".join(f"{k} {v:.2f} s ({100 * v / tot:.0f}%)" for k, v in phases.items()))
    if phases["parse"]:
        print(f"  Python's parser alone: {parse_lines / phases['parse']:,.0f} lines/s")

if __name__ == "__main__":
    main()

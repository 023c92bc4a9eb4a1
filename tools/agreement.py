"""Does `anodize check` agree with compile?  Per kernel of generated modules:

    check clean  <=>  compile succeeds (LLVM to PTX, ptxas where installed, and the CPU backend)

    python tools/agreement.py --modules 20000 [--seed 0] [--jobs 2] [--no-ptxas] [--json out.json]

Modules come from the kernel generator (tools/kernelgen.py; a third of them with one
construct outside the language).  "check clean" is what `anodize check` reports inside
the kernel, its contract and its helpers (`checker.api.kernel_errors`); "compile" is the
compile path: that gate, the kernel's typed model, and lowering for the GPU and the CPU.
Nothing is imported or run: both read the module's source.  A disagreement is a kernel
that checks clean and does not compile (or the reverse); each is written out with its
module so it can be replayed.  Exit status 1 when there is any.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelgen import RandomChooser, gen_module  # noqa: E402

__all__ = ["agree_module", "run"]


def agree_module(src: str, path: str, *, ptxas: bool) -> list[dict[str, Any]]:
    """One record per kernel: {kernel, check_clean, compiled, error}."""
    from anodize.checker.api import analyze_source, kernel_errors
    from anodize.codegen.driver import compile_cpu, compile_gpu

    analysis = analyze_source(src, path)
    if analysis.model is None:
        return []
    front = analysis.model.front
    out = []
    for fdef in front.kernels():
        clean = not kernel_errors(analysis, fdef)
        rec: dict[str, Any] = {"kernel": fdef.name, "line": fdef.lineno, "check_clean": clean, "compiled": False, "error": ""}
        typed = front.typed(fdef)
        if clean and typed.ir is None:
            rec["error"] = "typed model refused: " + "; ".join(f"{d.code}@{d.span.line}" for d in typed.diagnostics)
        elif clean:
            try:
                compile_gpu(typed.ir, "sm_90", ptxas=ptxas)
                compile_cpu(typed.ir)
                rec["compiled"] = True
            except Exception as e:  # any failure past the gate is a disagreement (an internal error)
                rec["error"] = f"{type(e).__name__}: {e}\n" + traceback.format_exc(limit=6)
        out.append(rec)
    return out


def _worker(args: tuple[int, int, int, bool, str]) -> dict[str, Any]:
    start, stop, step, ptxas, outdir = args
    tally: Counter[str] = Counter()
    bad: list[dict[str, Any]] = []
    for seed in range(start, stop, step):
        src = gen_module(RandomChooser(seed), outside=seed % 3 == 0)
        path = f"agree_{seed}.py"
        try:
            recs = agree_module(src, path, ptxas=ptxas)
        except Exception:
            tally["crashes"] += 1
            bad.append({"seed": seed, "src": src, "error": traceback.format_exc(limit=8)})
            continue
        tally["modules"] += 1
        for r in recs:
            tally["kernels"] += 1
            tally["check_clean" if r["check_clean"] else "check_rejected"] += 1
            if r["check_clean"] != r["compiled"]:
                tally["disagreements"] += 1
                bad.append({"seed": seed, "src": src, **r})
    return {"tally": dict(tally), "bad": bad}


def run(modules: int, seed: int = 0, jobs: int = 1, ptxas: bool = True, outdir: str = "/tmp/anodize-agreement") -> dict[str, Any]:
    t0 = time.time()
    chunks = [(seed + j, seed + modules, jobs, ptxas, outdir) for j in range(jobs)]
    if jobs == 1:
        results = [_worker(chunks[0])]
    else:
        with mp.get_context("spawn").Pool(jobs) as pool:
            results = pool.map(_worker, chunks)
    tally: Counter[str] = Counter()
    bad: list[dict[str, Any]] = []
    for r in results:
        tally.update(r["tally"])
        bad.extend(r["bad"])
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    for b in bad[:200]:
        (out / f"seed_{b['seed']}.py").write_text(b["src"])
        (out / f"seed_{b['seed']}.txt").write_text(json.dumps({k: v for k, v in b.items() if k != "src"}, indent=1))
    return {"seconds": round(time.time() - t0, 1), "ptxas": ptxas, **dict(sorted(tally.items())),
            "bad_seeds": [b["seed"] for b in bad][:200]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modules", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--no-ptxas", action="store_true", help="stop at PTX (ptxas is used when installed otherwise)")
    ap.add_argument("--out", default="/tmp/anodize-agreement")
    ap.add_argument("--json", default=None)
    ns = ap.parse_args(argv)
    from anodize.codegen.toolchain import find_ptxas

    summary = run(ns.modules, ns.seed, ns.jobs, ptxas=not ns.no_ptxas and find_ptxas() is not None, outdir=ns.out)
    print(json.dumps(summary, indent=1))
    if ns.json:
        Path(ns.json).write_text(json.dumps(summary, indent=1))
    return 1 if summary.get("disagreements") or summary.get("crashes") else 0


if __name__ == "__main__":
    sys.exit(main())

"""Fuzz the checker and the compiler with generated kernel modules (tools/kernelgen.py).

    python tools/fuzz.py [--cases 100000] [--compile-every 20] [--jobs 2] [--seed 0] [--out DIR] [--time-limit S]

Every case is checked with `anodize.checker.api.check_source` (must return
diagnostics, never raise).  Every `--compile-every`-th case that the checker
accepts is imported and compiled for sm_90 (`kernel.compile("sm_90")`, ptxas
included) and for the CPU backend: each must succeed or raise `CheckError`.
Anything else is a crash; its source is written to `--out` (default
/tmp/anodize-fuzz) as a reproducer.  Prints counts, and `--json` writes them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelgen import RandomChooser, gen_module  # noqa: E402

__all__ = ["check_case", "compile_case", "run_case"]

_TMP = Path(tempfile.mkdtemp(prefix="anodize-fuzzmods-"))
_COUNTER = 0


def check_case(src: str, path: str = "fuzz_case.py") -> tuple[bool, list[Any]]:
    """(accepted, diagnostics); raises only on a checker crash."""
    from anodize.checker.api import check_source

    diags = check_source(src, path)
    for d in diags:  # every diagnostic must be located and renderable
        assert d.code.startswith("az-"), d
        assert d.span.line >= 1, d
    return (not any(d.severity == "error" for d in diags)), diags


def load_module(src: str) -> Any:
    global _COUNTER
    _COUNTER += 1
    name = f"azfuzz_{os.getpid()}_{_COUNTER}"
    path = _TMP / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def compile_case(src: str, *, gpu: bool = True, cpu: bool = True) -> list[str]:
    """Compile every kernel of an accepted module; returns the outcomes ("ok" / "check-error:<code>").

    Raises on a crash (anything but CheckError)."""
    from anodize.language.diagnostics import CheckError
    from anodize.kernel import Kernel
    from anodize.runtime.compile import compile_for_cpu

    mod = load_module(src)
    outcomes: list[str] = []
    try:
        for obj in list(vars(mod).values()):
            if not isinstance(obj, Kernel):
                continue
            for target in (("gpu",) if gpu else ()) + (("cpu",) if cpu else ()):
                try:
                    if target == "gpu":
                        obj.compile("sm_90")
                    else:
                        compile_for_cpu(obj)
                    outcomes.append("ok")
                except CheckError as e:
                    assert e.diagnostics and all(d.span.line >= 1 for d in e.diagnostics), e
                    outcomes.append("check-error:" + ",".join(sorted({d.code for d in e.diagnostics})))
    finally:
        sys.modules.pop(mod.__name__, None)
    return outcomes


def run_case(seed: int, compile_every: int) -> dict[str, Any]:
    """One case: generate, check, and (for a sample of accepted ones) compile."""
    outside = seed % 3 == 0
    src = gen_module(RandomChooser(seed), outside=outside)
    res: dict[str, Any] = {"seed": seed, "outside": outside, "accepted": False, "compiled": None, "crash": None}
    try:
        ok, diags = check_case(src)
    except Exception:
        res["crash"] = "checker: " + traceback.format_exc(limit=8)
        res["src"] = src
        return res
    res["accepted"] = ok
    res["codes"] = sorted({d.code for d in diags})
    if ok and compile_every and (seed * 2654435761) % 4099 % compile_every == 0:
        try:
            res["compiled"] = compile_case(src)
        except Exception:
            res["crash"] = "compile: " + traceback.format_exc(limit=12)
            res["src"] = src
    return res


def _worker(args: tuple[int, int, int, int, float]) -> dict[str, Any]:
    start, stop, step, compile_every, deadline = args
    tally: Counter[str] = Counter()
    crashes: list[dict[str, Any]] = []
    for seed in range(start, stop, step):
        if time.time() > deadline:
            tally["stopped_by_time_limit"] = 1
            break
        r = run_case(seed, compile_every)
        tally["cases"] += 1
        tally["outside" if r["outside"] else "inside"] += 1
        tally["accepted"] += r["accepted"]
        if r["outside"] and r["accepted"]:
            tally["outside_accepted"] += 1
        for code in r.get("codes", []):
            tally["code:" + code] += 1
        if r["compiled"] is not None:
            tally["compiled_modules"] += 1
            for o in r["compiled"]:
                tally["compile_ok" if o == "ok" else "compile_check_error"] += 1
                if o != "ok":
                    tally["compile_" + o] += 1
        if r["crash"]:
            tally["crashes"] += 1
            crashes.append(r)
    return {"tally": dict(tally), "crashes": crashes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--compile-every", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="/tmp/anodize-fuzz")
    ap.add_argument("--json", default=None)
    ap.add_argument("--time-limit", type=float, default=0, help="stop after this many seconds (0: none)")
    ns = ap.parse_args(argv)
    t0 = time.time()
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = t0 + ns.time_limit if ns.time_limit else float("inf")
    chunks = [(ns.seed + j, ns.seed + ns.cases, ns.jobs, ns.compile_every, deadline) for j in range(ns.jobs)]
    if ns.jobs == 1:
        results = [_worker(chunks[0])]
    else:
        with mp.get_context("spawn").Pool(ns.jobs) as pool:
            results = pool.map(_worker, chunks)
    tally: Counter[str] = Counter()
    crashes: list[dict[str, Any]] = []
    for r in results:
        tally.update(r["tally"])
        crashes.extend(r["crashes"])
    for c in crashes:
        (out / f"crash_{c['seed']}.py").write_text(c["src"])
        (out / f"crash_{c['seed']}.txt").write_text(c["crash"])
    summary = {"seconds": round(time.time() - t0, 1), **dict(sorted(tally.items())), "crash_seeds": [c["seed"] for c in crashes][:200]}
    print(json.dumps(summary, indent=1))
    if ns.json:
        Path(ns.json).write_text(json.dumps(summary, indent=1))
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())

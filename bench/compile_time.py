"""Compile time in fresh interpreters: cold compile (cache off) and cached load (warm disk cache).

    python3 bench/compile_time.py [--runs 5] [--arch sm_90]

Each run is a new `python` process with its own empty (or warm) `ANODIZE_CACHE_DIR`:

* import:          `import anodize` (numpy included)
* cold, first:     `vecadd.compile(arch)` with the cache off, first kernel in the process
                   (the imports of the checker, llvmlite and the codegen included)
* cold, second:    `saxpy.compile(arch)` right after: checker + codegen + PTX + ptxas
* cold, new spec:  a second specialisation of a generic kernel (examples/generic_saxpy.py,
                   `T = f64` after `T = f32`): its typing, lowering, PTX and ptxas
* stages:          that second compile split into the checker, IR + LLVM lowering,
                   O3 + PTX emission, and ptxas (the cubin, its own wall time); ptxas
                   runs beside the checker, so the stages add up to more than the compile
* cached load:     `vecadd.compile(arch)` from a warm disk cache in a fresh process, after
                   `import anodize` (first use of the runtime's compile modules included)
* cached, warm:    the same with those modules already imported (the load itself)

No GPU needed.  Prints medians with min-max over `--runs` processes.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_COLD = """
import sys, time
sys.path.insert(0, {examples!r})
t0 = time.perf_counter()
import anodize
t1 = time.perf_counter()
import vecadd, saxpy, generic_saxpy
from anodize.runtime import compile as rc
stages = {{"check": 0.0, "codegen": 0.0, "ptx": 0.0, "ptxas": 0.0}}

def timed(name, fn):
    def run(*a, **kw):
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            stages[name] += time.perf_counter() - t
    return run

t2 = time.perf_counter()
vecadd.vecadd.compile(arch={arch!r})
t3 = time.perf_counter()
from anodize.codegen import driver
from anodize.codegen.gpu import ptx
rc._enforce = timed("check", rc._enforce)
driver.build_ir = timed("codegen", driver.build_ir)
driver.lower_kernel = timed("codegen", driver.lower_kernel)
ptx.emit_ptx = timed("ptx", ptx.emit_ptx)
_job_result = ptx.PtxasJob.result

def job_result(self):  # ptxas's own wall time (it runs beside the checker on a first compile)
    try:
        return _job_result(self)
    finally:
        stages["ptxas"] += self.seconds

ptx.PtxasJob.result = job_result
t4 = time.perf_counter()
saxpy.saxpy.compile(arch={arch!r})
t5 = time.perf_counter()
generic_saxpy.saxpy.specialize(T="f32").compile(arch={arch!r})
t6 = time.perf_counter()
generic_saxpy.saxpy.specialize(T="f64").compile(arch={arch!r})
t7 = time.perf_counter()
print(repr({{"import": t1 - t0, "cold_first": t3 - t2, "cold_second": t5 - t4, "cold_spec_second": t7 - t6, **stages}}))
"""

_WARM = """
import sys, time
sys.path.insert(0, {examples!r})
import anodize, vecadd
if {preload!r}:
    import hashlib, llvmlite
    import anodize.runtime.compile, anodize.runtime.artifact_store
    try:
        import anodize.codegen.toolchain
    except ImportError:  # an older tree (for before/after figures)
        pass
t = time.perf_counter()
k = vecadd.vecadd.compile(arch={arch!r})
t1 = time.perf_counter()
assert k.ptx
print(repr({{"cached": t1 - t}}))
"""


def _run(code: str, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return {k: v * 1e3 for k, v in ast.literal_eval(out.stdout.strip().splitlines()[-1]).items()}


def _fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):8.2f}  ({min(xs):.2f}-{max(xs):.2f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args(argv)
    examples = str(ROOT / "examples")
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="az-compile-bench-") as tmp:
        base = dict(os.environ, ANODIZE_CACHE_DIR=str(Path(tmp) / "cache"))
        cold = _COLD.format(examples=examples, arch=args.arch)
        for _ in range(args.runs):
            for k, v in _run(cold, dict(base, ANODIZE_CACHE="off")).items():
                rows.setdefault(k, []).append(v)
        _run(cold, dict(base, ANODIZE_CACHE="on"))  # fill the cache
        for preload, label in ((False, "cached load (fresh process)"), (True, "cached load (modules imported)")):
            warm = _WARM.format(examples=examples, arch=args.arch, preload=preload)
            rows[label] = [_run(warm, dict(base, ANODIZE_CACHE="on"))["cached"] for _ in range(args.runs)]
    names = {
        "import": "import anodize",
        "cold_first": "cold compile, first kernel (vecadd, imports included)",
        "cold_second": "cold compile, second kernel (saxpy)",
        "cold_spec_second": "cold compile, second specialisation (generic saxpy, f64)",
        "check": "  of which: checker passes",
        "codegen": "  of which: IR + LLVM lowering",
        "ptx": "  of which: O3 + PTX emission",
        "ptxas": "  of which: ptxas (cubin)",
    }
    print(f"compile time, {args.arch}, {args.runs} fresh interpreters each, ms: median (min-max)")
    for key, xs in rows.items():
        print(f"{names.get(key, key):<56} {_fmt(xs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

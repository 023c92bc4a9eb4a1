"""Cold compile of tile kernels for sm_90, without a GPU: each kernel in a fresh interpreter.

    python3 bench/tile_cold.py [--runs 3] [--only gemm,attention,...] [--python PATH]

Rows: the tile examples (examples/tile_*.py at the specialisations tests/codegen/tile_cases.py
compiles: the GEMM at its GPU tile 128x256x64 over 8 warps) and the GEMM-class variants of
bench/tile_variants_v2.py (tests/codegen/tile_mma_cases.py) at its two tiles.  Per row, in a
fresh interpreter with the compile cache off, after importing anodize, the codegen and typing
the kernel (excluded), and after one small tile kernel compiled first (the lazy imports of
llvmlite's binding and the tile pass, and LLVM's start-up, excluded):

* first:  `compile_gpu(kernel, "sm_90", ptxas=False)`: the tile lowering, LLVM IR, O3 and PTX
* emit:   the O3 + PTX part of it (`codegen/gpu/ptx.py` `emit_ptx`)
* +ptxas: `compile_gpu(kernel, "sm_90", ptxas=True)` right after, the whole compile with ptxas

as CPU time (the compiling thread's, plus ptxas's as a child process: the shared dev machine's
load moves wall times 2-5x, CPU times little) and, for first and +ptxas, wall time too.
`--python` runs the children with another interpreter (another tree's venv: a before/after
comparison); the tree's modules should be byte-compiled first in both trees
(`python -m compileall -q anodize checker codegen runtime examples`).  Medians over `--runs`.
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

_CHILD = """
import os, sys, time
sys.path.insert(0, {tests!r})
from anodize.codegen.driver import compile_gpu
from anodize.codegen.gpu import ptx
from tile_cases import _example_kernels, kernel_ir
import tile_mma_cases as C
row = {row!r}
if row.startswith("v2:"):
    _, name, bm, bn, bk, w = row.split(":")
    k = kernel_ir(C.source(name, int(bm), int(bn), int(bk), int(w), "f16"), "k")
    ks = {{x.name: x for x in _example_kernels()}}
else:
    ks = {{x.name: x for x in _example_kernels()}}
    k = ks[row]
compile_gpu(ks["add"], "sm_90", ptxas=False)  # the lazy imports and LLVM's start-up
emit = [0.0]
_emit = ptx.emit_ptx
def timed(*a, **kw):
    t = time.thread_time()
    try:
        return _emit(*a, **kw)
    finally:
        emit[0] += time.thread_time() - t
ptx.emit_ptx = timed
def cpu():
    o = os.times()
    return time.thread_time() + o.children_user + o.children_system
w0, c0 = time.perf_counter(), cpu()
compile_gpu(k, "sm_90", ptxas=False)
w1, c1 = time.perf_counter(), cpu()
e = emit[0]
art = compile_gpu(k, "sm_90", ptxas=True)
w2, c2 = time.perf_counter(), cpu()
print(repr({{"first": c1 - c0, "first_wall": w1 - w0, "emit": e, "ptxas": c2 - c1, "ptxas_wall": w2 - w1,
            "regs": art.resources.registers}}))
"""

EXAMPLES = ["gemm", "attention", "softmax", "layer_norm", "add"]
VARIANTS = ["canonical", "epilogue", "gelu_residual", "b_trans", "a_trans", "k_tiles", "acc_in", "two"]
TILES = [(128, 256, 64, 8), (128, 128, 64, 4)]  # bench/tile_variants_v2.py's


def rows() -> list[str]:
    out = list(EXAMPLES)
    for name in VARIANTS:
        out += [f"v2:{name}:{bm}:{bn}:{bk}:{w}" for bm, bn, bk, w in TILES]
    return out


def measure(python: str, row: str) -> dict[str, float]:
    code = _CHILD.format(tests=str(ROOT / "tests" / "codegen"), row=row)
    env = {**os.environ, "ANODIZE_CACHE": "off"}
    # (run outside the tree: `python -c` puts the working directory first on sys.path, which
    # would import this tree's anodize whatever interpreter runs it)
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, check=True,
                         cwd=tempfile.gettempdir())
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated rows (a name, or a prefix of a v2:... row)")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    todo = rows()
    if args.only:
        want = args.only.split(",")
        todo = [r for r in todo if any(r == w or r.startswith(w) for w in want)]
    keys = ("first", "first_wall", "emit", "ptxas", "ptxas_wall")
    print(f"{'kernel':34s} {'first cpu':>9s} {'(wall)':>7s} {'emit cpu':>8s} {'+ptxas cpu':>10s} {'(wall)':>7s} {'regs':>5s}",
          flush=True)
    for row in todo:
        got = [measure(args.python, row) for _ in range(args.runs)]
        med = {key: statistics.median(g[key] for g in got) * 1e3 for key in keys}
        print(f"{row:34s} {med['first']:9.0f} {med['first_wall']:7.0f} {med['emit']:8.0f} {med['ptxas']:10.0f} "
              f"{med['ptxas_wall']:7.0f} {int(got[0]['regs']):5d}", flush=True)

if __name__ == "__main__":
    main()

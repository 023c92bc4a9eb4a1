"""The autotuner's cold compiles on the CPU (no GPU): examples/autotune_gemm.py's 8 configurations
compiled for sm_90 in a fresh interpreter with the compile cache off, as the tuner's `_prepare`
compiles them (`compile_for_gpu` per configuration: checker, tile lowering, LLVM, ptxas).

    python3 bench/autotune_compile.py [--threads 8] [--python PATH] [--runs 1]

Per configuration, compiled one after another: the compiling thread's CPU time, ptxas's (a child
process), and the codegen's LLVM share (`emit_ptx`); then all 8 again in a new interpreter on
`--threads` threads (the tuner's pool), wall and CPU (the process's, all threads, plus ptxas).
`--python`: another tree's interpreter (a before/after comparison; byte-compile both trees first).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import os, sys, time
os.environ["ANODIZE_CACHE"] = "off"
sys.path.insert(0, {ex!r})
from concurrent.futures import ThreadPoolExecutor
import anodize as az
import autotune_gemm as g
from anodize.runtime.compile import compile_for_gpu
from anodize.codegen.gpu import ptx
dev = az.device("cpu")
grid, args = g.inputs(dev, 256, 256, 256)
specs = [g.gemm._tuner._specialised(c, args)[0] for c in g.CONFIGS]
threads = {threads}
def cpu():
    o = os.times()
    return o.user + o.system, o.children_user + o.children_system
if threads == 0:
    emit = [0.0]
    real = ptx.emit_ptx
    def timed(*a, **kw):
        t = time.thread_time()
        try:
            return real(*a, **kw)
        finally:
            emit[0] += time.thread_time() - t
    ptx.emit_ptx = timed
    tot = [0.0, 0.0, 0.0]
    for c, s in zip(g.CONFIGS, specs):
        emit[0] = 0.0
        t0, (_, k0) = time.thread_time(), cpu()
        art = compile_for_gpu(s, "sm_90")
        t1, (_, k1) = time.thread_time(), cpu()
        print(f"  {{c!r:62s}} thread {{1e3 * (t1 - t0):5.0f}} ms (LLVM {{1e3 * emit[0]:4.0f}})  ptxas {{1e3 * (k1 - k0):4.0f}} ms  regs {{art.resources.registers}}")
        tot[0] += t1 - t0; tot[1] += emit[0]; tot[2] += k1 - k0
    print(f"  total: thread {{tot[0]:.2f}} s (LLVM {{tot[1]:.2f}}) + ptxas {{tot[2]:.2f}} s = {{tot[0] + tot[2]:.2f}} s CPU")
else:
    (p0, k0), w0 = cpu(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(lambda s: compile_for_gpu(s, "sm_90"), specs))
    (p1, k1), w1 = cpu(), time.perf_counter()
    print(f"  {{threads}} threads: wall {{w1 - w0:.2f}} s, CPU {{p1 - p0:.2f}} s (process) + {{k1 - k0:.2f}} s (ptxas)")
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    for _ in range(args.runs):
        for threads in (0, args.threads):
            print("one after another:" if threads == 0 else "the tuner's pool:", flush=True)
            code = _CHILD.format(ex=str(ROOT / "examples"), threads=threads)
            out = subprocess.run([args.python, "-c", code], capture_output=True, text=True, cwd=tempfile.gettempdir())
            print(out.stdout + (out.stderr[-2000:] if out.returncode else ""), end="", flush=True)


if __name__ == "__main__":
    main()

"""`anodize check` clean <=> compile succeeds, per kernel of generated modules.

A CI-sized share runs here (`ANODIZE_AGREEMENT_MODULES`, default 40); the full count runs
with `python tools/agreement.py --modules 20000` (bench/RELIABILITY.md has the figures).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from agreement import agree_module, run  # noqa: E402
from kernelgen import RandomChooser, gen_module  # noqa: E402

from anodize.codegen.toolchain import find_ptxas  # noqa: E402


def test_check_and_compile_agree_on_generated_modules(tmp_path: Path) -> None:
    n = int(os.environ.get("ANODIZE_AGREEMENT_MODULES", "40"))
    summary = run(n, seed=7000, jobs=1, ptxas=find_ptxas() is not None, outdir=str(tmp_path))
    assert summary.get("crashes", 0) == 0, summary
    assert summary.get("disagreements", 0) == 0, summary
    # the share exercises both sides: kernels check clean and compile, others are refused
    assert summary["check_clean"] > 0 and summary["check_rejected"] > 0, summary


def test_a_type_error_is_reported_by_check_and_refused_by_compile() -> None:
    src = gen_module(RandomChooser(1), outside=False)
    broken = src + '''

@launch_contract(domain=1, block=256)
@kernel
def mistyped(a: Slice[f32], c: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] * 2.0
'''
    header = "from anodize import DisjointSlice, Slice, f32, i32, kernel, launch_contract, thread\n"
    recs = {r["kernel"]: r for r in agree_module(header + broken, "typed_case.py", ptxas=False)}
    assert recs["mistyped"] == {**recs["mistyped"], "check_clean": False, "compiled": False}

"""Differential race fuzzing (tools/race_oracle.py): generated shared-memory kernels that the
checker accepts run race-free on the debug device (a CI-sized share; the whole run is
`python tools/race_oracle.py --cases 400`)."""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from race_oracle import HEAD, TAIL, Gen, main, run_case  # noqa: E402


def test_accepted_generated_kernels_run_race_free_on_the_debug_device() -> None:
    assert main(["--cases", "40", "--seed", "11"]) == 0


def test_accepted_generated_output_writers_run_race_free_on_the_debug_device() -> None:
    assert main(["--kind", "global", "--cases", "30", "--seed", "12"]) == 0


def test_accepted_generated_2d_block_kernels_run_race_free_on_the_debug_device() -> None:
    assert main(["--kind", "shared2d", "--cases", "30", "--seed", "13"]) == 0


def test_accepted_generated_per_thread_tile_kernels_run_race_free_on_the_debug_device() -> None:
    assert main(["--kind", "owned", "--cases", "30", "--seed", "14"]) == 0


def test_the_generator_makes_both_accepted_and_rejected_kernels() -> None:
    from anodize.checker.api import check_source

    rng = random.Random(5)
    verdicts = set()
    for n in range(30):
        src = Gen(rng).module()
        compile(src, f"case{n}", "exec")
        verdicts.add(not [d for d in check_source(src, f"case{n}.py") if d.severity == "error"])
    assert verdicts == {True, False}


def test_the_debug_device_runs_an_accepted_case() -> None:
    # a safe case: own-slot writes, a barrier, then reads of other slots (no race report)
    head = HEAD.format(ns=64, harr="array(64, f32)", hbody="    hs[hw] = x\n")
    src = head + "    s[w] = v\n    az.syncthreads()\n    v = v + s[(w.get() + 1) % 64]\n" + TAIL
    assert run_case(src, Path(tempfile.mkdtemp()), 1) is None

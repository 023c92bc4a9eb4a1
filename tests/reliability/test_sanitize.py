"""tools/sanitize.py: report parsing, and the kernel runner on the CPU backend (the sanitizer needs a GPU)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sanitize import ROOT, RUNNER, parse

SAMPLE = """\
@@AZ-BEGIN a.py::good
@@AZ-END a.py::good ok
@@AZ-BEGIN b.py::racy
========= Error: Race reported between Write access at racy+0x1a0 in b.py:12
=========     and Read access at racy+0x1f0 in b.py:14 [256 hazards]
=========
@@AZ-END b.py::racy ok
@@AZ-BEGIN c.py::oob
========= Invalid __global__ write of size 4 bytes
=========     at oob+0x90 in c.py:9
@@AZ-END c.py::oob ok
@@AZ-BEGIN d.py::hangs
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
========= ERROR SUMMARY: 1 error
"""


def test_parse_attributes_reports_to_kernels() -> None:
    r = parse(SAMPLE)
    k = r["kernels"]
    assert k["a.py::good"] == {"errors": 0, "hazards": 0, "messages": [], "status": "ok"}
    assert k["b.py::racy"]["hazards"] == 1 and k["b.py::racy"]["errors"] == 0
    assert k["c.py::oob"]["errors"] == 1
    assert k["d.py::hangs"]["status"].startswith("started")
    assert r["totals"]["hazards"] == 1 and r["totals"]["errors"] == 1


def _runner(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """tools/sanitize_runner.py's command line, in this process (what the sanitizer runs)."""
    from sanitize_runner import main

    rc = main(args)
    return rc, capsys.readouterr().out


def test_runner_launches_fixture_kernels_with_derived_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    mods = [ROOT / "fixtures" / "accept" / f for f in ("saxpy_scalar.py", "two_d.py", "atomic_histogram.py", "contract_forms.py", "unsafe_shared_reduce.py")]
    rc, stdout = _runner(["--device", "cpu", "--no-main", *map(str, mods)], capsys)
    assert rc == 0, stdout
    ends = [line for line in stdout.splitlines() if line.startswith("@@AZ-END")]
    assert len(ends) >= 5 and all(line.endswith(" ok") for line in ends), ends
    assert "@@AZ-SUMMARY launched=" in stdout


def test_dry_run_report(tmp_path: Path) -> None:
    from sanitize import main

    rc = main(["--dry-run", "--tools", "memcheck", "--out", str(tmp_path), str(ROOT / "fixtures" / "accept" / "vecadd.py")])
    assert rc == 0
    md = (tmp_path / "sanitize.md").read_text()
    assert "| memcheck |" in md and "vecadd.py::vecadd | ok" in md


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("compute-sanitizer") is None and not Path("/usr/local/cuda/bin/compute-sanitizer").exists(), reason="no compute-sanitizer")
def test_memcheck_clean_on_vecadd(tmp_path: Path) -> None:
    from sanitize import main

    assert main(["--tools", "memcheck", "--out", str(tmp_path), str(ROOT / "examples" / "vecadd.py")]) == 0


def test_safe_shared_modules_are_the_safe_tier_shared_memory_examples() -> None:
    from sanitize import safe_shared_modules

    names = {p.name for p in safe_shared_modules()}
    assert {"histogram.py", "transpose.py", "sgemm.py", "softmax.py", "reduce_sum.py", "safe_shared.py"} <= names
    assert not {"reduce_sum_unsafe.py", "softmax_unsafe.py", "vecadd.py"} & names


def test_small_main_runs_the_examples_mains_at_their_sanitize_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    mods = [ROOT / "examples" / f for f in ("transpose.py", "sgemm.py", "vecadd.py")]
    rc, stdout = _runner(["--device", "cpu", "--small-main", *map(str, mods)], capsys)
    assert rc == 0, stdout
    assert "@@AZ-END transpose.py::main ok" in stdout and "100x70" in stdout  # SANITIZE_KWARGS
    assert "@@AZ-END sgemm.py::main ok" in stdout
    assert "vecadd.py::main" not in stdout  # no SANITIZE_KWARGS: its main is skipped
    assert "@@AZ-END vecadd.py::vecadd ok" in stdout


def test_runner_script_runs_as_a_command(tmp_path: Path) -> None:
    """The command line the sanitizer starts (a subprocess, as under compute-sanitizer)."""
    out = subprocess.run(
        [sys.executable, str(RUNNER), "--device", "cpu", "--no-main", "--json", str(tmp_path / "r.json"), str(ROOT / "fixtures" / "accept" / "vecadd.py")],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "@@AZ-END vecadd.py::vecadd ok" in out.stdout and "@@AZ-SUMMARY launched=1 skipped=0 errors=0" in out.stdout


@pytest.mark.gpu
@pytest.mark.slow  # about 5 minutes on the H200: racecheck of the opt=0 sgemm dominates
@pytest.mark.skipif(shutil.which("compute-sanitizer") is None and not Path("/usr/local/cuda/bin/compute-sanitizer").exists(), reason="no compute-sanitizer")
def test_safe_shared_examples_are_sanitizer_clean(tmp_path: Path) -> None:
    from sanitize import main

    assert main(["--safe-shared", "--out", str(tmp_path)]) == 0

"""ptxas's options on the compile path (codegen/gpu/ptx.py PtxasJob): `-Ofc` is passed when asked
for and dropped, with the same run repeated, for a ptxas that does not know it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from anodize.codegen.gpu.ptx import PtxasError, PtxasJob

_FAKE = """#!/bin/sh
# a ptxas from before --Ofast-compile: refuses -Ofc, else writes the -o file and a log
out=""
prev=""
for a in "$@"; do
  if [ "$a" = "-Ofc" ]; then echo "ptxas fatal   : Unknown option '-Ofc'" >&2; exit 255; fi
  if [ "$prev" = "-o" ]; then out="$a"; fi
  prev="$a"
done
echo "$@" > "$out.args"
printf 'cubin' > "$out"
echo "ptxas info    : Used 42 registers, used 1 barriers" >&2
"""


@pytest.fixture
def old_ptxas(tmp_path: Path) -> str:
    exe = tmp_path / "ptxas"
    exe.write_text(_FAKE)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_fast_compile_is_passed(old_ptxas: str) -> None:
    job = PtxasJob(".version 8.0\n", "sm_90a", ptxas=old_ptxas, opt_level=1, fast_compile="min")
    assert job.cmd[1:3] == ["-Ofc", "min"] and "-O1" in job.cmd
    job.cancel()


def test_a_ptxas_without_fast_compile_runs_without_it(old_ptxas: str) -> None:
    job = PtxasJob(".version 8.0\n", "sm_90a", ptxas=old_ptxas, opt_level=1, fast_compile="min")
    cubin, res = job.result()
    assert cubin == b"cubin" and res.registers == 42
    assert "-Ofc" not in job.cmd and "-O1" in job.cmd


def test_other_failures_are_still_errors(tmp_path: Path) -> None:
    exe = tmp_path / "ptxas"
    exe.write_text("#!/bin/sh\necho \"ptxas fatal   : Unknown option '-Ofc'\" >&2\nexit 255\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(PtxasError, match="Unknown option"):  # the retry without -Ofc fails too: reported
        PtxasJob(".version 8.0\n", "sm_90a", ptxas=str(exe), fast_compile="mid").result()
    with pytest.raises(PtxasError):  # no -Ofc asked for: no retry
        PtxasJob(".version 8.0\n", "sm_90a", ptxas=str(exe)).result()


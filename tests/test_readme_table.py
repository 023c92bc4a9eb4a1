"""bench/readme_table.py (README's performance table, measured in one run) and the records
bench's copy ceiling, run without a GPU on the CPU backend so that neither script can rot."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _dry(tmp_path: Path, only: str, *extra: str) -> tuple[str, dict]:  # type: ignore[type-arg]
    out = tmp_path / "table.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "readme_table.py"), "--dry", "--only", only, "--json", str(out), *extra],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout, json.loads(out.read_text())


def _table_rows(text: str) -> list[list[str]]:
    rows = [ln[2:-2].split(" | ") for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| |")]
    assert all(len(r) == 3 for r in rows), rows
    return rows


def test_dry_run_measures_the_host_rows(tmp_path: Path) -> None:
    text, raw = _dry(tmp_path, "bandwidth,launch,config,bounds,records")
    assert "CPU backend, a dry run: not README figures" in text
    assert "`python3 bench/readme_table.py --dry --only bandwidth,launch,config,bounds,records" in text
    rows = {r[0]: r for r in _table_rows(text)}
    assert len(rows) == 7, rows
    assert "ROW records (" in text  # each section's rows printed as it ends, before the table
    vecadd = next(r for k, r in rows.items() if k.startswith("vecadd 2^12 f32, `index_1d`"))
    # the figure is this run's: the table's GB/s is the raw timings' (nothing hard-coded)
    ms = raw["figures"]["bandwidth_ms"]["vecadd"]["anodize"]
    gbs = 3 * 4 * 4096 / (statistics.median(ms) * 1e-3) / 1e9
    assert re.fullmatch(r"[\d,]+ GB/s \(\d+% of the copy ceiling\)", vecadd[1]), vecadd
    assert vecadd[1].startswith(f"{gbs:,.0f} GB/s")
    assert vecadd[2] == "needs a GPU"
    assert re.fullmatch(r"[\d.]+ us", rows["safe launch, empty kernel"][1])
    config = next(r for k, r in rows.items() if k.startswith("a config built on every call"))
    assert re.match(r"[\d.]+ us a launch, the held launcher's [\d.]+ us [+-][\d.]+; generic [\d.]+ us, held [\d.]+", config[1]), config
    assert rows["stencil2d bounds checks"][1] == "0 left, time: needs a GPU"
    records = next(r for k, r in rows.items() if k.startswith("records: the particle step over 2^10 records of 32 bytes"))
    frac = raw["figures"]["records"]["fraction_of_copy"]
    assert re.match(rf"[\d,]+ GB/s, {100 * frac:.0f}% of the copy ceiling \(a ", records[1]), records
    assert list(raw["seconds"]) == ["bandwidth", "launch", "records", "config", "bounds"]  # SECTIONS' order


def test_no_section_starts_past_the_budget(tmp_path: Path) -> None:
    text, raw = _dry(tmp_path, "launch,config", "--budget-s", "1e-9")
    rows = _table_rows(text)
    assert rows[-1] == ["config", "not measured: the run passed its 0 s budget", ""], rows


@pytest.mark.slow
def test_dry_run_of_every_section(tmp_path: Path) -> None:
    text, raw = _dry(tmp_path, "bandwidth,launch,config,bounds,compile,tiles,dlpack")
    rows = {r[0]: r for r in _table_rows(text)}
    assert re.match(r"\d+ ms per kernel \(\d+ ms for a process's first, imports included; the tile GEMM's first [\d,]+ ms",
                    rows["cold compile, check + codegen + PTX + cubin"][1])
    assert re.match(r"[\d.]+ ms per kernel", rows["load from the persistent cache"][1])
    assert rows["tile kernels"][1] == "needs a GPU"
    assert raw["figures"]["compile_ms"]["cold_second"] > 0


def test_unknown_section_is_refused() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "readme_table.py"), "--dry", "--only", "bandwith"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode != 0 and "unknown sections ['bandwith']" in r.stderr


def test_records_copy_ceiling_on_the_cpu_backend() -> None:
    """The particle step's ceiling: a device-to-device memcpy and copy_gs over the same bytes,
    both checked, the faster taken (bench/records_bench.py's `copy_ceiling`)."""
    code = (
        "import argparse, json, sys; sys.path.insert(0, 'bench'); import records_bench as rb, anodize as az\n"
        "r = rb.particle_part(argparse.Namespace(log2n=10, reps=2, numba_path=''), az.device('cpu'))\n"
        "print(json.dumps({k: v for k, v in r.items() if not k.endswith('_ms')}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["ceiling"] in ("copy_memcpy", "copy_kernel")
    assert got["ceiling_gbs"] == max(got["copy_memcpy_gbs"], got["copy_kernel_gbs"])
    assert got["fraction_of_copy"] == pytest.approx(got["particle_gbs"] / got["ceiling_gbs"])

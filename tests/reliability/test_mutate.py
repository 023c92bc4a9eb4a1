"""Mutation testing (tools/mutate.py): the checker rejects every write-index mutant."""

from __future__ import annotations

from pathlib import Path

import pytest
from budgets import quick_and_full
from mutate import BARRIER_EXAMPLES, ROOT, barrier_mutants, default_paths, run, write_mutants


@pytest.mark.parametrize("share,min_files,min_mutants", quick_and_full((3, 20, 50), (1, 35, 150)))
def test_every_write_index_mutant_is_rejected(tmp_path: Path, share: int, min_files: int, min_mutants: int) -> None:
    """Every `share`-th accepted fixture and example: a third by default, all of them (about a
    minute on one core) under `-m slow`."""
    rep = run(default_paths()[::share], None)
    w = rep["write"]
    assert rep["files"] >= min_files and not rep["files_skipped_not_accepted"]
    assert w["total"] >= min_mutants
    assert w["survivors"] == [], w["survivors"]
    assert w["rate"] == 1.0


def test_mutants_change_the_index_only() -> None:
    ms = write_mutants(ROOT / "fixtures" / "accept" / "vecadd.py")
    assert {m.op for m in ms} == {"plus1", "zero", "rev", "int"}
    texts = {m.op: next(line for line in m.source.splitlines() if line.strip().startswith("c[")) for m in ms}
    assert texts["plus1"].strip() == "c[i + 1] = a[i] + b[i]"
    assert texts["rev"].strip() == "c[len(c) - 1 - i] = a[i] + b[i]"
    assert texts["int"].strip() == "c[i.get()] = a[i] + b[i]"


def test_barrier_under_thread_condition_is_always_rejected_statically() -> None:
    from anodize.checker.api import check_source

    for name in BARRIER_EXAMPLES:
        p = ROOT / "examples" / f"{name}.py"
        ms = [m for m in barrier_mutants(p) if m.op == "under_tid0"]
        assert ms, name
        for m in ms:
            assert any(d.code == "az-barrier-divergence" for d in check_source(m.source, str(p))), (name, m.line)


def test_deleted_barrier_mutants_are_written_for_racecheck(tmp_path: Path) -> None:
    rep = run([ROOT / "examples" / "transpose.py"], tmp_path)
    files = sorted(p.name for p in tmp_path.glob("*.py"))
    b = rep["barrier"]
    assert b["total"] == 4  # delete, move up, move down, under `tid == 0`
    assert b.get("static", 0) + b.get("needs_racecheck", 0) == b["total"]
    assert b.get("needs_racecheck", 0) == len(files)
    assert files == sorted(r["file"] for r in b["mutants"] if not r["static"])
    for f in files:  # each written mutant is a runnable module
        compile((tmp_path / f).read_text(), f, "exec")

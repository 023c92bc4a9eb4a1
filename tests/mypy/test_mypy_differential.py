"""dmypy = incremental mypy = `anodize check`, after every edit (tests/mypy/differential_cases.py).

The `[quick]` share runs the issue's sequence (a write to a read-only input, then undone: dmypy
kept the first check's kernel-body results) and one random sequence; `[full]` (`-m slow`) runs
200 random sequences of 3 edits.  A failure lists each step where a tool differed."""

from __future__ import annotations

from pathlib import Path

import pytest
from differential_cases import differential

from budgets import quick_and_full


@pytest.mark.parametrize(("sequences", "steps"), quick_and_full((1, 1), (200, 3)))
def test_dmypy_mypy_and_check_agree_after_every_edit(tmp_path: Path, sequences: int, steps: int) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    figures = differential(root, tmp_path, sequences, steps, seed=sequences)
    print(f"differential: {figures.sequences} sequences, {figures.steps} steps, {len(figures.mismatches)} mismatches; codes {dict(figures.codes)}")
    assert figures.steps == 3 + sequences * (steps + 1)
    assert len(figures.codes) >= 2  # the edits reach errors, not only clean code
    assert not figures.mismatches, "\n\n".join(figures.mismatches[:5])

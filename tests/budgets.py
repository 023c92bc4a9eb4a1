"""Budgets of the long tests: a CI-sized share in the default run, the full budget under `-m slow`.

The default test run (`python -m pytest -q`) deselects tests marked `slow` (pyproject's
addopts).  A long randomized test is parametrized with `quick_and_full(quick, full)`:
its `[quick]` case runs by default, its `[full]` case (marked `slow`) under
`python -m pytest -m slow`, so neither the coverage nor the full budget goes away.

Environment variables (README.md, "Tests"):

* `ANODIZE_FUZZ_BUDGET=N`: Hypothesis examples of the checker fuzz's `[quick]` case
  (tests/reliability/test_fuzz.py; default 60, the `[full]` case runs 2000).
"""

from __future__ import annotations

import os

import pytest

FUZZ_BUDGET_VAR = "ANODIZE_FUZZ_BUDGET"


def fuzz_budget(default: int) -> int:
    """`ANODIZE_FUZZ_BUDGET` when set (a positive integer), else `default`."""
    text = os.environ.get(FUZZ_BUDGET_VAR, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise pytest.UsageError(f"{FUZZ_BUDGET_VAR} must be a positive integer, got {text!r}")
    return int(text)


def quick_and_full(quick: object, full: object) -> list[object]:
    """Parameters `[quick]` (the default run) and `[full]` (marked `slow`) for a budget argument,
    or for several (then `quick` and `full` are tuples, one value per argument)."""

    def values(v: object) -> tuple[object, ...]:
        return v if isinstance(v, tuple) else (v,)

    return [pytest.param(*values(quick), id="quick"), pytest.param(*values(full), id="full", marks=pytest.mark.slow)]

"""mypy with the plugin over fixtures/: the checker's results in kernel bodies, the launch-site
rules in host modules, and nothing at all on valid code under --strict."""

from __future__ import annotations

from pathlib import Path

import harness  # tests/harness.py: the checker's `# E: az-code` expectations
import pytest
from conftest import MypyRun
from mypy_runner import REPO, Report, mypy_marks

HOST_DIR = REPO / "fixtures" / "mypy_host"


def _rel(p: Path) -> str:
    return str(Path(p).resolve().relative_to(REPO))


def kernel_fixtures() -> list[Path]:
    return [p for p in harness.fixture_files() if HOST_DIR not in Path(p).resolve().parents]


def _az(reports: list[Report]) -> set[tuple[int, str]]:
    return {(r.line, r.code) for r in reports if r.code and r.code.startswith("az-")}


@pytest.mark.parametrize("path", kernel_fixtures(), ids=_rel)
def test_kernel_fixture_matches_expectations(path: Path, fixtures_run: MypyRun) -> None:
    """mypy reports exactly the `# E: az-code` lines the checker's harness expects."""
    got = _az(fixtures_run.by_path.get(_rel(path), []))
    assert got == harness.expectations(path)


@pytest.mark.parametrize("path", kernel_fixtures(), ids=_rel)
def test_same_position_code_and_message_as_check_source(path: Path, fixtures_run: MypyRun) -> None:
    """Each diagnostic of `anodize check` appears in mypy at the same line, column, code and message."""
    from anodize.checker.api import check_source

    diags = check_source(Path(path).read_text(), str(path))
    want = {(d.span.line, d.span.col, d.code, d.message) for d in diags}
    got = {
        (r.line, r.column, r.code, r.message)
        for r in fixtures_run.by_path.get(_rel(path), [])
        if r.code and r.code.startswith("az-")
    }
    assert want <= got
    assert {(line, code) for line, _, code, _ in got} == {(line, code) for line, _, code, _ in want}


def test_valid_fixtures_have_no_mypy_errors_under_strict(fixtures_run: MypyRun) -> None:
    """Valid kernels and launches type-check cleanly: no false positives from the typed surface."""
    valid = [p for p in kernel_fixtures() if not harness.expectations(p) and not mypy_marks(p)]
    assert len(valid) >= 3, "no valid fixtures found"
    noisy = {}
    for p in valid:
        rs = [
            r
            for r in fixtures_run.by_path.get(_rel(p), [])
            if r.severity == "error" or (r.code or "").startswith("az-")
        ]
        if rs:
            noisy[_rel(p)] = [f"{r.line}:{r.column + 1}: {r.severity}: {r.message} [{r.code}]" for r in rs]
    assert noisy == {}

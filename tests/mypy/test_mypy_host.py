"""Host-side modules (fixtures/mypy_host/) that launch kernels imported from another module."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import MypyRun
from mypy_runner import REPO, mypy_marks

HOST_DIR = REPO / "fixtures" / "mypy_host"


def _rel(p: Path) -> str:
    return str(Path(p).resolve().relative_to(REPO))


def host_modules() -> list[Path]:
    return sorted(HOST_DIR.glob("*.py"))


def test_there_are_host_modules_with_and_without_marks() -> None:
    assert any(mypy_marks(p) for p in host_modules())
    assert any(not mypy_marks(p) for p in host_modules())


def test_valid_host_modules_are_clean_under_strict(fixtures_run: MypyRun) -> None:
    for p in host_modules():
        if mypy_marks(p):
            continue
        errors = [r for r in fixtures_run.by_path.get(_rel(p), []) if r.severity == "error"]
        assert errors == [], _rel(p)


@pytest.mark.parametrize("path", [p for p in host_modules() if mypy_marks(p)], ids=_rel)
def test_host_module_reports_exactly_its_marks(path: Path, fixtures_run: MypyRun) -> None:
    """Launch-site errors (types, counts, dtypes, az-no-contract, az-alias, az-launch-rank,
    az-requires) on kernels imported from another module, and nothing else."""
    got = {(r.line, r.code or "") for r in fixtures_run.by_path.get(_rel(path), []) if not r.message.startswith("help:")}
    assert got == mypy_marks(path)


def test_type_ignore_with_an_az_code_silences_it(fixtures_run: MypyRun) -> None:
    path = HOST_DIR / "mh_launch_errors.py"
    lines = path.read_text().splitlines()
    ignored = [no for no, text in enumerate(lines, start=1) if "type: ignore[az-alias]" in text]
    assert ignored, "mh_launch_errors.py lost its `# type: ignore[az-alias]` line"
    reported = {r.line for r in fixtures_run.by_path.get(_rel(path), [])}
    assert not reported & set(ignored)
    # the same call without the comment is reported, so the ignore did the work
    assert any(lines[no - 2].split("#")[0] == lines[no - 1].split("#")[0] and no - 1 in reported for no in ignored)


def test_anodize_ignore_comments_read_the_same_under_mypy(fixtures_run: MypyRun) -> None:
    """fixtures/host/ignore_comments.py: mypy with the plugin gives exactly `anodize check`'s
    answer: the `az-ignore` errors (bare, unknown code, unused), and nothing on the lines
    whose `# anodize: ignore[...]` silences a launch-site report, the plugin's own
    `az-requires` note included."""
    from anodize.checker.api import check_source

    path = REPO / "fixtures" / "host" / "ignore_comments.py"
    lines = path.read_text().splitlines()
    want = {(d.span.line, d.code) for d in check_source(path.read_text(), str(path))}
    got = {(r.line, r.code) for r in fixtures_run.by_path.get(_rel(path), []) if (r.code or "").startswith("az-")}
    assert got == want
    assert sum(code == "az-ignore" for _, code in want) == 4
    silenced = [no for no, text in enumerate(lines, start=1) if "# E:" not in text and "anodize: ignore[" in text]
    assert len(silenced) == 2 and not {line for line, _ in got} & set(silenced)
    assert any("az-requires" in lines[no - 1] for no in silenced)

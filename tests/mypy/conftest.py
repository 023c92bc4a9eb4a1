"""One mypy run (with the plugin, --strict) over every fixture, shared by the tests here."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # mypy_runner
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/harness.py

import incremental_cases  # noqa: E402
import mypy_runner  # noqa: E402


class MypyRun:
    def __init__(self, reports: list[mypy_runner.Report], stderr: str, status: int, cache: Path):
        self.reports = reports
        self.cache = cache  # mypy's cache of the run (tests/mypy/incremental_cases.py, `seeded`)
        self.stderr = stderr
        self.status = status
        self.by_path: dict[str, list[mypy_runner.Report]] = defaultdict(list)
        for r in reports:
            self.by_path[r.path].append(r)


@pytest.fixture(scope="session")
def fixtures_run(tmp_path_factory: pytest.TempPathFactory) -> MypyRun:
    tmp = tmp_path_factory.mktemp("mypy-fixtures")
    root = mypy_runner.make_root(tmp)
    targets = mypy_runner.python_files("fixtures")
    reports, err, status = mypy_runner.run(root, targets, cache_dir=tmp / "cache", strict=True)
    assert "INTERNAL ERROR" not in err and "Traceback" not in err, err
    return MypyRun(reports, err, status, tmp / "cache")


@pytest.fixture(scope="session")
def mypy_warm_base(fixtures_run: MypyRun) -> Path:
    """The warm base of `incremental_cases.seeded`: the fixtures' cold run's cache."""
    incremental_cases.use_warm_base(fixtures_run.cache)
    return fixtures_run.cache

"""One mypy run (with the plugin, --strict) over every fixture, shared by the tests here."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterator
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


@pytest.fixture
def engine_runs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The modules the engine ran on in this (mypy's) process, with `ANODIZE_MYPY_WORKERS` from
    the test's parameter and no results left from earlier tests; with a worker the list stays
    empty and `engine_results._pending` shows what was sent."""
    from anodize.checker.mypy import engine_results

    monkeypatch.setenv("ANODIZE_MYPY_WORKERS", str(request.param))
    incremental_cases.fresh_pool_state()
    runs: list[str] = []
    real = engine_results.run_engine

    def spy(source: str, path: str) -> tuple[object, ...]:
        runs.append(Path(path).name)
        return real(source, path)

    monkeypatch.setattr(engine_results, "run_engine", spy)
    yield runs
    incremental_cases.fresh_pool_state()  # later tests start their own worker

"""Where the plugin runs the rule engine: one forked worker by default (Linux, two or more CPUs),
mypy's own process with `ANODIZE_MYPY_WORKERS=0`.  Both give `anodize check`'s results, both
follow a contract edited in an imported module, and neither runs the engine on a module whose
errors mypy drops."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from incremental_cases import LAUNCH_LINES, errors_in_text, run_mypy, write

from anodize.checker.mypy import engine_results

pytestmark = pytest.mark.usefixtures("mypy_warm_base")  # each test's mypy cache starts warm for anodize and the standard library
NO_CONTRACT = {("host.py", line, "az-no-contract") for line in LAUNCH_LINES}
ALIAS = {("host.py", LAUNCH_LINES[1], "az-alias")}
LINUX = sys.platform == "linux"


def _mypy(root: Path, cache: Path, *files: str) -> tuple[set[tuple[str, int, str]], str]:
    out = run_mypy(root, cache, *files)
    return errors_in_text(out), out


@pytest.mark.parametrize("engine_runs", [0, 1], indirect=True, ids=["in-process", "worker"])
def test_a_contract_edited_in_the_imported_module_changes_the_result(tmp_path: Path, engine_runs: list[str]) -> None:
    workers = int(os.environ["ANODIZE_MYPY_WORKERS"])
    root = tmp_path / "proj"
    root.mkdir()
    write(root, contract=True, second="out")
    assert _mypy(root, tmp_path / "cache", "kmod.py", "host.py")[0] == ALIAS
    if workers and LINUX:
        assert engine_runs == [], "the worker should have checked both modules"
        assert engine_results._pool is not None
    else:
        assert sorted(engine_runs) == ["host.py", "kmod.py"]
    # only the kernel's module changes (host.py's text does not): its launches' results follow
    write(root, contract=False, second="out")
    assert _mypy(root, tmp_path / "cache", "kmod.py", "host.py")[0] == NO_CONTRACT | ALIAS
    write(root, contract=True, second="out")
    assert _mypy(root, tmp_path / "cache", "kmod.py", "host.py")[0] == ALIAS


@pytest.mark.parametrize("engine_runs", [0], indirect=True)
def test_no_engine_run_where_mypy_drops_every_error(tmp_path: Path, engine_runs: list[str]) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    write(root, contract=False, second="out")
    kmod = root / "kmod.py"
    kmod.write_text("# mypy: ignore-errors\n" + kmod.read_text())
    errors, out = _mypy(root, tmp_path / "cache", "kmod.py", "host.py")
    assert errors == NO_CONTRACT | ALIAS, out  # host.py: checked as before
    assert "kmod.py" not in out
    assert engine_runs == ["host.py"]


def test_default_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANODIZE_MYPY_WORKERS", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert engine_results._workers() == 1  # mypy on one CPU, the engine on another
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert engine_results._workers() == 0  # one CPU: a worker would only take turns with mypy
    monkeypatch.setenv("ANODIZE_MYPY_WORKERS", "3")
    assert engine_results._workers() == 3
    monkeypatch.setenv("ANODIZE_MYPY_WORKERS", "0")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert engine_results._workers() == 0
    monkeypatch.delenv("ANODIZE_MYPY_WORKERS")
    monkeypatch.setattr(sys, "platform", "darwin")  # workers start with fork: Linux only
    assert engine_results._workers() == 0


def test_the_workers_requires_texts_are_the_plugins_own_reading() -> None:
    """With the engine in a worker, mypy's process takes the `requires=` texts the worker read
    (by the lambda's line and column) instead of parsing the module again: they must be the
    very texts `requires_text` reads from the module's front, for every fixture and example."""
    from types import SimpleNamespace

    from anodize.checker.mypy.kernels import requires_text, requires_texts
    from anodize.language.front import front_for_source

    repo = Path(__file__).resolve().parents[2]
    seen = texts = 0
    for path in sorted([*repo.joinpath("fixtures").rglob("*.py"), *repo.joinpath("examples").rglob("*.py")]):
        source = path.read_text()
        if "lambda" not in source:
            continue
        try:
            front = front_for_source(source, str(path))
        except (SyntaxError, ValueError):  # (ValueError: nested deeper than anodize reads, fixtures/reject/nesting_too_deep.py)
            continue
        for (line, col), text in requires_texts(front).items():
            lam = SimpleNamespace(line=line, column=col)
            assert requires_text(lam, str(path)) == text, (path, line, col)  # type: ignore[arg-type]
            assert requires_text(lam, str(path), {(line, col): text}) == text  # type: ignore[arg-type]
            seen += 1
            texts += text is not None
    assert seen > 50 and texts > 50  # (about a hundred `requires=` lambdas; a few do not parse)

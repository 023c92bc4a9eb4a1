"""The plugin under mypy's incremental cache and under dmypy: a change in the kernel's module
re-checks the module that launches it, and unchanged runs give the same errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from incremental_cases import LAUNCH_LINES, config, errors_in_text, run_mypy, write

pytestmark = pytest.mark.usefixtures("mypy_warm_base")  # each test's mypy cache starts warm for anodize and the standard library
NO_CONTRACT = {("host.py", line, "az-no-contract") for line in LAUNCH_LINES}
ALIAS = {("host.py", LAUNCH_LINES[1], "az-alias")}


def _mypy(root: Path, cache: Path) -> set[tuple[str, int, str]]:
    return errors_in_text(run_mypy(root, cache))


def test_incremental_cache_follows_a_contract_change(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    root = tmp_path / "proj"
    root.mkdir()
    write(root, contract=True, second="out")
    assert _mypy(root, cache) == ALIAS
    write(root, contract=False, second="out")  # only the kernel's module changes
    assert _mypy(root, cache) == NO_CONTRACT | ALIAS
    assert _mypy(root, cache) == NO_CONTRACT | ALIAS  # nothing changed: same errors from the cache
    write(root, contract=True, second="x")
    assert _mypy(root, cache) == set()


def _dmypy(root: Path, status: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy.dmypy", "--status-file", str(status), *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_dmypy_twice_over_a_changed_file(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    status = tmp_path / "dmypy.json"
    cfg = config(root)
    run = ("run", "--", "--config-file", str(cfg), "kmod.py", "host.py")
    write(root, contract=True, second="out")
    try:
        first = _dmypy(root, status, *run)
        assert "INTERNAL ERROR" not in first.stdout + first.stderr, first.stdout + first.stderr
        assert errors_in_text(first.stdout) == ALIAS, first.stdout + first.stderr
        write(root, contract=False, second="out")  # the kernel loses its contract
        second = _dmypy(root, status, *run)
        assert errors_in_text(second.stdout) == NO_CONTRACT | ALIAS, second.stdout + second.stderr
        write(root, contract=False, second="x")  # now only the host changes
        third = _dmypy(root, status, *run)
        assert errors_in_text(third.stdout) == NO_CONTRACT, third.stdout + third.stderr
    finally:
        stop = _dmypy(root, status, "stop")
        if stop.returncode != 0:
            _dmypy(root, status, "kill")

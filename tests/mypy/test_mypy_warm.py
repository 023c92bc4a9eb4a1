"""The plugin on a warm mypy cache: mypy replays the diagnostics it cached (the engine does not
run again), so a warm run must print exactly what the cold run printed, an edited file must be
checked again, and a new rule set must re-check every module (the plugin's cache key)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from incremental_cases import KERNEL_MODULE, LAUNCH_LINES, errors_in_text, run_mypy, write

from anodize.checker import mypy_plugin
from anodize.checker.api import check_source
from anodize.checker.mypy import engine_results

pytestmark = pytest.mark.usefixtures("mypy_warm_base")  # each test's mypy cache starts warm for anodize and the standard library
# a second kernel in kmod.py, writing a disjoint slice at a fixed index
BAD_KERNEL = textwrap.dedent(
    """\


    @launch_contract(domain=1, block=256)
    @kernel
    def bad(x: Slice[f32], out: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        out[0] = x[i]
    """
)
# its line in kmod.py (written without the first kernel's contract, see `_project`)
BAD_LINE = len(KERNEL_MODULE.format(contract="").splitlines()) + len(BAD_KERNEL.splitlines())


def _mypy(root: Path, cache: Path) -> str:
    """mypy's full output over the two modules; the engine's in-process memory is cleared
    first, as in a new mypy process (the cold/warm difference is mypy's cache alone)."""
    engine_results._results.clear()
    engine_results._last.clear()
    return run_mypy(root, cache)


def _project(tmp_path: Path, *, bad: bool) -> Path:
    root = tmp_path / "proj"
    root.mkdir(exist_ok=True)
    write(root, contract=False, second="out")  # az-no-contract at both launches, az-alias at the second
    if bad:
        kmod = root / "kmod.py"
        kmod.write_text(kmod.read_text() + BAD_KERNEL)
        assert kmod.read_text().splitlines()[BAD_LINE - 1].strip() == "out[0] = x[i]"
    return root


def _engine_lines(root: Path) -> list[str]:
    """`anodize check`'s diagnostics of kmod.py, as mypy prints their first line."""
    source = (root / "kmod.py").read_text()
    return [f"kmod.py:{d.span.line}: {d.severity}: {d.message}  [{d.code}]" for d in check_source(source, "kmod.py")]


@pytest.mark.parametrize("engine_runs", [0, 1], indirect=True, ids=["in-process", "worker"])
def test_a_warm_run_prints_what_the_cold_run_printed(tmp_path: Path, engine_runs: list[str]) -> None:
    root = _project(tmp_path, bad=True)
    cold = _mypy(root, tmp_path / "cache")
    expected = _engine_lines(root)
    assert any("az-disjoint-index" in line for line in expected)
    for line in expected:  # every `anodize check` diagnostic, same line, code and message
        assert line in cold.splitlines(), (line, cold)
    assert ("host.py", LAUNCH_LINES[1], "az-alias") in errors_in_text(cold)
    engine_runs.clear()
    engine_results._pending.clear()
    warm = _mypy(root, tmp_path / "cache")
    assert warm == cold
    assert engine_runs == [] and not engine_results._pending  # replayed from mypy's cache


@pytest.mark.parametrize("engine_runs", [0, 1], indirect=True, ids=["in-process", "worker"])
def test_an_edit_between_two_runs_shows_its_new_diagnostic(tmp_path: Path, engine_runs: list[str]) -> None:
    root = _project(tmp_path, bad=False)
    first = _mypy(root, tmp_path / "cache")
    assert ("kmod.py", BAD_LINE, "az-disjoint-index") not in errors_in_text(first)
    kmod = root / "kmod.py"
    kmod.write_text(kmod.read_text() + BAD_KERNEL)  # a new error on a warm cache
    second = _mypy(root, tmp_path / "cache")
    assert ("kmod.py", BAD_LINE, "az-disjoint-index") in errors_in_text(second), second
    for line in _engine_lines(root):
        assert line in second.splitlines(), (line, second)
    write(root, contract=False, second="out")  # and fixed again: it goes
    third = _mypy(root, tmp_path / "cache")
    assert ("kmod.py", BAD_LINE, "az-disjoint-index") not in errors_in_text(third)
    assert errors_in_text(third) == errors_in_text(first)


@pytest.mark.parametrize("engine_runs", [0], indirect=True)
def test_a_new_rule_set_rechecks_every_module(tmp_path: Path, engine_runs: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's part of mypy's cache key (`report_config_data`) changes with the rule
    sources: a warm cache written under other rules is not replayed, the engine runs again."""
    root = _project(tmp_path, bad=True)
    cold = _mypy(root, tmp_path / "cache")
    assert sorted(engine_runs) == ["host.py", "kmod.py"]
    engine_runs.clear()
    assert _mypy(root, tmp_path / "cache") == cold and engine_runs == []
    key = mypy_plugin._config_data()
    monkeypatch.setattr(mypy_plugin, "_config_data", lambda: key + "-other-rules")
    assert _mypy(root, tmp_path / "cache") == cold
    assert sorted(engine_runs) == ["host.py", "kmod.py"]

"""Safe shared memory under mypy with the plugin: the phase discipline's errors at the same
lines and with the same texts as `anodize check`, the typed surface (`LocalIndex`,
`LocalIndex2D`, `shared.dynamic_array`, `shared.atomic_array`) clean under --strict."""

from __future__ import annotations

from conftest import MypyRun
from mypy_runner import REPO

RACES = "fixtures/reject/safe_shared_races.py"
MISUSE = "fixtures/reject/safe_shared_misuse.py"
ACCEPT = "fixtures/accept/safe_shared.py"


def test_the_classic_bugs_are_reported_with_the_way_out(fixtures_run: MypyRun) -> None:
    got = [r for r in fixtures_run.by_path.get(RACES, []) if r.code == "az-shared-race"]
    assert len(got) == 8, [(r.line, r.message) for r in got]
    own_slot = [r for r in got if "not at the thread's own slot" in r.message]
    assert {r.line for r in own_slot} == {41, 52, 77}  # s[w + 1], s[0], t[w.col, w.row]
    assert any(r.code == "az-barrier-divergence" and r.line == 29 for r in fixtures_run.by_path.get(RACES, []))


def test_misuse_is_reported(fixtures_run: MypyRun) -> None:
    codes = {(r.line, r.code) for r in fixtures_run.by_path.get(MISUSE, []) if (r.code or "").startswith("az-")}
    assert {(11, "az-type"), (20, "az-disjoint-index"), (31, "az-type"), (40, "az-type"), (53, "az-type")} == codes


def test_the_safe_tier_surface_type_checks_strictly(fixtures_run: MypyRun) -> None:
    assert (REPO / ACCEPT).exists()
    noisy = [(r.line, r.code, r.message) for r in fixtures_run.by_path.get(ACCEPT, []) if r.severity == "error"]
    assert noisy == []

"""The range facts' witness edges are kept per set of proofs (ranges.py `_witness_edges`): over
every fixture and example typed, each answer equals the edges read from the state at that
moment."""

from __future__ import annotations

from pathlib import Path

import pytest

from anodize.language import ranges
from anodize.language.front import ModuleFront

ROOT = Path(__file__).resolve().parents[2]


def test_kept_witness_edges_are_the_edges_of_the_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = ranges.RangeFacts._witness_edges
    asked = 0

    def checked(self: ranges.RangeFacts) -> list[ranges.Edge]:
        nonlocal asked
        asked += 1
        got = kept(self)
        assert got == self._witness_edges_now()
        return got

    monkeypatch.setattr(ranges.RangeFacts, "_witness_edges", checked)
    files = sorted((ROOT / "fixtures/accept").glob("*.py")) + sorted((ROOT / "examples").glob("*.py"))
    for path in files:
        text = path.read_text()
        try:
            front = ModuleFront(text, str(path))
        except Exception:  # (a fixture of the parser's limits)
            continue
        for fdef in front.kernels():
            for spec in front.members(fdef):
                front.typed(fdef, spec)
    assert asked > 500

"""`check_source` reports exactly the `# E: az-code` expectations of every fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from anodize.checker.api import check_source
from anodize.language.messages import CODES
from harness import FIXTURES, expectations, fixture_files

FILES = fixture_files()


def test_there_are_enough_fixtures() -> None:
    accepted = [p for p in FILES if not expectations(p)]
    rejected = [p for p in FILES if expectations(p)]
    assert len(FILES) >= 60
    assert len(accepted) >= 20 and len(rejected) >= 30


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture(path: Path) -> None:
    got = {(d.span.line, d.code) for d in check_source(path.read_text(encoding="utf-8"), str(path))}
    want = expectations(path)
    assert {code for _, code in want} <= set(CODES), "an expectation names a code outside the catalogue"
    assert got == want, f"missing {sorted(want - got)}, unexpected {sorted(got - want)}"


def test_fixture_module_names_are_unique() -> None:
    """mypy checks fixtures/ as one program: two files of one name stop it before any check."""
    from collections import Counter

    names = Counter(p.name for p in fixture_files())
    assert not [n for n, c in names.items() if c > 1]

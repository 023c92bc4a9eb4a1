"""Every rule's VALID and INVALID examples, turned into tests (Fixit style)."""

from __future__ import annotations

import pytest

from anodize.checker.api import check_source
from anodize.checker.rules import ALL_RULES, EXAMPLE_HEADER
from harness import expectations_from_source

CASES = [
    pytest.param(rule, kind, i, src, id=f"{rule.__name__}-{kind}-{i}")
    for rule in ALL_RULES
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i, src in enumerate(examples)
]


def test_every_rule_has_both_sides() -> None:
    for rule in ALL_RULES:
        assert rule.VALID and rule.INVALID, rule.__name__
        assert rule.__doc__ and "\n" not in rule.__doc__.strip(), rule.__name__
        assert rule.CODE.startswith("az-")
        assert all(rule.CODE in src for src in rule.INVALID), rule.__name__


@pytest.mark.parametrize(("rule", "kind", "index", "source"), CASES)
def test_example(rule: type, kind: str, index: int, source: str) -> None:
    full = EXAMPLE_HEADER + source
    got = {(d.span.line, d.code) for d in check_source(full, f"<{rule.__name__}-{kind}-{index}>")}
    want = expectations_from_source(full)
    if kind == "valid":
        assert not want
        assert got == set(), f"{rule.__name__} VALID[{index}] reported {sorted(got)}"
    else:
        assert any(code == rule.CODE for _, code in want)
        assert got == want, f"{rule.__name__} INVALID[{index}]: missing {sorted(want - got)}, unexpected {sorted(got - want)}"

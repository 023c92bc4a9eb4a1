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


def test_a_rule_module_is_found_by_being_in_the_package(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dry run of adding a rule: a new module in checker/rules/ with its class, `CODE` and
    `ORDER` is in ALL_RULES at its place, with nothing else edited (its code and its messages go
    in language/codes.py and catalogue.py)."""
    import sys
    from pathlib import Path

    from anodize.checker import rules

    folder = Path(str(tmp_path))
    (folder / "zz_dry_run.py").write_text(
        "from anodize.checker.rules.base import Rule\n\n\n"
        "class DryRun(Rule):\n"
        '    """A rule added by the test."""\n\n'
        '    CODE = "az-dry-run"\n'
        "    ORDER = 125\n"
    )
    monkeypatch.setattr(rules, "__path__", [*rules.__path__, str(folder)])
    try:
        found = rules._discover()
    finally:
        sys.modules.pop("anodize.checker.rules.zz_dry_run", None)
    names = [r.__name__ for r in found]
    assert names == [r.__name__ for r in ALL_RULES if r.ORDER < 125] + ["DryRun"] + [r.__name__ for r in ALL_RULES if r.ORDER > 125]

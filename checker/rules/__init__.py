"""One rule per file; each carries its VALID and INVALID examples.

A rule is found by being here: `ALL_RULES` holds every `Rule` subclass of the package's
modules, in the order of their `ORDER` (the engine runs them in one batched walk,
anodize/language/walk.py), so adding a rule is its module (its class, `CODE`, `ORDER`, and its
VALID and INVALID examples, which tests/checker/test_rule_examples.py runs), its code in
anodize/language/codes.py and its messages in anodize/language/catalogue.py."""

from __future__ import annotations

import importlib
import pkgutil

from .base import EXAMPLE_HEADER, Rule, RuleContext


def _discover() -> tuple[type[Rule], ...]:
    """Every rule class of this package's modules (a class with a `CODE` of its own), in the
    order of their `ORDER`s."""
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base":
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == mod.__name__ and "CODE" in vars(obj):
                found[obj.__name__] = obj
    rules = sorted(found.values(), key=lambda r: r.ORDER)
    orders = [r.ORDER for r in rules]
    assert len(set(orders)) == len(orders), f"two rules share an ORDER: {orders}"
    return tuple(rules)


# the order the engine runs them in (their diagnostics are sorted by place afterwards)
ALL_RULES: tuple[type[Rule], ...] = _discover()

__all__ = ["ALL_RULES", "EXAMPLE_HEADER", "Rule", "RuleContext"]

"""Accepted fixtures that carry a `main()` run it: on the GPU when there is one, else the CPU backend."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from harness import FIXTURES

RUNNABLE = sorted(p for p in (FIXTURES / "accept").glob("*.py") if "\ndef main()" in p.read_text())


def test_some_fixtures_run() -> None:
    assert len(RUNNABLE) >= 3


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.name)
def test_accepted_fixture_runs(path) -> None:  # type: ignore[no-untyped-def]
    name = f"fixture_run_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
        mod.main()  # each main() asserts its results against NumPy
    finally:
        sys.modules.pop(name, None)

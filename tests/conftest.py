"""Shared pytest setup: the `gpu` marker skips cleanly when no usable CUDA GPU is present."""

from __future__ import annotations

import pytest


def _gpu_available() -> bool:
    try:
        from anodize.runtime import gpu_available

        return gpu_available()
    except Exception:  # a broken install must not break collection
        return False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped cleanly when none is present")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="no usable CUDA GPU (anodize.runtime.gpu_available() is False)")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_disk_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read or write the user's compile cache; it is off unless a test turns it on
    (tests/test_disk_cache_compile.py does, in a folder of its own)."""
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "anodize-cache"))
    monkeypatch.setenv("ANODIZE_CACHE", "off")

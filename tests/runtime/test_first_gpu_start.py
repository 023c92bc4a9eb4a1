"""What a fresh process's first GPU use skips or starts early (bench/ship_bench.py first-result):
cuda.core is imported with ml_dtypes hidden from it (runtime/lazy.py `cuda_device`), and
`ANODIZE_EARLY_INIT=1` starts the driver and GPU 0's primary context on a helper thread when a
built package is imported (runtime/probe.py `start_early`)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from anodize.built import load_package
from anodize.runtime import lazy, probe


def test_a_hidden_module_is_hidden_on_its_thread_only() -> None:
    sys.modules.pop("colorsys", None)
    hide = lazy._HiddenOnThread(frozenset({"colorsys"}))
    sys.meta_path.insert(0, hide)
    got: list[object] = []
    try:
        with pytest.raises(ModuleNotFoundError, match="hidden while cuda.core loads"):
            import colorsys  # noqa: F401
        t = threading.Thread(target=lambda: got.append(__import__("colorsys")))
        t.start()
        t.join()
    finally:
        sys.meta_path.remove(hide)
    assert got and got[0].__name__ == "colorsys"  # type: ignore[attr-defined]


def test_cuda_core_loads_without_ml_dtypes() -> None:
    """In a fresh process, the CUDA device module (cuda.core with it) loads with ml_dtypes not
    imported, the finder is gone afterwards, and anodize's bf16 host dtype still imports it."""
    pytest.importorskip("ml_dtypes")
    script = (
        "import sys\n"
        "from anodize.runtime import lazy\n"
        "lazy.cuda_device()\n"
        "assert 'cuda.core' in sys.modules and 'ml_dtypes' not in sys.modules, sorted(sys.modules)\n"
        "assert not [f for f in sys.meta_path if type(f).__name__ == '_HiddenOnThread']\n"
        "from anodize.language.vocab import SCALARS\n"
        "assert SCALARS['bf16'].dtype.name == 'bfloat16'\n"
        "print('OK')\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


class _Driver:
    """A stand-in for cuda.bindings.driver that records the calls and the thread they ran on."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def _note(self, what: str) -> None:
        self.calls.append((what, threading.current_thread().name))

    def cuInit(self, flags: int) -> tuple[int]:
        self._note("cuInit")
        return (0,)

    def cuDeviceGetCount(self) -> tuple[int, int]:
        return 0, 1

    def cuDeviceGet(self, index: int) -> tuple[int, Any]:
        return 0, ("dev", index)

    def cuDevicePrimaryCtxRetain(self, dev: Any) -> tuple[int, Any]:
        self._note(f"retain {dev}")
        return 0, "ctx"


def test_early_init_is_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANODIZE_EARLY_INIT", raising=False)
    assert probe.start_early() is None
    monkeypatch.setenv("ANODIZE_EARLY_INIT", "0")
    assert probe.start_early() is None


def test_early_init_starts_gpu0_on_a_helper_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = _Driver()
    monkeypatch.setattr(lazy, "cuda_driver", lambda: drv)
    monkeypatch.setattr(probe, "_count", None)
    monkeypatch.delenv("ANODIZE_DEVICE", raising=False)
    monkeypatch.setenv("ANODIZE_EARLY_INIT", "1")
    t = probe.start_early()
    assert t is not None
    t.join(10)
    assert drv.calls == [("cuInit", "anodize-early-init"), ("retain ('dev', 0)", "anodize-early-init")]


def test_early_init_with_the_gpus_hidden_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = _Driver()
    monkeypatch.setattr(lazy, "cuda_driver", lambda: drv)
    monkeypatch.setattr(probe, "_count", None)
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")
    monkeypatch.setenv("ANODIZE_EARLY_INIT", "1")
    t = probe.start_early()
    assert t is not None
    t.join(10)
    assert drv.calls == []


def test_a_built_package_import_starts_early_only_when_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pkg = tmp_path / "k_kernels"
    pkg.mkdir()
    (pkg / "anodize_build.json").write_text('{"format": 1, "kernels": {}}')
    started: list[int] = []
    monkeypatch.setattr(probe, "start_early", lambda: started.append(1))
    monkeypatch.delenv("ANODIZE_EARLY_INIT", raising=False)
    assert load_package(str(pkg / "__init__.py")) == {}
    assert started == []
    monkeypatch.setenv("ANODIZE_EARLY_INIT", "1")
    load_package(str(pkg / "__init__.py"))
    assert started == [1]

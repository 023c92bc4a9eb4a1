"""Every example: accepted by the checker, and matching NumPy on the CPU backend (CI) and the GPU.

Each example's `main()` draws random inputs, runs the kernel(s) and asserts against
NumPy itself; here we run it at a small size and check the returned result too.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# example -> keyword arguments for a small, CI-sized run
SMALL: dict[str, dict[str, int]] = {
    "vecadd": {"n": 10_007},
    "saxpy": {"n": 5_003},
    "scale2d": {"rows": 37, "cols": 53},
    "stencil2d": {"rows": 41, "cols": 67},
    "histogram": {"n": 20_000},
    "transpose": {"rows": 70, "cols": 45},
    "reduce_sum": {"n": 30_000},
    "reduce_sum_safe": {"n": 30_000},
    "sgemm": {"m": 40, "k": 33, "n": 29},
    "softmax": {"rows": 5, "cols": 300},
    "scan": {"n": 3_000},
    "async_pipeline": {"n": 6_000, "chunks": 4},
    "data_parallel": {"n": 9_001},
}


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_example_has_a_small_run() -> None:
    found = {p.stem for p in EXAMPLES.glob("*.py") if "def main(" in p.read_text()}
    assert found <= set(SMALL), f"add these examples to SMALL: {found - set(SMALL)}"


@pytest.mark.parametrize("name", sorted(SMALL))
def test_example_passes_checker(name: str) -> None:
    from anodize.checker.api import check_source

    path = EXAMPLES / f"{name}.py"
    diags = check_source(path.read_text(), str(path))
    assert [d for d in diags if d.severity == "error"] == []


@pytest.mark.parametrize("name", sorted(SMALL))
def test_example_cpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")
    mod = _load(name)
    res = mod.main(**SMALL[name])
    assert res is not None
    assert np.all(np.isfinite(np.asarray(res, dtype=np.float64)))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(SMALL))
def test_example_gpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANODIZE_DEVICE", raising=False)
    import anodize as az

    assert az.device().kind == "cuda"
    mod = _load(name)
    mod.main(**SMALL[name])
    mod.main()  # the example's own default size too


def test_anodize_run_vecadd_reports_device() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "anodize", "run", str(EXAMPLES / "vecadd.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "ANODIZE_DEVICE": "cpu"},
    )
    assert r.returncode == 0, r.stderr
    assert "matches NumPy" in r.stdout
    assert "ran on cpu" in r.stderr

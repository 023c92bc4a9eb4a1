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
    "stencil3d": {"layers": 9, "rows": 13, "cols": 37},
    "histogram": {"n": 20_000},
    "transpose": {"rows": 70, "cols": 45},
    "reduce_sum": {"n": 30_000},
    "reduce_sum_unsafe": {"n": 30_000},
    "sgemm": {"m": 40, "k": 33, "n": 29},
    "softmax": {"rows": 2, "cols": 300},  # blocks of 512 threads (host threads on the CPU backend)
    "softmax_unsafe": {"rows": 5, "cols": 300},
    "scan": {"n": 3_000},
    "async_pipeline": {"n": 6_000, "chunks": 4},
    "data_parallel": {"n": 9_001},
    "generic_saxpy": {"n": 2_001},
    "hashmap": {"n": 20_000},
    "print_assert": {"n": 1_000},
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


# Examples whose `main()` takes many seconds on the CPU backend even at the small size (a
# kernel with barriers or warp operations runs a host thread per GPU thread, and
# reduce_sum_unsafe's `main()` launches a fixed grid of 64 blocks): under `-m slow`; the
# default run launches their kernel on a small grid instead (test_slow_examples_on_a_small_grid).
# (The safe-tier examples pick a small grid on the CPU backend themselves.)
CPU_SLOW = {"reduce_sum_unsafe"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in CPU_SLOW else n for n in sorted(SMALL)]
)
def test_example_cpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")
    mod = _load(name)
    res = mod.main(**SMALL[name])
    assert res is not None
    assert np.all(np.isfinite(np.asarray(res, dtype=np.float64)))


def test_slow_examples_on_a_small_grid() -> None:
    import anodize as az

    assert CPU_SLOW == {"reduce_sum_unsafe"}, "give each example of CPU_SLOW a small-grid run here"
    mod = _load("reduce_sum_unsafe")
    dev = az.device("cpu")
    x_h = np.random.default_rng(6).random(30_000, dtype=np.float32)
    total = dev.zeros(1, az.f32)
    mod.reduce_sum[az.LaunchConfig(grid=4, block=256)](dev.to_device(x_h), total)  # main(): grid=64
    res, ref = float(total.to_host()[0]), float(x_h.astype(np.float64).sum())
    assert abs(res - ref) <= 1e-4 * abs(ref), (res, ref)


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


# ---- the examples that print: stdout checked (captured at the file-descriptor level, where
# the GPU's printf writes too) --------------------------------------------------------------


def _print_assert_output(out: str, n: int) -> None:
    lines = out.splitlines()
    first = f"checked_sqrt: {n} elements, x[0] = 0.25"
    assert lines.count(first) == 3, out  # one line per launch: thread 0 prints
    caught = [ln for ln in lines if ln.startswith("caught: ")]
    assert len(caught) == 1 and caught[0].endswith("print_assert.py:26: assertion failed: sqrt of a negative input")


def test_print_assert_stdout_cpu(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")
    _load("print_assert").main(n=1000)
    _print_assert_output(capfd.readouterr().out, 1000)


@pytest.mark.gpu
def test_print_assert_stdout_gpu(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ANODIZE_DEVICE", raising=False)
    _load("print_assert").main(n=1000)
    _print_assert_output(capfd.readouterr().out, 1000)


@pytest.mark.slow
def test_hashmap_one_million_keys_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")
    res = _load("hashmap").main()  # asserts against a dict and NumPy itself
    assert len(res) > 1 << 20

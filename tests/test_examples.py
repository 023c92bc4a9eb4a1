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
    "transpose": {"rows": 300, "cols": 200},  # the shared-memory examples: their full default size
    "transpose_32x8": {"rows": 300, "cols": 200},
    "reduce_sum": {"n": 1 << 20},
    "reduce_sum_unsafe": {"n": 1 << 20},
    "grid_sync": {"n": 20_000},  # az.grid.sync(): every block of the grid at once, a host thread per GPU thread
    "sgemm": {"m": 200, "k": 150, "n": 130},
    "sgemm_slots": {"m": 200, "k": 150, "n": 130},
    "softmax": {"rows": 2, "cols": 1000},  # local arrays + barriers: one host thread per GPU thread on the CPU backend
    "softmax_unsafe": {"rows": 64, "cols": 1000},
    "scan": {"n": 50_000},
    "async_pipeline": {"n": 6_000, "chunks": 4},
    "async_double_buffer": {"n": 6_000, "chunks": 4, "iters": 16},
    "async_fanout": {"n": 5_000},
    "data_parallel": {"n": 9_001},
    "generic_saxpy": {"n": 2_001},
    "hashmap": {"n": 20_000},
    "print_assert": {"n": 1_000},
    "tile_add": {"n": 5_003},
    "tile_gemm": {"m": 96, "n": 80, "k": 64},
    "tile_softmax": {"rows": 5, "cols": 300},
    "tile_layernorm": {"rows": 5, "cols": 300},
    "tile_attention": {"batch": 1, "heads": 2, "seq": 64, "d": 32},
    "autotune_gemm": {"m": 96, "n": 80, "k": 64},
    "autotune_softmax": {"rows": 6, "cols": 300},
    "autotune_attention": {"batch": 1, "heads": 2, "seq": 256, "d": 16},
    "radix_digits": {"n": 20_000},
    "particles": {"n": 10_007},
    "fluid2d": {"rows": 37, "cols": 53},
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


# The CPU backend runs a kernel with barriers, shared memory or warp operations one block
# at a time, looping over the block's threads between barriers (codegen/cpu/regions.py), so
# the shared-memory examples run at their full default sizes here (they ran at a tenth of
# them, and reduce_sum only under `-m slow`, when each GPU thread took a host thread).


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

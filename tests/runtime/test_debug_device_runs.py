"""The debug device runs what the CPU backend runs: every example (at a size the interpreter
takes in seconds) and every accepted fixture with a `main()`, each asserting against NumPy
itself, with `ANODIZE_DEVICE=debug` (an unchanged program, interpreted), f16 and bf16 included.

A few run in the default test run; every one under `-m slow`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "fixtures" / "accept"

# example -> keyword arguments the interpreter runs in seconds (one Python step per thread's operation)
TINY: dict[str, dict[str, int]] = {
    "vecadd": {"n": 300},
    "saxpy": {"n": 300},
    "scale2d": {"rows": 9, "cols": 13},
    "stencil2d": {"rows": 9, "cols": 17},
    "stencil3d": {"layers": 3, "rows": 5, "cols": 9},
    "histogram": {"n": 500},
    "transpose": {"rows": 20, "cols": 36},
    "transpose_32x8": {"rows": 40, "cols": 36},
    "reduce_sum": {"n": 2_000},
    "reduce_sum_unsafe": {"n": 2_000},
    "grid_sync": {"n": 1_000},
    "sgemm": {"m": 9, "k": 7, "n": 5},
    "sgemm_slots": {"m": 9, "k": 7, "n": 5},
    "softmax": {"rows": 2, "cols": 64},
    "softmax_unsafe": {"rows": 2, "cols": 64},
    "scan": {"n": 600},
    "async_pipeline": {"n": 400, "chunks": 2},
    "data_parallel": {"n": 300},
    "generic_saxpy": {"n": 301},
    "hashmap": {"n": 200},
    "print_assert": {"n": 100},
    "tile_add": {"n": 300},
    "tile_gemm": {"m": 32, "n": 32, "k": 32},
    "tile_softmax": {"rows": 2, "cols": 40},
    "tile_layernorm": {"rows": 2, "cols": 40},
    "tile_attention": {"batch": 1, "heads": 1, "seq": 32, "d": 16},
    "radix_digits": {"n": 700},
    "particles": {"n": 500, "steps": 2},
    "fluid2d": {"rows": 9, "cols": 13, "steps": 2},
    "async_double_buffer": {"n": 600, "chunks": 3, "iters": 4},
    "async_fanout": {"n": 500},
    "autotune_gemm": {"m": 32, "n": 32, "k": 32},
    "autotune_softmax": {"rows": 2, "cols": 40},
    "autotune_attention": {"batch": 1, "heads": 1, "seq": 256, "d": 16},
}
QUICK_EXAMPLES = {"vecadd", "generic_saxpy", "transpose", "transpose_32x8"}
FIXTURE_RUNS = sorted(p for p in FIXTURES.glob("*.py") if "\ndef main()" in p.read_text())
QUICK_FIXTURES = {"half_and_small_types.py", "tile_elementwise_builtins.py"}


def _share(items: list[str], quick: set[str]) -> list[object]:
    return [pytest.param(x, id=str(x), marks=() if Path(str(x)).name in quick else pytest.mark.slow) for x in items]


@pytest.fixture
def debug_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from anodize.runtime import device

    monkeypatch.setenv("ANODIZE_DEVICE", "debug")
    monkeypatch.setenv("PYTHONBREAKPOINT", "0")  # the fixtures' `breakpoint()`: no pdb here
    monkeypatch.setattr(device, "_DEFAULT", None)


def _load(path: Path, name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def test_every_example_has_a_tiny_run() -> None:
    from test_examples import SMALL  # type: ignore[import-not-found]

    assert set(TINY) == set(SMALL)


@pytest.mark.usefixtures("debug_default")
@pytest.mark.parametrize("name", _share(sorted(TINY), QUICK_EXAMPLES))
def test_example_on_the_debug_device(name: str) -> None:
    import anodize as az

    assert az.device().kind == "debug"
    mod = _load(EXAMPLES / f"{name}.py", f"_debug_example_{name}")
    try:
        res = mod.main(**TINY[name])  # type: ignore[attr-defined]
    finally:
        sys.modules.pop(f"_debug_example_{name}", None)
    assert res is not None
    assert np.all(np.isfinite(np.asarray(res, dtype=np.float64)))


@pytest.mark.usefixtures("debug_default")
@pytest.mark.parametrize("path", _share([p.name for p in FIXTURE_RUNS], QUICK_FIXTURES))
def test_accepted_fixture_on_the_debug_device(path: str) -> None:
    import anodize as az

    assert az.device().kind == "debug"
    name = f"_debug_fixture_{Path(path).stem}"
    mod = _load(FIXTURES / path, name)
    try:
        mod.main()  # type: ignore[attr-defined]  # each asserts its results against NumPy
    finally:
        sys.modules.pop(name, None)

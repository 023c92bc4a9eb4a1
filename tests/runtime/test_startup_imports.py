"""Start-up (bench/startup.py times it): the first buffer of a NumPy dtype imports neither
ml_dtypes (seconds, for bf16 host arrays only) nor the compiler; a bf16 array is still met
and recognised once ml_dtypes made it."""

from __future__ import annotations

import subprocess
import sys

import pytest

FIRST_BUFFER = """
import sys, numpy as np, anodize as az
x = az.device("cpu").to_device(np.ones(1000, np.float32))
assert float(x.to_host().sum()) == 1000.0
assert "ml_dtypes" not in sys.modules, "ml_dtypes imported for an f32 buffer"
assert "anodize.codegen.artifact" not in sys.modules, "the compiler imported for a buffer"
assert az.language.vocab.scalar_for_dtype("bfloat16").name == "bf16"
assert "ml_dtypes" not in sys.modules
"""

BF16_BUFFER = """
import numpy as np, ml_dtypes, anodize as az
a = np.arange(8).astype(ml_dtypes.bfloat16)
x = az.device("cpu").to_device(a)
assert str(x.dtype) in ("bf16", "bfloat16") or x.dtype is az.bf16, x.dtype
assert (x.to_host() == a).all()
"""


def test_the_first_f32_buffer_imports_no_ml_dtypes() -> None:
    subprocess.run([sys.executable, "-c", FIRST_BUFFER], check=True, timeout=120)


def test_a_bf16_array_is_recognised_once_ml_dtypes_made_it() -> None:
    pytest.importorskip("ml_dtypes")
    subprocess.run([sys.executable, "-c", BF16_BUFFER], check=True, timeout=120)


IMPORT_ONLY = """
import sys, anodize
heavy = [m for m in sys.modules if m.split(".")[0] in ("llvmlite", "cuda", "torch", "ml_dtypes", "numpy")
         or m.startswith(("anodize.checker", "anodize.codegen", "anodize.language.front", "anodize.runtime"))]
assert not heavy, heavy
"""


def test_import_anodize_loads_no_heavy_dependency() -> None:
    """`import anodize` (the checker, the mypy plugin, `anodize check` do it): no CUDA bindings,
    llvmlite, torch, ml_dtypes or NumPy, and neither the checker, codegen, the front end nor the
    runtime (runtime/lazy.py and anodize/kernel.py `_runtime` load them on first use)."""
    subprocess.run([sys.executable, "-c", IMPORT_ONLY], check=True, timeout=120)

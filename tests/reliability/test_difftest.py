"""Differential testing on the CPU: generated kernels vs the reference interpreter (tools/difftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from difftest import Prog, compare, main, make_program, ulp_diff


def test_cpu_backend_matches_reference_on_generated_programs(tmp_path: Path) -> None:
    rc = main(["--programs", "24", "--seed", "7000", "--n", "97", "--out", str(tmp_path)])
    rep = json.loads((tmp_path / "difftest.json").read_text())
    assert rep["compared_programs"] == 24, rep
    assert rep.get("cpu-vs-reference:ok") == 24, rep["failures"]
    assert rc == 0
    assert (tmp_path / "difftest.md").read_text().startswith("# difftest")


@pytest.mark.gpu
def test_gpu_matches_cpu_and_reference(tmp_path: Path) -> None:
    rc = main(["--programs", "40", "--seed", "9000", "--out", str(tmp_path), "--require-gpu"])
    rep = json.loads((tmp_path / "difftest.json").read_text())
    assert rep["mode"].startswith("gpu")
    assert rep.get("gpu-vs-cpu:ok") == 40, rep["failures"]
    assert rc == 0


def _prog(t: str) -> Prog:
    import random

    return Prog(random.Random(0), t)


@pytest.mark.parametrize(
    "t,op,a,b,want",
    [
        ("i32", "//", -7, 1, -7),  # divisor (1 | 1) = 1
        ("i32", "//", -7, 2, -3),  # (2 | 1) = 3: floor(-7 / 3)
        ("i32", "%", -7, 2, 2),
        ("i32", "<<", 1, 32, 0),  # count at the width
        ("i32", ">>", -8, 40, -1),  # arithmetic shift beyond the width
        ("u32", ">>", 8, 40, 0),
        ("i32", "<<", 1, -1, 0),  # a negative count is a huge unsigned one
        ("i32", "+", 2147483647, 1, -2147483648),  # wraps
        ("u64", "-", 0, 1, 2**64 - 1),
        ("i64", "//", -(2**63), -1, -(2**63)),  # (-1 | 1) = -1: MIN // -1 wraps to MIN
    ],
)
def test_reference_follows_language_md(t: str, op: str, a: int, b: int, want: int) -> None:
    p = _prog(t)
    assert p.ev(("bin", op, ("lit", a), ("lit", b)), {}) == want


def test_ulp_distance_and_float_compare() -> None:
    x = np.array([1.0, np.nan, 0.0], np.float32)
    y = np.array([np.nextafter(np.float32(1.0), np.float32(2.0)), np.nan, -0.0], np.float32)
    assert list(ulp_diff(x, y)) == [1.0, 0.0, 0.0]
    p = _prog("f32")
    ok, why = compare(p, x, y, gpu=False)
    assert not ok and "ulp" in why
    p.math_used.add("exp")
    assert compare(p, x, y, gpu=False)[0]


def test_generated_program_is_accepted_by_the_checker() -> None:
    from anodize.checker.api import check_source

    for seed in range(20):
        _, src, _, _ = make_program(seed)
        assert not [d for d in check_source(src, "p.py") if d.severity == "error"], src

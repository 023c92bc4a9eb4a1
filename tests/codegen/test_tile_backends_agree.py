"""The CPU backend and the debug device run every tile program of the bench with the same
results (issue 26), each against float64 NumPy at the tolerances docs/tiles.md states
("The CPU backend and the debug device"): the GEMM class of bench/tile_variants_v2.py
(tests/codegen/tile_mma_cases.py: canonical, bias+ReLU epilogue, GELU + residual, A @ B.T,
A.T @ B, K counted in tiles, accumulator in, two matmuls, one shot, K = 4095) and the batched
GEMM (`tile.program_id_3d()`), the attention spellings of bench/tile_attention_ops.py
(tests/codegen/attention_variants.py: the example's, exp2 with the scale in the exponent,
causal by `tile.arange`, causal ending at the diagonal, ragged), and the two backends against
each other.  The examples themselves run on both in tests/test_examples.py and
tests/runtime/test_debug_device_runs.py.  Small shapes (the interpreter takes seconds);
ragged everywhere: no size a multiple of its tile.  A few cases in the default run, all under
`-m slow`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anodize as az

sys.path.insert(0, str(Path(__file__).parent))
import attention_variants as AV  # noqa: E402
import tile_mma_cases as C  # noqa: E402

# f16 / bf16 in, f32 accumulate: |got - ref| <= RTOL |ref| + RTOL sqrt(K) (one rounding of the
# 16-bit output, the f32 sum's order); attention (f16 out): 2e-2 both ways
GEMM_RTOL = {"f16": 1e-2, "bf16": 2e-2}
ATTN_TOL = 2e-2
# the two backends against each other: the same f32 operations in the same order
AGREE = {"f16": 1e-3, "bf16": 8e-3, "f32": 1e-5}

GEMM_NAMES = [*C.NAMES, "k4095", "batched"]
QUICK = {("cpu", "epilogue"), ("debug", "b_trans"), ("cpu", "batched"),
         ("cpu", "causal"), ("debug", "exp2")}
# BM, BN, BK, warps and (M, N, K) a device: the debug device interprets each program, so smaller
TILE = {"cpu": (32, 32, 16, 4), "debug": (16, 16, 8, 4)}
SIZE = {"cpu": (40, 50, 56), "debug": (20, 18, 24)}


def _share(names: list[str]) -> list[Any]:
    return [pytest.param(dev, n, id=f"{dev}-{n}", marks=() if (dev, n) in QUICK else pytest.mark.slow)
            for n in names for dev in ("cpu", "debug")]


def run_gemm(tmp_path: Path, dev: Any, name: str, t: str = "f16", sized: str = "") -> tuple[np.ndarray, np.ndarray, float]:
    """(result, float64 reference, the absolute tolerance) of GEMM-class program `name` on `dev`
    (at the tile and size of device kind `sized`, default `dev`'s)."""
    bm, bn, bk, warps = TILE[sized or dev.kind]
    m, n, k = SIZE[sized or dev.kind]
    if name == "k4095":  # K not a multiple of 8
        k = k + 7
    dt = np.float16 if t == "f16" else __import__("ml_dtypes").bfloat16
    batch = 3 if name == "batched" else 0
    src, args, want, _ = C.case(name, m, n, k, dt, bk, seed=len(name), batch=batch)
    mod = C.module_of(tmp_path, C.HEAD + src.format(BM=bm, BN=bn, BK=bk, W=warps, T=t))
    out_i = max(i for i, a in enumerate(args) if isinstance(a, np.ndarray))
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    shape, tile = ((batch, m, n), (1, bm, bn)) if batch else ((m, n), (bm, bn))
    mod.k[az.LaunchConfig.for_tiles(shape, tile)](*dargs)
    kk = max(min(k, bk) if name == "one_shot" else k, 1)
    atol = GEMM_RTOL[t] * np.sqrt(kk) * (2 if name == "two" else 1)
    return dargs[out_i].to_host().astype(np.float64), want, atol


@pytest.mark.parametrize("device,name", _share(GEMM_NAMES))
def test_the_gemm_program_matches_float64(tmp_path: Path, device: str, name: str) -> None:
    got, want, atol = run_gemm(tmp_path, az.device(device), name)
    np.testing.assert_allclose(got, want, rtol=GEMM_RTOL["f16"], atol=atol, err_msg=f"{name} on {device}")


def run_attention(device: str, variant: str, d: int = 16) -> tuple[np.ndarray, np.ndarray]:
    bm, bn = (32, 16) if device == "cpu" else (16, 8)
    # a head is whole programs (seq a multiple of BM); "ragged": one head of any length
    bh, seq = ((1, 45) if variant == "ragged" else (2, 64)) if device == "cpu" else ((1, 21) if variant == "ragged" else (2, 32))
    rng = np.random.default_rng(d + len(variant))
    q, k, v = (rng.standard_normal((bh * seq, d), dtype=np.float32).astype(np.float16) for _ in range(3))
    dev = az.device(device)
    o = dev.full((bh * seq, d), 7.0, az.f16)
    scale = d ** -0.5
    launch = AV.kernel(variant, 4).specialize(BM=bm, BN=bn, D=d)[az.LaunchConfig.for_tiles((bh * seq, d), (bm, d))]
    launch(dev.to_device(q), dev.to_device(k), dev.to_device(v), o, seq, np.float32(scale))
    return o.to_host().astype(np.float64), AV.reference(variant, q, k, v, bh, seq, scale)


@pytest.mark.parametrize("device,variant", _share(list(AV.VARIANTS)))
def test_the_attention_spelling_matches_float64(device: str, variant: str) -> None:
    got, want = run_attention(device, variant)
    np.testing.assert_allclose(got, want, rtol=ATTN_TOL, atol=ATTN_TOL, err_msg=f"{variant} on {device}")


@pytest.mark.slow
@pytest.mark.parametrize("name,t", [("canonical", "bf16"), ("epilogue", "bf16"), ("gelu_residual", "f16"), ("batched", "bf16")])
def test_the_cpu_backend_and_the_debug_device_agree(tmp_path: Path, name: str, t: str) -> None:
    """Both run the generic lowering's f32 operations in one order: their outputs agree to one
    rounding of the output type (AGREE), far inside the float64 tolerance."""
    got_cpu, want, atol = run_gemm(tmp_path, az.device("cpu"), name, t, "debug")
    got_dbg, _, _ = run_gemm(tmp_path, az.device("debug"), name, t, "debug")
    np.testing.assert_allclose(got_cpu, want, rtol=GEMM_RTOL[t], atol=atol)
    out = "f32" if name == "gelu_residual" else t
    np.testing.assert_allclose(got_dbg, got_cpu, rtol=AGREE[out], atol=AGREE[out])

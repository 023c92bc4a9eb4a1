"""Attention compiled by operations (language/tile_plan.py's row mode, codegen/tile/lower.py and
mma_regs.py), with the attention form switched off (`ANODIZE_ATTN_FORM=off`) or spelled so it
is no form: the PTX has the matmuls on tensor cores and the row statistics in quad shuffles
(everywhere: ptxas checks it), and (GPU) the results match float64 NumPy."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import anodize as az

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attention_variants as AV  # noqa: E402


@pytest.mark.gpu
@pytest.mark.parametrize("variant", AV.VARIANTS)
@pytest.mark.parametrize("d,warps,bm", [(64, 4, 128), (128, 4, 128), (64, 4, 64), (128, 8, 128)])
def test_by_operations_attention_matches_float64(variant: str, d: int, warps: int, bm: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_ATTN_FORM", "off")
    bn = 64
    bh, seq = (1, 200) if variant == "ragged" else (3, 256)
    rng = np.random.default_rng(d + warps + len(variant))
    q, k, v = (rng.standard_normal((bh * seq, d), dtype=np.float32).astype(np.float16) for _ in range(3))
    dev = az.device()
    o = dev.full((bh * seq, d), 7.0, az.f16)
    scale = d ** -0.5
    launch = AV.kernel(variant, warps).specialize(BM=bm, BN=bn, D=d)[az.LaunchConfig.for_tiles((bh * seq, d), (bm, d))]
    launch(dev.to_device(q), dev.to_device(k), dev.to_device(v), o, seq, np.float32(scale))
    want = AV.reference(variant, q, k, v, bh, seq, scale)
    np.testing.assert_allclose(o.to_host().astype(np.float64), want, rtol=2e-2, atol=2e-2)

"""The wgmma GEMM tile's PTX stays small: ptxas assembles it on every cold compile (issue 17's
300 ms target), and its time grows with the code in the module (bench/RESULTS.md, 2026-12-01
session 7).  These pin the shape: no zero fill of the accumulators (the first k-tile's first
wgmma runs with scale-d false), the unaligned copy and C's edge stores as loops, four wgmma a
k-tile (unrolled: the looped form, one wgmma written, is behind `k_unroll`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from anodize.codegen.tensorcore.wgmma_asm import AsmGemmConfig, gemm_asm_text

CONFIGS = [
    AsmGemmConfig(128, 256, 8, 4, "f16", "f16"),
    AsmGemmConfig(128, 256, 8, 4, "bf16", "f32"),
    AsmGemmConfig(256, 128, 16, 4, "f16", "bf16"),
    AsmGemmConfig(64, 64, 4, 4, "f16", "f16"),
    AsmGemmConfig(128, 256, 8, 4, "f16", "f16", wg_n=128),
]


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.split("\n") if ln.strip()]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.tile_m}x{c.tile_n}-{c.in_dtype}-{c.out_dtype}-n{c.wg_n}")
def test_no_zero_fill_and_the_fallbacks_are_loops(cfg: AsmGemmConfig) -> None:
    text = gemm_asm_text(cfg)
    parts = cfg.tile_n // (cfg.wg_n or cfg.tile_n)
    assert text.count("wgmma.mma_async") == 4 * parts  # the k-tile's four k16 steps, unrolled
    assert text.count("wgmma.commit_group") == 1 and "wgmma.wait_group.sync.aligned 1;" in text
    assert not re.search(r"mov\.f32 %wf\d+, 0f00000000", text)
    # the first k16 step overwrites on k-tile 0 (scale-d false), every other step accumulates
    assert "setp.ne.s32 %wp5, %wr20, 2;" in text
    assert text.count(", %wp5, 1, 1, 0, 1;") == parts and text.count(", %wp13, 1, 1, 0, 1;") == 3 * parts
    assert "max.s32 %wr23, %wr23, 1;" in text  # K = 0 still runs one (all-zero) k-tile
    # the unaligned copy: one chunk's 8 2-byte loads per operand's loop (`group=1`); C's edge: one element store
    assert text.count("ld.global.b16") == 16
    es = 4 if cfg.out_dtype == "f32" else 2
    assert text.count(f"st.global.b{8 * es}") == 1 and text.count("st.global.v4.b32") == 1


def test_the_example_tile_is_a_few_hundred_lines() -> None:
    # 128 x 256 x 64, f16: 600 lines before (128 zero fills, 2 x 8 unrolled 2-byte loads with
    # their predicates, 8 element stores at C's edge); 413 with the unaligned copy one load a loop
    # iteration, 477 since session 15's copy has a chunk's 8 loads in flight before its store
    n = len(_lines(gemm_asm_text(AsmGemmConfig(128, 256, 8, 4))))
    assert n <= 480, n


def test_the_looped_form_behind_its_switch() -> None:
    text = gemm_asm_text(AsmGemmConfig(128, 256, 8, 4, k_unroll=1))
    assert text.count("wgmma.mma_async") == 1 and "AZW_K_0:" in text
    assert text.count("wgmma.commit_group") == 1 and "wgmma.wait_group.sync.aligned 4;" in text
    assert "mov.pred %wp5, %wp13;" in text


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("k_unroll", [4, 2, 1])
def test_ptxas_takes_the_forms_without_injected_fences_or_spills(k_unroll: int) -> None:
    from anodize.codegen.tensorcore.wgmma_asm import asm_gemm_ptx

    ptx = asm_gemm_ptx(AsmGemmConfig(128, 256, 8, 4, k_unroll=k_unroll))
    with tempfile.TemporaryDirectory() as d:
        src = Path(d, "k.ptx")
        src.write_text(ptx)
        r = subprocess.run(["ptxas", "-O1", "-arch=sm_90a", "-v", "-o", str(Path(d, "k.cubin")), str(src)],
                           capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "0 bytes spill stores" in r.stderr and "C751" not in r.stderr, r.stderr

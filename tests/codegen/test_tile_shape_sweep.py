"""Every GEMM tile shape a Triton user picks compiles for sm_90 without spills (issue 26: "no
refusal of a shape Triton compiles"): BM, BN in {64, 128, 256} x BK 64 x 4 and 8 warps, f16 and
bf16 in, f16 / bf16 / f32 out, through the PTX and `ptxas -v` (no GPU).  A shape whose f32
accumulator cannot fit a thread's registers (`accumulator_fits`: 256 or more a thread, the
128x256 and 256x128 tiles over 4 warps, 256x256 over 4 or 8) is refused by the located
on-chip bound diagnostic, the one `anodize check` gives (Triton compiles those four with the
accumulator spilled to local memory).  The default run compiles three shapes (the mma.sync
tiles whose K step was cut for registers, and a wgmma one); `-m slow` compiles all 84 that fit."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from anodize.codegen.driver import compile_gpu
from anodize.language.front import front_for_source
from anodize.language.tile_plan import accumulator_fits

SRC = """
import anodize as az
from anodize import DisjointSlice2D, Slice2D, bf16, f16, f32, i64, tile

@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={w})
def gemm(a: Slice2D[{t}], b: Slice2D[{t}], c: DisjointSlice2D[{out}], k: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros(({bm}, {bn}), f32)
    for kk in range(0, k, 64):
        acc = tile.matmul(tile.load(a, (pid.row * {bm}, kk), ({bm}, 64)), tile.load(b, (kk, pid.col * {bn}), (64, {bn})), acc)
    tile.store(c, pid, {stored})
"""


def _typed(bm: int, bn: int, w: int, t: str, out: str) -> tuple[str, Any]:
    text = SRC.format(bm=bm, bn=bn, w=w, t=t, out=out, stored="acc" if out == "f32" else f"acc.astype({out})")
    front = front_for_source(text, f"<sweep-{bm}x{bn}-w{w}-{t}-{out}>")
    return text, front.typed(next(f for f in front.kernels() if f.name == "gemm"), ())

SIDES = (64, 128, 256)
COMBOS = list(itertools.product(SIDES, SIDES, (4, 8), ("f16", "bf16"), ("f16", "bf16", "f32")))
UNFIT = {(128, 256, 4), (256, 128, 4), (256, 256, 4), (256, 256, 8)}  # 256 f32 accumulators a thread or more
QUICK = {(128, 64, 4, "f16", "f16"), (64, 128, 8, "bf16", "f32"), (128, 128, 8, "bf16", "bf16")}


def _case(bm: int, bn: int, w: int, t: str, out: str) -> object:
    marks = () if (bm, bn, w, t, out) in QUICK else (pytest.mark.slow,)
    return pytest.param(bm, bn, w, t, out, id=f"{bm}x{bn}x64-w{w}-{t}-{out}", marks=marks)


def test_the_unfit_shapes_are_those_whose_accumulator_leaves_no_registers() -> None:
    assert {(bm, bn, w) for bm, bn, w, _, _ in COMBOS if not accumulator_fits(bm, bn, w)} == UNFIT


@pytest.mark.parametrize("bm,bn,w,t,out", [_case(*c) for c in COMBOS if c[:3] not in UNFIT])
def test_the_shape_compiles_on_tensor_cores_without_spills(ptxas_ok: object, bm: int, bn: int, w: int, t: str, out: str) -> None:
    _, typed = _typed(bm, bn, w, t, out)
    assert typed.ir is not None, [d.message for d in typed.diagnostics]
    art = compile_gpu(typed.ir, "sm_90", ptxas=True)
    r = art.resources
    assert "wgmma.mma_async" in art.ptx or "mma.sync.aligned.m16n8k16" in art.ptx, "off the tensor cores"
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0), r.ptxas_log
    assert r.registers is not None and r.registers <= 255


@pytest.mark.parametrize("bm,bn,w", sorted(UNFIT))
def test_an_accumulator_that_cannot_fit_is_the_located_on_chip_bound_error(bm: int, bn: int, w: int) -> None:
    text, typed = _typed(bm, bn, w, "f16", "f16")
    assert typed.ir is None
    (d,) = typed.diagnostics
    assert d.code == "az-type" and "bytes of shared memory; a block has at most 49152" in d.message, d.message
    lines = text.splitlines()
    assert d.span.line == next(i for i, ln in enumerate(lines, 1) if ln.startswith("def gemm"))
    # the matmul marked with why it stays off the tensor cores, and what would fit it
    (lab,) = d.secondary
    assert "acc = tile.matmul(" in lines[lab.span.line - 1]
    assert f"a {bm}x{bn} f32 accumulator over {w} warps leaves a thread no registers" in lab.text, lab.text
    assert ("`num_warps=8` would share it" if (bm, bn) != (256, 256) else "no warp count of a block holds it") in lab.text


# ---- GPU twins: the shapes whose mma.sync K step is 32 (`mma_sync_k_step`), at ragged sizes ----


@pytest.mark.gpu
@pytest.mark.parametrize("bm,bn,w", [(128, 64, 4), (64, 128, 8)])
@pytest.mark.parametrize("t,out", [("f16", "f32"), ("bf16", "bf16")])
@pytest.mark.parametrize("m,n,k", [(200, 300, 190), (256, 256, 4095)])
def test_the_shape_matches_float64_on_the_gpu(tmp_path: Any, bm: int, bn: int, w: int, t: str, out: str, m: int, n: int, k: int) -> None:
    import importlib.util
    import sys

    import numpy as np

    import anodize as az

    text = SRC.format(bm=bm, bn=bn, w=w, t=t, out=out, stored="acc" if out == "f32" else f"acc.astype({out})")
    p = tmp_path / f"sweep_{bm}x{bn}w{w}{t}{out}.py"
    p.write_text(text)
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[p.stem] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    dt: Any = np.float16 if t == "f16" else __import__("ml_dtypes").bfloat16
    odt: Any = {"f16": np.float16, "bf16": dt, "f32": np.float32}[out]
    rng = np.random.default_rng(bm + bn + w)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(dt)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(dt)
    dev = az.device()
    c = dev.to_device(np.full((m, n), 7.0, odt))
    mod.gemm[az.LaunchConfig.for_tiles((m, n), (bm, bn))](dev.to_device(a), dev.to_device(b), c, k)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-2 if out != "bf16" else 2e-2
    np.testing.assert_allclose(c.to_host().astype(np.float64), want, rtol=tol, atol=tol * np.sqrt(k))

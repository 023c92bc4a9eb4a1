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
from anodize.codegen.driver import compile_gpu
from anodize.codegen.tile.attention import TileAttention
from anodize.codegen.tile.entry import lower_tiles, matmul_report
from anodize.codegen.tile.mma import TileMma
from anodize.codegen.tile.prefetch import TileCopy, TileDrain
from anodize.language.front import front_for_source
from anodize.language.tile_plan import plan_tiles

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attention_variants as AV  # noqa: E402


@pytest.fixture(autouse=True)
def _held_and_prefetched(monkeypatch: pytest.MonkeyPatch) -> None:
    """This file tests (and its GPU twins check) Q held in registers and the K/V prefetch (both
    the defaults since session 15: language/tile_plan.py A_HELD_LIMIT, ANODIZE_TILE_PREFETCH),
    pinned here whatever the environment says."""
    from anodize.language import tile_plan

    monkeypatch.setattr(tile_plan, "A_HELD_LIMIT", 64)
    monkeypatch.setenv("ANODIZE_TILE_PREFETCH", "1")


def kernel_ir(variant: str, bm: int = 128, d: int = 64, warps: int = 4, bn: int = 64):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    src = AV.source(variant, warps)
    front = front_for_source(src, f"<attn-ops-{variant}-{warps}>")
    fdef = next(f for f in front.kernels() if f.name == "attention")
    t = front.typed(fdef, (("BM", bm), ("BN", bn), ("D", d)))
    assert t.ir is not None, [x.message for x in t.diagnostics]
    return replace(t.ir, tile_warps=warps)


def ptxas_log(ptx: str, arch: str) -> str:
    build = "sm_90a" if ".target sm_90a" in ptx else arch
    r = subprocess.run(["ptxas", f"-arch={build}", "-v", "-o", "/dev/null", "-"], input=ptx, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stderr


@pytest.mark.parametrize("variant", AV.VARIANTS)
def test_every_spelling_plans_both_matmuls_on_tensor_cores_with_row_statistics_in_registers(variant: str) -> None:
    for d, warps, held in ((64, 4, True), (128, 8, True), (128, 4, False)):
        plan = plan_tiles(kernel_ir(variant, 128, d, warps))
        assert plan.generic == () and len(plan.sites) == 2 and plan.rows
        s_site, pv_site = sorted(plan.sites.values(), key=lambda c: c.acc is not None)
        assert s_site.y.trans and s_site.acc is None  # K: `.T`
        if held:  # Q: a local loaded once, its fragments held in registers across the loop (64 halves a thread)
            assert s_site.x.load is None and s_site.x.regs is not None and not plan.staged
            assert any(shape == (128, d) for name, shape in plan.registers.items() if name in ("qt", "query"))
        else:  # (128 halves a thread: staged again at each matmul, never materialised in shared memory)
            assert s_site.x.local and s_site.x.load is not None and plan.staged
        assert pv_site.x.regs is not None and pv_site.acc is not None  # P from registers; `acc * alpha`
        assert len(plan.row_reduces) == 2  # the row max and the row sum: quad shuffles
        assert sum(1 for shape in plan.registers.values() if shape[1] == 1) >= 3  # m, l and the new max (at least)


def test_a_kernel_without_row_statistics_keeps_the_gemm_layouts() -> None:
    # (row mode only where a row tile or a register A operand needs the (warps, 1) grid)
    src = """
import anodize as az
from anodize import DisjointSlice2D, Slice2D, f16, f32, tile


@az.tile_kernel(num_warps=4)
def k(a: Slice2D[f16], b: Slice2D[f16], c: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    at = tile.load(a, (pid.row * 128, 0), (128, 64))
    acc = tile.matmul(at, tile.load(b, (0, pid.col * 128), (64, 128))) * 2.0
    tile.store(c, pid, acc)
"""
    front = front_for_source(src, "<attn-ops-gemm>")
    t = front.typed(next(f for f in front.kernels() if f.name == "k"), ())
    assert t.ir is not None
    plan = plan_tiles(t.ir)
    assert len(plan.sites) == 1 and not plan.rows and plan.generic == ()


@pytest.mark.parametrize("variant,d,warps,arch", [
    pytest.param("example", 64, 4, "sm_80", id="example-d64-sm_80"),
    pytest.param("causal", 128, 8, "sm_90", id="causal-d128-sm_90"),
    *[pytest.param(v, d, w, a, id=f"{v}-d{d}-w{w}-{a}", marks=pytest.mark.slow)
      for v in AV.VARIANTS for d in (64, 128) for w in (4, 8) for a in ("sm_80", "sm_90")
      if (v, d, w, a) not in (("example", 64, 4, "sm_80"), ("causal", 128, 8, "sm_90"))]])
def test_the_ptx_has_tensor_core_matmuls_and_quad_shuffles_and_ptxas_takes_it(variant: str, d: int, warps: int, arch: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_ATTN_FORM", "off")
    monkeypatch.setenv("ANODIZE_TILE_PREFETCH", "1")
    monkeypatch.setenv("ANODIZE_TILE_LOOP_VERSIONS", "0")  # (one loop: its statements are the guard's)
    monkeypatch.setenv("ANODIZE_TILE_A_RESIDENT", "0")  # (Q held or staged at its matmul)
    k = kernel_ir(variant, 128, d, warps)
    guard = lower_tiles(k, warps * 32, tensor_cores=True, wgmma=arch == "sm_90", shared_limit=99 * 1024).body[-1]
    mmas = [s for s in guard.body if isinstance(s, TileMma)] + \
        [s for loop in guard.body if hasattr(loop, "body") for s in loop.body if isinstance(s, TileMma)]
    assert len(mmas) == 2 and not any(isinstance(s, TileAttention) for s in guard.body)
    held = d * 128 // (warps * 32) <= 64  # Q's fragments fit in registers (64 a thread at most)
    assert sum(1 for s in mmas if s.a is None) == (2 if held else 1)  # P (and Q where held) from registers
    art = compile_gpu(k, arch, ptxas=False)
    ptx = art.ptx
    # (sm_90: a prefetching loop's register-A matmuls on wgmma, codegen/tile/attn_wgmma.py; the
    # others, and every matmul on sm_80, on mma.sync with ldmatrix)
    wg = sum(1 for s in mmas if s.engine == "wgmma")
    assert wg == 0 or arch == "sm_90"
    assert ptx.count("wgmma.mma_async") > 0 if wg else ptx.count("wgmma") == 0
    assert ptx.count("mma.sync.aligned.m16n8k16") > 0 if wg < len(mmas) else "mma.sync" not in ptx
    assert ptx.count("shfl.sync.bfly") >= 4  # the row max and sum: xor 1 and 2 within each quad
    assert ("ldmatrix" in ptx) == (wg < len(mmas))
    drained = any(isinstance(s, TileDrain) for s in guard.body)
    if held:
        # K and V of the next iteration prefetched (codegen/tile/prefetch.py): two copies before the
        # loop, each matmul waiting for its own group with the other one in flight, a drain after
        assert sum(1 for s in guard.body if isinstance(s, TileCopy)) == 2 and isinstance(guard.body[-1], TileDrain) or drained
        assert all(s.prefetch is not None and s.prefetch.waits == 1 for s in mmas if s.a is None and s.prefetch is not None)
        assert ptx.count("cp.async.wait_group 1") == 2 and "cp.async.wait_group 0" in ptx
    else:  # Q neither held nor resident (ANODIZE_TILE_A_RESIDENT off): its tile is copied in the loop, nothing prefetched
        assert not drained and not any(isinstance(s, TileCopy) for s in guard.body)
    lines, warnings = matmul_report(k, lower_tiles(k, warps * 32, tensor_cores=True, wgmma=arch == "sm_90",
                                                     shared_limit=99 * 1024), arch, "wgmma" if arch == "sm_90" else "mma")
    assert len(lines) == 2 and not any("fma" in ln for ln in lines) and warnings == [], lines
    if shutil.which("ptxas"):
        ptxas_log(ptx, arch)


def test_the_form_switch_leaves_the_recognised_form_by_default() -> None:
    k = kernel_ir("example", 128, 64, 4)
    guard = lower_tiles(k, 128, tensor_cores=True, shared_limit=99 * 1024).body[-1]
    assert any(isinstance(s, TileAttention) for s in guard.body)


def test_the_prefetch_switch_stages_each_tile_at_its_matmul(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_ATTN_FORM", "off")
    monkeypatch.setenv("ANODIZE_TILE_PREFETCH", "0")
    guard = lower_tiles(kernel_ir("exp2"), 128, tensor_cores=True, shared_limit=99 * 1024).body[-1]
    assert not any(isinstance(s, (TileCopy, TileDrain)) for s in guard.body)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", AV.VARIANTS)
@pytest.mark.parametrize("d,warps,bm,prefetch", [(64, 4, 128, ""), (128, 4, 128, ""), (64, 4, 64, ""), (128, 8, 128, ""),
                                                 (64, 8, 128, "0")])
def test_by_operations_attention_matches_float64(variant: str, d: int, warps: int, bm: int, prefetch: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_ATTN_FORM", "off")
    monkeypatch.setenv("ANODIZE_TILE_PREFETCH", prefetch)

    bn = 64
    bh, seq = (1, 200) if variant == "ragged" else (3, 256)
    rng = np.random.default_rng(d + warps + len(variant))
    q, k, v = (rng.standard_normal((bh * seq, d), dtype=np.float32).astype(np.float16) for _ in range(3))
    dev = az.device()
    o = dev.full((bh * seq, d), 7.0, az.f16)
    scale = d ** -0.5
    launch = AV.kernel(variant, warps, f"p{prefetch}").specialize(BM=bm, BN=bn, D=d)[az.LaunchConfig.for_tiles((bh * seq, d), (bm, d))]
    launch(dev.to_device(q), dev.to_device(k), dev.to_device(v), o, seq, np.float32(scale))
    want = AV.reference(variant, q, k, v, bh, seq, scale)
    np.testing.assert_allclose(o.to_host().astype(np.float64), want, rtol=2e-2, atol=2e-2)

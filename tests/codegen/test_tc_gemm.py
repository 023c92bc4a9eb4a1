"""The tensor-core GEMM (codegen/tensorcore/gemm.py): PTX shape and ptxas resources here, results on a GPU.

GPU tolerance: inputs are exact in f16/bf16, products exact in f32, so an f32 result differs from
NumPy's f32 reference only by summation order: |out - ref| <= 1e-3 + 1e-3 |ref| (observed ~1e-5).
An f16 result adds one f16 rounding (rtol 2e-3); a bf16 result one bf16 rounding (rtol 1e-2).
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest

from anodize.codegen.tensorcore.gemm import GemmConfig, emit_gemm_kernel, gemm_module, gemm_ptx, gemm_smem_bytes
from anodize.codegen.tensorcore.wgmma import WgmmaConfig, wgmma_ptx
from anodize.codegen.toolchain import find_ptxas

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")

DEFAULT = GemmConfig()  # 128x128x32, 8 warps, 3 stages
WIDE = GemmConfig(tile_n=256)  # 128x256x32, 8 warps, 3 stages


@pytest.fixture(scope="module")
def default_ptx() -> str:
    return gemm_ptx(DEFAULT, aligned=True)  # one straight-line loop body


def test_smem_bytes() -> None:
    assert gemm_smem_bytes(tile_m=128, tile_n=128, tile_k=32, stages=3) == 3 * (128 * 32 + 32 * 128) * 2
    assert DEFAULT.smem_bytes() == 49152
    assert WIDE.smem_bytes() == 3 * (128 * 32 + 32 * 256) * 2


def test_warp_grid() -> None:
    assert DEFAULT.warp_grid() == (2, 4)  # 64x32 a warp
    assert WIDE.warp_grid() == (2, 4)  # 64x64 a warp
    assert GemmConfig(tile_m=64, tile_n=64, num_warps=4).warp_grid() == (2, 2)


@pytest.mark.parametrize(
    "kw",
    [dict(tile_k=24), dict(in_dtype="f32"), dict(stages=1), dict(tile_m=16, num_warps=8, tile_n=16), dict(tile_m=96)],
)
def test_bad_configs_rejected(kw: dict) -> None:
    with pytest.raises(ValueError):
        GemmConfig(**kw)


def _loop_body(ptx: str) -> str:
    """The PTX of the main loop: from its label to the branch back."""
    labels = re.findall(r"^(\$L__BB\d+_\d+):", ptx, re.M)
    for lab in labels:
        start = ptx.index(lab + ":")
        back = re.search(rf"bra(?:\.uni)?\s+{re.escape(lab)};", ptx[start:])
        if back and "mma.sync" in ptx[start : start + back.end()]:
            return ptx[start : start + back.end()]
    raise AssertionError("no loop holding mma.sync in the PTX")


def test_ptx_pins_instructions(default_ptx: str) -> None:
    body = _loop_body(default_ptx)
    # one k-tile: 2 k-steps x (4 m-tiles x 4 n-tiles) mma, 4 A + 2 B ldmatrix a k-step
    assert body.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 32
    assert body.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 8
    assert body.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 4
    # the next tile's copies: 128x32 A + 32x128 B halves = 1024 chunks of 16 bytes over 256 threads
    assert body.count("cp.async.cg.shared.global") == 4
    assert body.count("cp.async.commit_group") == 1
    assert "cp.async.wait_group 1;" in body  # 3 stages: at most one tile still in flight
    assert body.count("bar.sync") == 1
    assert "ld.local" not in default_ptx and "st.local" not in default_ptx


def test_ptx_bf16_and_transposed_b() -> None:
    ptx = gemm_ptx(GemmConfig(in_dtype="bf16", out_dtype="bf16", b_trans=True), aligned=True)
    body = _loop_body(ptx)
    assert body.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 32
    assert ".trans" not in body  # B is N x K: both operands load untransposed
    assert "cvt.rn.bf16x2.f32" in ptx


def test_aligned_only_has_no_scalar_path() -> None:
    ptx = gemm_ptx(DEFAULT, aligned=True)
    assert "ld.global.b16" not in ptx
    assert "ld.global.b16" in gemm_ptx(DEFAULT, aligned=None)


@needs_ptxas
@pytest.mark.parametrize(
    "cfg",
    [
        pytest.param(DEFAULT, id="128x128x32"),
        pytest.param(WIDE, id="128x256x32", marks=pytest.mark.slow),  # ptxas of the widest tile: the slowest case
        pytest.param(GemmConfig(in_dtype="bf16", out_dtype="f16"), id="bf16"),
        pytest.param(GemmConfig(b_trans=True, out_dtype="bf16"), id="b_trans", marks=pytest.mark.slow),
    ],
)
def test_ptxas_no_spills(cfg: GemmConfig) -> None:
    from anodize.codegen.gpu.ptx import run_ptxas

    for aligned in (None, True):
        _, res = run_ptxas(gemm_ptx(cfg, aligned=aligned), "sm_90")
        assert res.spill_stores == 0 and res.spill_loads == 0, res.ptxas_log
        assert res.stack_frame == 0, res.ptxas_log
        assert 0 < res.registers <= 255


def test_tile_into_a_callers_kernel() -> None:
    """emit_gemm_tile works inside a module with other code: two kernels, one shared buffer."""
    from anodize.codegen.gpu.ptx import emit_ptx

    mod = gemm_module(DEFAULT, name="first")
    emit_gemm_kernel(mod, "second", GemmConfig(out_dtype="f16"))
    ptx = emit_ptx(str(mod), "first")[1]
    assert ".entry first" in ptx  # `second` is internalised by emit_ptx (only the entry is kept)
    assert ptx.count(".extern .shared .align 128 .b8 __az_tc_smem[]") == 1


# ---- GPU -----------------------------------------------------------------------------------


def _bits(x: np.ndarray, dtype: str) -> np.ndarray:
    """Host f32 -> the 16-bit pattern of f16 / bf16 (bf16 rounded to nearest even)."""
    if dtype == "f16":
        return x.astype(np.float16).view(np.uint16)
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bits(u: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f16":
        return u.view(np.float16).astype(np.float32)
    return (u.astype(np.uint32) << 16).view(np.float32)


@functools.lru_cache(maxsize=None)
def _kernel(cfg: GemmConfig | WgmmaConfig, aligned: bool | None):
    from anodize.runtime.tc_gemm import TcGemm

    return TcGemm(cfg, aligned=aligned)


def run_gemm(M: int, N: int, K: int, cfg: GemmConfig | WgmmaConfig, *, pad: int = 0, seed: int = 0, aligned: bool | None = None):
    """Run C = A @ B (or A @ B.T) on the GPU with leading dimensions padded by `pad`; returns
    (out, ref, c_host_full) after checking the padding and a guard past C are untouched."""
    from anodize.runtime.tc_gemm import DeviceArray

    rng = np.random.default_rng(seed)
    lda, ldb_rows = K + pad, (K + pad if cfg.b_trans else N + pad)
    ldc = N + pad
    a32 = rng.uniform(-1, 1, (M, lda)).astype(np.float32)
    bshape = (N, ldb_rows) if cfg.b_trans else (K, ldb_rows)
    b32 = rng.uniform(-1, 1, bshape).astype(np.float32)
    a16, b16 = _bits(a32, cfg.in_dtype), _bits(b32, cfg.in_dtype)
    af, bf = _from_bits(a16, cfg.in_dtype)[:, :K], _from_bits(b16, cfg.in_dtype)
    ref = af @ (bf[:, :K].T if cfg.b_trans else bf[:, :N])
    out_np = {"f32": np.float32, "f16": np.uint16, "bf16": np.uint16}[cfg.out_dtype]
    guard = 4096
    c_host = np.full(M * ldc + guard, 0xFF if out_np is np.uint16 else np.nan, dtype=out_np)
    if out_np is np.uint16:
        c_host[:] = 0x7E00 if cfg.out_dtype == "f16" else 0x7FC0  # NaN poison
    g = _kernel(cfg, aligned)
    da, db, dc = DeviceArray.from_host(a16), DeviceArray.from_host(b16), DeviceArray.from_host(c_host)
    g(da.ptr, db.ptr, dc.ptr, M, N, K, lda, ldb_rows, ldc)
    got = dc.to_host(np.empty_like(c_host))
    for d in (da, db, dc):
        d.free()
    np.testing.assert_array_equal(got[M * ldc :].view(np.uint8), c_host[M * ldc :].view(np.uint8))  # guard
    full = got[: M * ldc].reshape(M, ldc)
    np.testing.assert_array_equal(full[:, N:].view(np.uint8), c_host[: M * ldc].reshape(M, ldc)[:, N:].view(np.uint8))
    out = full[:, :N]
    out = out if out_np is np.float32 else _from_bits(np.ascontiguousarray(out), cfg.out_dtype)
    return out, ref


def _assert_close(out: np.ndarray, ref: np.ndarray, out_dtype: str) -> None:
    assert not np.isnan(out).any(), "an output element was never written"
    rtol, atol = {"f32": (1e-3, 1e-3), "f16": (2e-3, 2e-2), "bf16": (1e-2, 1e-1)}[out_dtype]
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "M,N,K,pad",
    [(4096, 4096, 4096, 0), (1000, 1000, 1000, 0), (77, 130, 65, 0), (77, 130, 65, 3), (256, 256, 40, 8), (96, 72, 37, 3), (5, 3, 1, 0)],
)
@pytest.mark.parametrize("cfg", [DEFAULT, WIDE], ids=["128x128", "128x256"])
def test_gpu_f16_f32(M: int, N: int, K: int, pad: int, cfg: GemmConfig) -> None:
    out, ref = run_gemm(M, N, K, cfg, pad=pad, seed=M + N + K)
    _assert_close(out, ref, "f32")


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [
    GemmConfig(in_dtype="bf16", out_dtype="f32"),
    GemmConfig(in_dtype="f16", out_dtype="f16"),
    GemmConfig(in_dtype="bf16", out_dtype="bf16"),
    GemmConfig(b_trans=True),
    GemmConfig(b_trans=True, in_dtype="bf16", out_dtype="f16", tile_n=256),
    GemmConfig(tile_m=64, tile_n=64, num_warps=4, stages=4, tile_k=64),
], ids=["bf16-f32", "f16-f16", "bf16-bf16", "btrans", "btrans-bf16-wide", "64x64x64-4w"])
@pytest.mark.parametrize("M,N,K,pad", [(1000, 1000, 1000, 0), (77, 130, 65, 1)])
def test_gpu_dtypes_and_layouts(cfg: GemmConfig, M: int, N: int, K: int, pad: int) -> None:
    out, ref = run_gemm(M, N, K, cfg, pad=pad, seed=7)
    _assert_close(out, ref, cfg.out_dtype)


@pytest.mark.gpu
def test_gpu_forced_scalar_path() -> None:
    out, ref = run_gemm(300, 200, 100, DEFAULT, aligned=False)
    _assert_close(out, ref, "f32")


# ---- wgmma (sm_90a) ------------------------------------------------------------------------

WG = WgmmaConfig()  # 128x256x64, 2 warpgroups, 4 stages


def test_wgmma_smem_bytes() -> None:
    from anodize.codegen.tensorcore.wgmma import wgmma_smem_bytes

    assert WG.smem_bytes() == wgmma_smem_bytes(tile_m=128, tile_n=256, stages=4) == 4 * (128 + 256) * 64 * 2 + 1024
    assert WG.smem_bytes() <= 227 * 1024  # the H100/H200 per-block opt-in limit
    with pytest.raises(ValueError):
        WgmmaConfig(tile_m=128, num_warps=4)  # 64 rows a warpgroup


@needs_ptxas
@pytest.mark.parametrize("cfg", [WG, WgmmaConfig(b_trans=True), WgmmaConfig(tile_n=128, in_dtype="bf16", out_dtype="bf16"),
                                 WgmmaConfig(tile_n=128, stages=3, min_blocks=2)],
                         ids=["128x256", "b_trans", "128x128-bf16", "128x128-2perSM"])
def test_wgmma_ptx(cfg: WgmmaConfig) -> None:
    from anodize.codegen.gpu.ptx import run_ptxas

    ptx = wgmma_ptx(cfg, aligned=True)
    assert ".target sm_90a" in ptx
    n = cfg.tile_n
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{cfg.in_dtype}.{cfg.in_dtype}") == 4
    assert "fence.proxy.async.shared::cta" in ptx and "wgmma.wait_group.sync.aligned 1;" in ptx
    _, res = run_ptxas(ptx, "sm_90a")
    assert res.spill_stores == 0 and res.stack_frame == 0, res.ptxas_log
    assert "serialized" not in res.ptxas_log, res.ptxas_log
    assert res.registers <= 65536 // (cfg.threads * cfg.min_blocks)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [
    WG, WgmmaConfig(b_trans=True), WgmmaConfig(tile_n=128, in_dtype="bf16", out_dtype="bf16"),
    WgmmaConfig(tile_n=64, out_dtype="f16", stages=3), WgmmaConfig(b_trans=True, tile_n=128, in_dtype="bf16"),
    WgmmaConfig(tile_n=128, stages=3, min_blocks=2), WgmmaConfig(in_flight=0, stages=3),
], ids=["128x256", "btrans", "128x128-bf16", "128x64-f16", "btrans-128x128-bf16", "128x128-2perSM", "wait0"])
@pytest.mark.parametrize("M,N,K,pad", [(4096, 4096, 4096, 0), (1000, 1000, 1000, 0), (77, 130, 65, 0), (96, 72, 37, 3)])
def test_gpu_wgmma(cfg: WgmmaConfig, M: int, N: int, K: int, pad: int) -> None:
    if M == 4096 and cfg is not WG:
        pytest.skip("one large case is enough")
    out, ref = run_gemm(M, N, K, cfg, pad=pad, seed=M + K)
    _assert_close(out, ref, cfg.out_dtype)

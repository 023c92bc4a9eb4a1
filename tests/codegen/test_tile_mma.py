"""The GEMM class on tensor cores, by operations (language/tile_plan.py -> codegen/tile/): every
variant of tests/codegen/tile_mma_cases.py (fused epilogues, A @ B.T, A.T @ B, K counted in
tiles, a non-zero accumulator, two matmuls a loop, a matmul outside any loop) lowers to wgmma
(sm_90, the (warps, 1) layout; a `.T` operand by wgmma's transpose bit) or mma.sync, ptxas accepts it without
spills, and on a GPU each matches NumPy in float64; the CPU backend runs every one too."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_gpu
from anodize.language.front import front_for_source

sys.path.insert(0, str(Path(__file__).parent))
import tile_mma_cases as C  # noqa: E402


def kernel_ir(text: str) -> Any:
    front = front_for_source(text, f"<mma-{abs(hash(text))}>")
    fdef = next(f for f in front.kernels() if f.name == "k")
    t = front.typed(fdef, ())
    assert t.ir is not None, [d.message for d in t.diagnostics]
    return t.ir


def ptxas_log(ptx: str, arch: str) -> str:
    """ptxas's report with the flags the driver builds the kernel with (codegen/driver.py: -O1 for
    a kernel holding wgmma, its mainloop scheduled already; else ptxas's default)."""
    build = "sm_90a" if ".target sm_90a" in ptx else arch
    opt = ["-O1"] if build.endswith("a") and "wgmma.mma_async" in ptx else []
    r = subprocess.run(["ptxas", f"-arch={build}", *opt, "-v", "-o", "/dev/null", "-"], input=ptx, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stderr


# (variant, arch, tile, the instruction it must become); a CI share by default, the rest under -m slow
_QUICK = [("canonical", "sm_90", (128, 256, 64, 8), "wgmma"), ("b_trans", "sm_90", (128, 256, 64, 8), "wgmma"),
          ("b_trans", "sm_80", (64, 64, 32, 4), "mma.sync")]
_FULL = [(n, "sm_90", (128, 256, 64, 8), "wgmma") for n in C.NAMES if n not in ("canonical", "b_trans")] + \
        [(n, "sm_80", (64, 64, 32, 4), "mma.sync") for n in C.NAMES if n != "b_trans"] + \
        [(n, "sm_90", (128, 128, 64, 4), "wgmma") for n in ("canonical", "a_trans", "acc_in")] + \
        [(n, "sm_90", (64, 64, 32, 4), "wgmma") for n in ("a_trans", "b_trans")]


@pytest.mark.parametrize("name,arch,tile,insn", [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in _QUICK] + [
    pytest.param(*c, id=f"{c[0]}-{c[1]}-{c[2][0]}x{c[2][1]}", marks=pytest.mark.slow) for c in _FULL])
def test_the_variant_is_on_tensor_cores_and_ptxas_takes_it_without_spills(name: str, arch: str, tile: tuple[int, ...],
                                                                            insn: str) -> None:
    bm, bn, bk, warps = tile
    ptx = compile_gpu(kernel_ir(C.source(name, bm, bn, bk, warps, "f16")), arch, ptxas=False).ptx
    wg, mma = ptx.count("wgmma.mma_async"), ptx.count("mma.sync.aligned")
    assert (wg > 0 and mma == 0) if insn == "wgmma" else (mma > 0 and wg == 0), (wg, mma)
    if shutil.which("ptxas"):
        log = ptxas_log(ptx, arch)
        assert re.search(r" 0 bytes spill stores", log) and not re.search(r" [1-9]\d* bytes spill stores", log), log


def test_the_mma_sync_scalar_copy_reads_a_chunk_from_one_address() -> None:
    """mma.sync's copy path for unaligned operands (codegen/tile/mma.py `_Operand.copy`) reads
    each 16-byte chunk's 8 elements as predicated loads from the chunk's first element's
    address plus 0, 2, .., 14 bytes: one address a chunk, no per-element products for LLVM's
    strength reduction to match (a cold compile cost)."""
    ptx = compile_gpu(kernel_ir(C.source("canonical", 64, 64, 32, 4, "f16")), "sm_80", ptxas=False).ptx
    loads = re.findall(r"@p ld\.global\.b16 %rs\d+, \[(%rd\d+)(?:\+(\d+))?\]", ptx)
    assert loads and len(loads) % 8 == 0
    for q in range(0, len(loads), 8):
        chunk = loads[q:q + 8]
        assert {base for base, _ in chunk} == {chunk[0][0]}, chunk
        assert [int(d or 0) for _, d in chunk] == list(range(0, 16, 2)), chunk


def test_k_counted_in_tiles_and_two_matmuls_are_pipelined_loops() -> None:
    from anodize.language.tile_plan import plan_tiles

    for name, loops, sites in (("k_tiles", 1, 1), ("two", 1, 2), ("one_shot", 0, 1), ("stored", 0, 1), ("b_trans", 1, 1)):
        plan = plan_tiles(kernel_ir(C.source(name, 64, 64, 32, 4, "f16")))
        assert (len(plan.pipelined), len(plan.sites)) == (loops, sites), name


@pytest.mark.parametrize("arch,tile", [("sm_90", (128, 128, 64, 4)), ("sm_80", (64, 64, 32, 4))])
def test_a_matmul_written_inside_the_store_is_the_same_program_as_one_named_first(arch: str, tile: tuple[int, ...]) -> None:
    """`tile.store(c, pid, tile.matmul(x, y))` and `acc = tile.matmul(x, y); tile.store(c, pid, acc)`
    compile to the same instructions (language/tile_anf.py hoists the stored matmul; before, the
    first was refused as a generic tile too large for shared memory)."""
    named = C.source("one_shot", *tile, "f16").replace("tile.store(c, pid, acc * 0.5)", "tile.store(c, pid, acc)")
    from test_block_slots import canonical  # (the numbers that count compiles in a process)

    ptx = [canonical(compile_gpu(kernel_ir(src), arch, ptxas=False).ptx) for src in (C.source("stored", *tile, "f16"), named)]
    assert ptx[0] == ptx[1]
    assert ("wgmma.mma_async" if arch == "sm_90" else "mma.sync.aligned") in ptx[0]


def test_an_accumulator_read_by_a_reduction_stays_generic() -> None:
    from anodize.language.tile_plan import plan_tiles

    src = C.source("canonical", 64, 64, 32, 4, "f16").replace("    tile.store(c, pid, acc.astype(f16))",
                                                               "    tile.store(c, pid, (acc - tile.max(acc, axis=1)).astype(f16))")
    plan = plan_tiles(kernel_ir(src))
    assert not plan.sites and not plan.registers and "reduction" in plan.generic[0][1]


# ---- the CPU backend runs every variant (generic lowering) -----------------------------------------


def run_case(tmp_path: Path, dev: Any, name: str, tile: tuple[int, int, int, int], m: int, n: int, k: int, t: str = "f16",
             seed: int = 0, tag: str = "") -> None:
    """`tag`: a comment making the module a new one (its kernels compiled afresh, under the
    switches set now)."""
    bm, bn, bk, warps = tile
    dt = np.float16 if t == "f16" else __import__("ml_dtypes").bfloat16
    src, args, want, _ = C.case(name, m, n, k, dt, bk, seed)
    mod = C.module_of(tmp_path, C.HEAD + src.format(BM=bm, BN=bn, BK=bk, W=warps, T=t) + (f"# {tag}\n" if tag else ""))
    out_i = max(i for i, a in enumerate(args) if isinstance(a, np.ndarray))
    dargs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    mod.k[az.LaunchConfig.for_tiles((m, n), (bm, bn))](*dargs)
    got = dargs[out_i].to_host().astype(np.float64)
    tol = 1e-2 if t == "f16" else 2e-2
    kk = max(min(k, bk) if name == "one_shot" else k, 1)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(kk) * (2 if name == "two" else 1),
                               err_msg=f"{name} {tile} {m}x{n}x{k} {t}")


@pytest.mark.parametrize("name", [n if n in ("canonical", "b_trans", "a_trans", "acc_in", "two", "stored")
                                  else pytest.param(n, marks=pytest.mark.slow) for n in C.NAMES])
def test_the_cpu_backend_runs_the_variant(tmp_path: Path, name: str) -> None:
    run_case(tmp_path, az.device("cpu"), name, (32, 32, 16, 4), 40, 50, 48)


# ---- GPU twins --------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name", C.NAMES)
@pytest.mark.parametrize("tile", [(128, 256, 64, 8), (64, 64, 32, 4), (128, 128, 64, 4)], ids=lambda t: "x".join(map(str, t)))
@pytest.mark.parametrize("m,n,k", [(256, 512, 256), (200, 300, 190), (64, 96, 4095)])
def test_the_variant_matches_numpy_on_the_gpu(tmp_path: Path, name: str, tile: tuple[int, int, int, int], m: int, n: int,
                                             k: int) -> None:
    if name == "k_tiles" and k % tile[2]:
        k = k // tile[2] * tile[2] + tile[2]  # (the reference sums whole tiles: any k works, this is more K)
    run_case(tmp_path, az.device(), name, tile, m, n, k)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["canonical", "a_trans", "b_trans", "epilogue"])
@pytest.mark.parametrize("m,n,k", [(200, 300, 256), (200, 256, 4095)])
def test_one_operand_on_each_copy_path_matches_numpy_on_the_gpu(tmp_path: Path, name: str, m: int, n: int, k: int) -> None:
    """The wgmma mainloop's 2-byte path takes 16-byte copies for the operand whose rows are
    aligned (codegen/tile/wgmma.py): N = 300 leaves B's rows unaligned and A's aligned (K = 256),
    K = 4095 the other way round for the untransposed operands."""
    run_case(tmp_path, az.device(), name, (128, 256, 64, 8), m, n, k)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["canonical", "b_trans"])
def test_a_k_step_of_48_matches_numpy_on_the_gpu(tmp_path: Path, name: str) -> None:
    """BK = 48 over a 2 x 2 warp grid (mma.sync): rows of 6 16-byte chunks in the ring
    (tests/codegen/test_staging_chunks.py)."""
    run_case(tmp_path, az.device(), name, (64, 64, 48, 4), 200, 300, 190)


@pytest.mark.gpu
@pytest.mark.parametrize("name", C.NAMES)
@pytest.mark.parametrize("m,n,k", [(256, 512, 256), (200, 300, 190), (64, 96, 4095)])
def test_the_variant_matches_numpy_on_wgmma_with_two_m64_blocks_a_warpgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                            name: str, m: int, n: int, k: int) -> None:
    """128 x 128 over 4 warps on wgmma (the stacked layout, the default) with the one-block ring
    (`ANODIZE_TILE_TWO_BLOCKS=0`: 4 stages; the default's 3-stage ring is the plain GPU twin's)."""
    monkeypatch.setenv("ANODIZE_TILE_TWO_BLOCKS", "0")
    monkeypatch.setenv("ANODIZE_CACHE", "off")
    if name == "k_tiles" and k % 64:
        k = k // 64 * 64 + 64
    run_case(tmp_path, az.device(), name, (128, 128, 64, 4), m, n, k)


def test_the_stacked_wgmma_layout_is_the_fragments_of_two_m64_wgmma_a_warpgroup() -> None:
    """Register i of a thread of the stacked layout is element (64 (g mt + mi) + 16 w + l // 4
    + 8 (q // 2), 8 ni + 2 (l % 4) + q % 2): wgmma m64nNk16's D fragment of block mi; every
    element of the tile once."""
    from anodize.codegen.tile.layout import MmaLayout, choose_layout

    for m, n, warps in ((128, 128, 4), (256, 64, 8)):
        lay = choose_layout(m, n, warps, True, stack=True)
        assert lay == MmaLayout(m, n, warps, 1, 64) and lay.count == 2 * n // 2
        seen = set()
        for t in range(warps * 32):
            w, lane = divmod(t, 32)
            g, wq = divmod(w, 4)
            for i in range(lay.count):
                mi, rest = divmod(i, n // 2)
                ni, q = divmod(rest, 4)
                want = (64 * (g * 2 + mi) + 16 * wq + lane // 4 + 8 * (q // 2), 8 * ni + 2 * (lane % 4) + q % 2)
                dr, dc = lay.offset(i)
                got = (lay.warp_row(w) + lane // 4 + dr, 2 * (lane % 4) + dc)
                assert got == want, (t, i, got, want)
                seen.add(got)
        assert len(seen) == m * n
    assert choose_layout(128, 128, 4, True) == MmaLayout(128, 128, 2, 2)  # (without `stack`: mma.sync's grid)


@pytest.mark.parametrize("name", ["canonical", "a_trans", "epilogue"])
def test_128x128_over_4_warps_takes_wgmma_by_default(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The 128 x 128 tile over 4 warps runs two m64n128k16 a k16 step (8 a k-tile, A's second
    block 8 KiB further), the epilogue staged (16 stmatrix.x4), ptxas without spills at the
    driver's flags; with `ANODIZE_TILE_WGMMA_STACK=0` (the way back), mma.sync."""
    monkeypatch.delenv("ANODIZE_TILE_EPILOGUE", raising=False)  # (staged: the default)
    monkeypatch.delenv("ANODIZE_TILE_WGMMA_STACK", raising=False)
    src = C.source(name, 128, 128, 64, 4, "f16")
    monkeypatch.setenv("ANODIZE_TILE_WGMMA_STACK", "0")
    back = compile_gpu(kernel_ir(src), "sm_90", ptxas=False)
    assert back.ptx.count("wgmma.mma_async") == 0 and "mma.sync.aligned" in back.ptx
    assert back.matmuls[0].endswith("; not wgmma: ANODIZE_TILE_WGMMA_STACK=0 (two m64 blocks a warpgroup turned off)")
    monkeypatch.delenv("ANODIZE_TILE_WGMMA_STACK")
    art = compile_gpu(kernel_ir(src), "sm_90", ptxas=False)
    ptx = art.ptx
    assert "-> wgmma.m64n128k16 (128x128x64, 2 m64 blocks a warpgroup, 3-stage cp.async ring" in art.matmuls[0], art.matmuls
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16") == 8 and "mma.sync" not in ptx
    assert ptx.count("add.s64 %wd12, %wd10, 512;") == 4 and ptx.count("stmatrix.sync.aligned.m8n8.x4") == 16
    if shutil.which("ptxas"):
        log = ptxas_log(ptx, "sm_90")
        assert re.search(r" 0 bytes spill stores", log) and not re.search(r" [1-9]\d* bytes spill stores", log), log


# a 128 x 128 product fed to a second matmul as its A (from registers): row mode, where each warp holds
# 32 whole rows and the stacked layout does not apply
CHAINED = """
import anodize as az
from anodize import DisjointSlice2D, Slice2D, f16, f32, i64, tile


@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=4)
def k(a: Slice2D[f16], b: Slice2D[f16], w: Slice2D[f16], c: DisjointSlice2D[f32], n: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros((128, 128), f32)
    for kk in range(0, n, 64):
        acc = tile.matmul(tile.load(a, (pid.row * 128, kk), (128, 64)), tile.load(b, (kk, pid.col * 128), (64, 128)), acc)
    out = tile.matmul(acc.astype(f16), tile.load(w, (0, 0), (128, 128)))
    tile.store(c, pid, out)
"""


def test_compile_v_says_why_a_row_mode_128x128_matmul_is_not_on_wgmma() -> None:
    art = compile_gpu(kernel_ir(CHAINED), "sm_90", ptxas=False)
    assert "wgmma.mma_async" not in art.ptx
    assert art.matmuls[0].endswith("not wgmma: the kernel holds whole rows in each warp (a row reduction or an A operand "
                                   "from registers: 32 rows a warp), which two m64 blocks a warpgroup do not"), art.matmuls
    assert "A from registers in the accumulator layout" in art.matmuls[1]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["canonical", "b_trans", "acc_in"])
def test_bf16_variants_match_numpy_on_the_gpu(tmp_path: Path, name: str) -> None:
    run_case(tmp_path, az.device(), name, (128, 256, 64, 8), 300, 260, 200, "bf16")


# a kernel whose matmul is on tensor cores and which also builds a mask from `tile.arange` and
# `[:, None]` (a reshape) elsewhere: with a register plan, the generic lowering evaluated an
# arange or a reshape as a register tile and failed (found by the 20,000-module agreement run)
MASKED_BESIDE_MMA = """
import anodize as az
from anodize import DisjointSlice2D, Slice2D, f16, f32, i64, tile


@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=4)
def k(a: Slice2D[f16], x: Slice2D[f32], c: DisjointSlice2D[f32], d: DisjointSlice2D[f32], n: i64) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, pid, (64, 64))
    causal = (pid.row * 64 + tile.arange(64))[:, None] >= (pid.col * 64 + tile.arange(64))[None, :]
    tile.store(d, pid, tile.where(causal, t, 0.0))
    acc = tile.zeros((64, 64), f32)
    for kk in range(0, n, 32):
        acc = tile.matmul(tile.load(a, (pid.row * 64, kk), (64, 32)), tile.load(a, (kk, pid.col * 64), (32, 64)), acc)
    tile.store(c, pid, acc)
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_an_arange_mask_beside_a_tensor_core_matmul_compiles(arch: str) -> None:
    from anodize.language.tile_plan import plan_tiles

    ir = kernel_ir(MASKED_BESIDE_MMA)
    assert plan_tiles(ir).sites  # the matmul is on tensor cores: the register plan is in force
    ptx = compile_gpu(ir, arch, ptxas=None).ptx
    assert ("wgmma.mma_async" if arch == "sm_90" else "mma.sync") in ptx


def test_the_ring_is_one_two_blocks_of_which_share_an_sm(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default (codegen/tile/wgmma.py `two_blocks_stages`) the stacked 128 x 128 tile over 4
    warps takes a 3-stage ring (97 KiB: two blocks in an sm_90 SM's 228 KiB, 4 stages would take
    129), ptxas within 256 registers; 128 x 256 over 8 warps (128 accumulators a thread: two
    blocks would need <= 128 registers) keeps its 4 stages; `ANODIZE_TILE_TWO_BLOCKS=0` (the way
    back) gives the 128 x 128 tile 4 stages, and an autotuning configuration's `num_stages` sets
    the ring (3 where 64 x 64 takes 4 for two blocks, 4 where 128 x 128 takes 3)."""
    from anodize.codegen.toolchain import CODE_SWITCHES

    assert "ANODIZE_TILE_TWO_BLOCKS" in CODE_SWITCHES and "ANODIZE_TILE_WGMMA_STACK" in CODE_SWITCHES
    monkeypatch.delenv("ANODIZE_TILE_WGMMA_STACK", raising=False)
    monkeypatch.delenv("ANODIZE_TILE_STAGES", raising=False)
    small = kernel_ir(C.source("canonical", 128, 128, 64, 4, "f16"))
    big = kernel_ir(C.source("canonical", 128, 256, 64, 8, "f16"))
    ring = lambda m, n, st: st * (m + n) * 64 * 2 + 1024  # noqa: E731
    monkeypatch.setenv("ANODIZE_TILE_TWO_BLOCKS", "0")
    assert compile_gpu(small, "sm_90", ptxas=False).dynamic_shared_bytes == ring(128, 128, 4)
    monkeypatch.delenv("ANODIZE_TILE_TWO_BLOCKS")
    tiny = kernel_ir(C.source("canonical", 64, 64, 64, 4, "f16"))
    assert compile_gpu(tiny, "sm_90", ptxas=False).dynamic_shared_bytes == ring(64, 64, 4)
    assert compile_gpu(replace(tiny, tile_stages=3), "sm_90", ptxas=False).dynamic_shared_bytes == ring(64, 64, 3)
    assert compile_gpu(replace(small, tile_stages=4), "sm_90", ptxas=False).dynamic_shared_bytes == ring(128, 128, 4)
    art = compile_gpu(small, "sm_90", ptxas=False)
    assert art.dynamic_shared_bytes == ring(128, 128, 3) and 2 * (art.dynamic_shared_bytes + 1024) <= 228 * 1024
    assert compile_gpu(big, "sm_90", ptxas=False).dynamic_shared_bytes == ring(128, 256, 4)
    if shutil.which("ptxas"):
        log = ptxas_log(art.ptx, "sm_90")
        regs = int(re.search(r"Used (\d+) registers", log).group(1))  # type: ignore[union-attr]
        assert regs * 128 * 2 <= 65536 and " 0 bytes spill stores" in log, log

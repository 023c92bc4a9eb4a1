"""The canonical tile GEMM on tensor cores (language/tile_plan.py -> codegen/tile/lower.py
`TileMma` -> codegen/tile/mma.py: mma.sync, codegen/tile/wgmma.py: wgmma): which matmuls take
it, the PTX it gives, and (GPU twins) the results against NumPy and the CPU backend at ragged
sizes.  tests/codegen/test_tile_mma.py covers the other programs of the class."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_gpu
from anodize.codegen.tile.mma import TileMma
from anodize.language import ir
from anodize.codegen.tile.entry import lower_tiles
from anodize.language.front import front_for_source

HEAD = """
import anodize as az
from anodize import DisjointSlice2D, Slice2D, bf16, f16, f32, i64, tile
"""

GEMM = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={warps})
def gemm(a: Slice2D[{t}], b: Slice2D[{t}], c: DisjointSlice2D[{out}], k: i64) -> None:
    pid = tile.program_id_2d()
    acc = {init}
    for kk in range(0, k, {bk}):
        acc = tile.matmul(tile.load(a, (pid.row * {bm}, kk), ({bm}, {bk})), tile.load(b, (kk, pid.col * {bn}), ({bk}, {bn})), acc{tf32})
    tile.store(c, pid, {stored})
"""


def gemm_src(t: str = "f16", out: str = "f16", bm: int = 64, bn: int = 64, bk: int = 32, warps: int = 4,
             init: str = "", tf32: str = "", stored: str = "") -> str:
    return GEMM.format(t=t, out=out, bm=bm, bn=bn, bk=bk, warps=warps, init=init or f"tile.zeros(({bm}, {bn}), f32)",
                       tf32=tf32, stored=stored or (f"acc.astype({out})" if out != "f32" else "acc"))


def kernel_ir(src: str):  # type: ignore[no-untyped-def]
    text = HEAD + textwrap.dedent(src)
    front = front_for_source(text, f"<tcgemm-{abs(hash(text))}>")
    fdef = next(f for f in front.kernels() if f.name == "gemm")
    t = front.typed(fdef, ())
    assert t.ir is not None, [d.message for d in t.diagnostics]
    return t.ir


def gemms(k, threads: int, tensor_cores: bool = True, **kw) -> list[TileMma]:  # type: ignore[no-untyped-def]
    body = lower_tiles(k, threads, tensor_cores=tensor_cores, **kw).body
    return [s for s in ir.walk_stmts(body) if isinstance(s, TileMma)]


@pytest.mark.parametrize("t,out", [("f16", "f16"), ("bf16", "bf16"), ("f16", "f32"), ("bf16", "f16")])
def test_f16_and_bf16_forms_lower_to_one_tensor_core_statement_on_the_gpu(t: str, out: str) -> None:
    k = kernel_ir(gemm_src(t, out))
    (g,) = gemms(k, 128)
    assert (g.layout.m, g.layout.n, g.k) == (64, 64, 32) and g.elem == t and g.warps == 4 and g.engine == "mma"
    # the CPU backend and the debug device (one thread a program) keep the generic lowering
    assert gemms(k, 1) == []
    # and so does a GPU without tensor cores (the driver passes tensor_cores only from sm_80)
    assert gemms(k, 128, tensor_cores=False) == []


@pytest.mark.parametrize("src", [
    gemm_src("f32", "f32"),  # f32 inputs (and f32 inputs with allow_tf32: not on this path)
    gemm_src("f32", "f32", tf32=", allow_tf32=True"),
    gemm_src(bm=48),  # not a power of two: the emitter has no layout for it
    gemm_src(bm=32, bn=32, bk=32, warps=8),  # 16-byte copies do not split over 256 threads
    gemm_src(bk=8),  # K of the tile not a multiple of 16
])
def test_matmuls_the_routines_do_not_take_stay_generic(src: str) -> None:
    k = kernel_ir(src)
    assert gemms(k, k.tile_warps * 32) == []
    ptx = compile_gpu(k, "sm_90", ptxas=False).ptx
    assert "mma.sync" not in ptx and "fma.rn.f32" in ptx


@pytest.mark.parametrize("src", [
    gemm_src(init="tile.full((64, 64), 1.0, f32)"),  # a non-zero initial accumulator
    gemm_src(stored="(acc * 2.0).astype(f16)"),  # an epilogue before the store
    gemm_src().replace("(pid.row * 64, kk)", "(pid.row * 64 + 1, kk)"),  # any offsets
    gemm_src().replace("range(0, k, 32)", "range(32, k, 32)"),  # a K loop not starting at 0
    gemm_src() + "    tile.store(c, pid, (acc * 2.0).astype(f16))\n",  # the accumulator read after the store
])
def test_every_program_of_the_class_is_on_tensor_cores(src: str) -> None:
    (g,) = gemms(kernel_ir(src), 128)
    assert g.engine == "mma"


def test_tile_gemm_ptx_on_sm_80_uses_mma_sync_without_spills() -> None:
    k = kernel_ir(gemm_src())
    art = compile_gpu(k, "sm_80", ptxas=None)
    ptx = art.ptx
    assert ptx.count("mma.sync.aligned.m16n8k16") >= 32 and "ldmatrix" in ptx and "cp.async" in ptx
    assert "fma.rn.f32" not in ptx  # no generic FMA loop left beside it
    assert art.static_shared_bytes <= 48 * 1024
    if shutil.which("ptxas"):  # `ptxas -arch=sm_80 -v` on the PTX itself: no spills
        r = subprocess.run(["ptxas", "-arch=sm_80", "-v", "-o", "/dev/null", "-"], input=ptx, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        gemm_part = r.stderr[r.stderr.index("'gemm'"):]
        assert "0 bytes spill stores, 0 bytes spill loads" in gemm_part.split("Function properties for __az_fault")[0]
    if art.resources is not None:
        assert art.resources.spill_stores == 0 and art.resources.spill_loads == 0


def _ptxas_log(ptx: str, arch: str, *opts: str) -> str:
    r = subprocess.run(["ptxas", f"-arch={arch}", "-v", *opts, "-o", "/dev/null", "-"], input=ptx, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout + r.stderr


@pytest.mark.parametrize("t,out,bm,bn,warps", [("f16", "f16", 128, 256, 8), ("bf16", "f32", 128, 256, 8),
                                               ("f16", "bf16", 64, 64, 4), ("f16", "f16", 128, 128, 8)])
def test_sm_90_lowers_the_gemm_to_wgmma_built_for_sm_90a(t: str, out: str, bm: int, bn: int, warps: int) -> None:
    k = kernel_ir(gemm_src(t, out, bm=bm, bn=bn, bk=64 if bm == 128 else 32, warps=warps))
    art = compile_gpu(k, "sm_90", ptxas=False)
    ptx = art.ptx
    assert ".target sm_90a" in ptx and ptx.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{t}.{t}") == 4
    assert "mma.sync" not in ptx and "fma.rn.f32" not in ptx
    assert art.dynamic_shared_bytes > 48 * 1024 and art.static_shared_bytes == 0
    assert art.arch == "sm_90"
    # one block an SM (its ring): ptxas may use every register; and it assembles at -O1
    from anodize.codegen.driver import start_gpu

    from anodize.codegen.driver import WGMMA_PTXAS_FAST_COMPILE

    pending = start_gpu(k, "sm_90", ptxas=False)
    assert ".minnctapersm 1" in ptx and pending.ptxas_opt == 1 and pending.ptxas_fast == WGMMA_PTXAS_FAST_COMPILE
    other = start_gpu(kernel_ir(gemm_src(t, out, bm=bm, bn=bn, warps=warps)), "sm_80", ptxas=False)
    assert other.ptxas_opt is None and other.ptxas_fast is None
    if shutil.which("ptxas"):  # registers: no spills, and wgmma's pipeline not serialised
        log = _ptxas_log(ptx, "sm_90a") + _ptxas_log(ptx, "sm_90a", "-O1")
        gemm_part = log[log.index("'gemm'"):].split("Function properties for __az_fault")[0]
        assert "0 bytes spill stores, 0 bytes spill loads" in gemm_part, log
        assert "C7511" not in log and "C7514" not in log and "serialized" not in log, log
        assert "C7519" not in log, log  # no warpgroup.arrive injected


def test_the_tensor_core_routine_is_part_of_the_compile_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from anodize.codegen.toolchain import tc_gemm_engine

    assert (tc_gemm_engine("sm_90"), tc_gemm_engine("sm_90a"), tc_gemm_engine("sm_80"), tc_gemm_engine("sm_100"),
            tc_gemm_engine("sm_75")) == ("wgmma", "wgmma", "mma", "mma", "")
    mod = _module(tmp_path, gemm_src())
    monkeypatch.setenv("ANODIZE_CACHE", "off")
    first = mod.gemm.compile("sm_90")
    monkeypatch.setenv("ANODIZE_TC_GEMM", "mma")  # mma.sync on sm_90 too
    second = mod.gemm.compile("sm_90")
    assert "wgmma.mma_async" in first.ptx and "mma.sync.aligned" in second.ptx and "wgmma" not in second.ptx
    assert tc_gemm_engine("sm_90") == "mma"
    monkeypatch.delenv("ANODIZE_TC_GEMM")
    assert mod.gemm.compile("sm_90") is first  # the in-memory cache, keyed on the routine too


def test_wgmma_takes_only_its_tile_shapes_else_mma_sync() -> None:
    kw = {"wgmma": True, "shared_limit": 227 * 1024}
    # BM must be 64 per warpgroup (16 per warp): 64 x 64 with 8 warps stays on mma.sync
    (g,) = gemms(kernel_ir(gemm_src(bm=64, bn=64, warps=8)), 256, **kw)
    assert g.engine == "mma"
    # BN above 2 * BM (B's copies do not split over the block): mma.sync
    (g,) = gemms(kernel_ir(gemm_src(bm=64, bn=256, warps=4)), 128, **kw)
    assert g.engine == "mma"
    (g,) = gemms(kernel_ir(gemm_src(bm=64, bn=128, warps=4)), 128, **kw)
    assert g.engine == "wgmma" and (g.layout.wm, g.layout.wn) == (4, 1)


def test_sm_75_keeps_the_generic_lowering() -> None:
    ptx = compile_gpu(kernel_ir(gemm_src()), "sm_75", ptxas=False).ptx
    assert "mma.sync" not in ptx and "fma.rn.f32" in ptx


def test_the_example_gemm_is_on_tensor_cores() -> None:
    root = Path(__file__).resolve().parents[2]
    path = root / "examples" / "tile_gemm.py"
    front = front_for_source(path.read_text(), str(path))
    fdef = next(f for f in front.kernels() if f.name == "gemm")
    for t in ("f16", "bf16"):
        k = front.typed(fdef, (("T", t), ("BM", 128), ("BN", 256), ("BK", 64))).ir
        assert k is not None
        # sm_90: wgmma, its ring in the compiler's dynamic shared memory
        (g,) = gemms(k, k.tile_warps * 32, wgmma=True, shared_limit=227 * 1024)
        assert (g.engine, g.layout.m, g.layout.n, g.k, g.stages) == ("wgmma", 128, 256, 64, 4)
        assert 48 * 1024 < g.dynamic_smem <= 227 * 1024
        # sm_80 (163 KiB a block): mma.sync, its ring dynamic too
        (g,) = gemms(k, k.tile_warps * 32, shared_limit=163 * 1024)
        assert g.engine == "mma" and g.dynamic_smem > 48 * 1024
        # sm_86/89 (99 KiB, the least of the archs with tensor cores): mma.sync, its ring dynamic
        (g,) = gemms(k, k.tile_warps * 32, shared_limit=99 * 1024)
        assert g.engine == "mma" and g.stages == 3 and 48 * 1024 < g.dynamic_smem <= 99 * 1024


def test_every_arch_with_tensor_cores_has_room_for_the_language_staging_limit() -> None:
    """language/tile_plan.py leaves register tiles and tensor-core operands out of the on-chip bound
    when their two-stage ring fits in STAGING_LIMIT beside the other tiles: every arch whose matmuls
    run on tensor cores must give a block that much (else the lowering could not hold the ring)."""
    from anodize.codegen.toolchain import block_shared_limit, tc_gemm_engine
    from anodize.language.tile_plan import STAGING_LIMIT

    archs = [f"sm_{n}" for n in (70, 72, 75, 80, 86, 87, 89, 90, 100, 103, 120)]
    with_tc = [a for a in archs if tc_gemm_engine(a)]
    assert with_tc[0] == "sm_80" and "sm_75" not in with_tc
    for arch in with_tc:
        assert block_shared_limit(arch) >= STAGING_LIMIT, arch


# ---- GPU twins -------------------------------------------------------------------------------------


_MODULES: dict = {}  # type: ignore[type-arg]  # one module (one compile per device) per source


def _module(tmp_path: Path, src: str):  # type: ignore[no-untyped-def]
    import importlib.util
    import sys

    if src in _MODULES:
        return _MODULES[src]
    p = tmp_path / f"tcgemm_{abs(hash(src))}.py"
    p.write_text(HEAD + textwrap.dedent(src))
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[p.stem] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    _MODULES[src] = mod
    return mod


def _dtype(t: str):  # type: ignore[no-untyped-def]
    if t == "f16":
        return np.float16
    import ml_dtypes

    return ml_dtypes.bfloat16


@pytest.mark.gpu
@pytest.mark.parametrize("t", ["f16", "bf16"])
@pytest.mark.parametrize("m,n,k,kstop", [(77, 130, 65, 65), (256, 256, 256, 256), (64, 64, 32, 32), (1, 7, 3, 3),
                                         (130, 77, 100, 40), (70, 66, 96, 0)])
def test_tensor_core_tile_gemm_matches_numpy_and_the_cpu_backend(tmp_path: Path, t: str, m: int, n: int, k: int, kstop: int) -> None:
    mod = _module(tmp_path, gemm_src(t, t))
    rng = np.random.default_rng(m * 1000 + n + k)
    dt = _dtype(t)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(dt)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(dt)
    # the generic path's masked loads sum K up to the loop's last BK step: ceil(kstop / 32) * 32
    kk = min(k, -(-kstop // 32) * 32)
    ref = a[:, :kk].astype(np.float32) @ b[:kk].astype(np.float32)
    got = {}
    for name in ("gpu", "cpu"):
        dev = az.device() if name == "gpu" else az.device("cpu")
        c = dev.full((m, n), 7.0, getattr(az, t))  # every element of C is written
        mod.gemm[az.LaunchConfig.for_tiles((m, n), (64, 64))](dev.to_device(a), dev.to_device(b), c, kstop)
        got[name] = c.to_host().astype(np.float32)
    tol = 1e-2 if t == "f16" else 2e-2  # one rounding of an f32 sum to the output type
    for name, res in got.items():
        np.testing.assert_allclose(res, ref, rtol=tol, atol=tol * np.sqrt(max(kk, 1)), err_msg=name)
    np.testing.assert_allclose(got["gpu"], got["cpu"], rtol=tol, atol=tol * np.sqrt(max(kk, 1)))


@pytest.mark.gpu
def test_tensor_core_tile_gemm_f32_output_and_more_programs_than_tiles(tmp_path: Path) -> None:
    mod = _module(tmp_path, gemm_src("f16", "f32"))
    rng = np.random.default_rng(3)
    a = rng.standard_normal((100, 90), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((90, 70), dtype=np.float32).astype(np.float16)
    dev = az.device()
    c = dev.zeros((100, 70), az.f32)
    mod.gemm[az.LaunchConfig.for_tiles((300, 300), (64, 64))](dev.to_device(a), dev.to_device(b), c, 90)
    np.testing.assert_allclose(c.to_host(), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_tensor_core_tile_gemm_masks_each_operand_at_its_own_extent(tmp_path: Path) -> None:
    # C larger than A's rows and B's columns, K past B's rows: the generic lowering reads zeros
    # there (so C's extra rows and columns become 0); the tensor-core path must too
    rng = np.random.default_rng(11)
    a = rng.standard_normal((50, 96), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((80, 70), dtype=np.float32).astype(np.float16)
    want = np.zeros((100, 90), np.float32)
    want[:50, :70] = a[:, :80].astype(np.float32) @ b.astype(np.float32)
    for bm, warps in ((64, 4), (128, 8)):
        mod = _module(tmp_path, gemm_src("f16", "f32", bm=bm, bn=bm, warps=warps))
        # (128 x 128 on the generic lowering needs 80 KiB of shared memory: GPU only, tensor cores)
        for dev in (az.device(), az.device("cpu")) if bm == 64 else (az.device(),):
            c = dev.full((100, 90), 5.0, az.f32)
            mod.gemm[az.LaunchConfig.for_tiles((100, 90), (bm, bm))](dev.to_device(a), dev.to_device(b), c, 96)
            np.testing.assert_allclose(c.to_host(), want, rtol=1e-3, atol=1e-3, err_msg=f"{dev.describe()} {bm}")


@pytest.mark.gpu
@pytest.mark.parametrize("engine", ["", "mma"])  # "": the arch's choice (wgmma on sm_90); "mma": ANODIZE_TC_GEMM=mma
@pytest.mark.parametrize("t,out,m,n,k,kstop", [
    ("f16", "f16", 300, 520, 200, 200),  # aligned rows, ragged tiles at every edge
    ("bf16", "bf16", 77, 130, 65, 65),  # K and N odd multiples: the 2-byte copy path and C's element stores
    ("f16", "f32", 129, 257, 192, 100),  # the loop stops at 100: K rounds up to 128 (BK 64)
    ("bf16", "f16", 256, 512, 128, 128),  # whole tiles only
    ("f16", "f16", 5, 3, 0, 0),  # K = 0: C is zero
])
def test_the_big_tile_matches_numpy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str,
                                    t: str, out: str, m: int, n: int, k: int, kstop: int) -> None:
    # examples/tile_gemm.py's GPU tile: 128 x 256 x 64, 8 warps (wgmma on sm_90; mma.sync with a dynamic ring otherwise;
    # the CPU backend's generic lowering would need 180 KiB of shared memory for it: the 64 x 64 twins
    # above compare the two backends)
    if engine:
        monkeypatch.setenv("ANODIZE_TC_GEMM", engine)
    mod = _module(tmp_path, gemm_src(t, out, bm=128, bn=256, bk=64, warps=8))
    rng = np.random.default_rng(m + 7 * n + 13 * k)
    dt = _dtype(t)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(dt)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(dt)
    kk = min(k, -(-kstop // 64) * 64)
    ref = a[:, :kk].astype(np.float32) @ b[:kk].astype(np.float32)
    tol = {"f32": 1e-3, "f16": 1e-2, "bf16": 2e-2}[out]
    dev = az.device()
    c = dev.full((m, n), 7.0, getattr(az, out))  # every element of C is written
    mod.gemm[az.LaunchConfig.for_tiles((m, n), (128, 256))](dev.to_device(a), dev.to_device(b), c, kstop)
    np.testing.assert_allclose(c.to_host().astype(np.float32), ref, rtol=tol, atol=tol * np.sqrt(max(kk, 1)))
    art = mod.gemm.compile()  # this GPU's arch: the ring is in the compiler's dynamic shared memory
    assert art.dynamic_shared_bytes > 48 * 1024 and ("wgmma" in art.ptx) == (art.arch == "sm_90" and not engine)



@pytest.mark.gpu
@pytest.mark.parametrize("t,out,m,n,k,kstop", [("f16", "f16", 600, 300, 200, 200), ("bf16", "f32", 257, 129, 65, 65)])
def test_the_16_warp_tile_matches_numpy(tmp_path: Path, t: str, out: str, m: int, n: int, k: int, kstop: int) -> None:
    # 256 x 128 x 64 over 16 warps (four warpgroups of 64 x 128): bench/tile_gemm_wide.py's tile
    mod = _module(tmp_path, gemm_src(t, out, bm=256, bn=128, bk=64, warps=16))
    rng = np.random.default_rng(m + n + k)
    dt = _dtype(t)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(dt)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(dt)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    tol = {"f32": 1e-3, "f16": 1e-2, "bf16": 2e-2}[out]
    dev = az.device()
    c = dev.full((m, n), 7.0, getattr(az, out))
    mod.gemm[az.LaunchConfig.for_tiles((m, n), (256, 128))](dev.to_device(a), dev.to_device(b), c, kstop)
    np.testing.assert_allclose(c.to_host().astype(np.float32), ref, rtol=tol, atol=tol * np.sqrt(k))

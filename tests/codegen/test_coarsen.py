"""Coarsening (codegen/llvm/coarsen.py): which kernels are coarsened, the index set a coarsened
launch visits (the GPU's mapping run on the CPU backend), its results on aligned and
misaligned views, the 16-byte accesses in its PTX, and GPU twins."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import cg_coarsen as K
import numpy as np
import pytest
from cg_helpers import filecheck, run_cpu

import anodize as az
from anodize.codegen.artifact import hidden_args, launch_grid
from anodize.codegen.llvm.coarsen import coarsen_plan
from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.kernel import Kernel
from anodize.language.typer import build_ir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

COARSENED = {"visit", "visit2d", "axpy", "branchy", "some_lanes", "blur3x3", "via_helper", "taps4"}  # not blur3x3_loops: too large
KERNELS = sorted(n for n, v in vars(K).items() if isinstance(v, Kernel))


@pytest.mark.parametrize("name", KERNELS)
def test_which_kernels_are_coarsened(name: str) -> None:
    """Raw thread ids, atomics, print, an early return, a long loop, a grid-stride loop and
    a block witness or a block-local witness each keep one index per thread."""
    plan = coarsen_plan(build_ir(getattr(K, name)))
    assert (plan is not None) == (name in COARSENED)


def test_the_plan_of_each_slice() -> None:
    axpy = coarsen_plan(build_ir(K.axpy))
    assert axpy is not None and (axpy.reads, axpy.writes) == (["a", "b"], ["c"])
    some = coarsen_plan(build_ir(K.some_lanes))  # `c` may stay unwritten in a lane: scalar stores
    assert some is not None and (some.reads, some.writes) == (["a"], [])
    helper = coarsen_plan(build_ir(K.via_helper))  # `a` reaches a helper: scalar reads there
    assert helper is not None and (helper.reads, helper.writes) == (["b"], ["c"])
    blur = coarsen_plan(build_ir(K.blur3x3))
    assert blur is not None and blur.rank == 2 and (blur.reads, blur.writes) == (["u"], ["out"])


def test_examples_are_coarsened() -> None:
    import saxpy
    import stencil2d
    import vecadd

    for k in (vecadd.vecadd, saxpy.saxpy, stencil2d.stencil2d):
        assert coarsen_plan(build_ir(k)) is not None, k.__name__


def test_wide_records_keep_one_record_per_thread() -> None:
    """A 32-byte record already moves its bytes per thread: four consecutive records per thread
    would spread a warp's loads over four times the lines (measured 0.48x numba on the H200)."""
    import particles

    assert coarsen_plan(build_ir(particles.particle_step)) is None
    ptx = compile_gpu(particles.particle_step, ptxas=False).ptx
    assert ptx.count("ld.global.nc.b32") == 8, "one 32-byte record: eight 4-byte loads (the scalar copy), no lane copies"
    assert ptx.count("ld.global.nc.v4.b32") == 4, "two 16-byte loads on the aligned copy (record_align.py), two on the warp's (record_warp.py)"
    assert "+512]" in ptx, "the warp's: one record apart is 32 bytes, one row 512"


# ---- the index set: the GPU mapping on the CPU backend ---------------------------------------


def offset_array(n: int, dtype: Any, offset: int, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A zeroed array whose data starts `offset` elements past a 64-byte boundary."""
    item = np.dtype(dtype).itemsize
    raw = np.zeros((n + offset) * item + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset * item
    out = raw[start : start + n * item].view(dtype)
    return out.reshape(shape) if shape is not None else out


@pytest.fixture(scope="module")
def cpu() -> dict[tuple[str, bool], Any]:
    return {}


def compiled(cache: dict[tuple[str, bool], Any], name: str, coarsen: bool = True) -> Any:
    key = (name, coarsen)
    if key not in cache:
        cache[key] = compile_cpu(getattr(K, name), coarsen=coarsen)
        assert (cache[key].coarsen > 1) == coarsen
    return cache[key]


@pytest.mark.parametrize("offset", [0, 1, 2])
@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 63, 64, 65, 255, 256, 257, 1001])
@pytest.mark.parametrize("grid", [1, 2, 3, 5])
def test_the_indices_visited_are_the_users_grid_times_block(cpu: Any, n: int, grid: int, offset: int) -> None:
    """Each index below grid * block once, none beyond, whether the view is aligned or not."""
    ck = compiled(cpu, "visit")
    cnt = offset_array(n, np.int32, offset)
    assert run_cpu(ck, (grid,), (64,), cnt).count == 0
    np.testing.assert_array_equal(cnt, (np.arange(n) < grid * 64).astype(np.int32))


@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (9, 33), (4, 64), (13, 130)])
@pytest.mark.parametrize("grid", [(1, 1), (2, 3), (5, 1), (17, 4)])
def test_the_2d_indices_visited_are_the_users_grid_times_block(cpu: Any, shape: tuple[int, int], grid: tuple[int, int]) -> None:
    ck = compiled(cpu, "visit2d")
    rows, cols = shape
    cnt = offset_array(rows * cols, np.int32, 0, shape)
    assert run_cpu(ck, grid, (8, 4), cnt, rank=2).count == 0
    rr, cc = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    np.testing.assert_array_equal(cnt, ((rr < grid[1] * 4) & (cc < grid[0] * 8)).astype(np.int32))


# ---- results -------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [0, 1, 3])
@pytest.mark.parametrize("n", [1, 6, 1000, 4099])
def test_axpy_matches_numpy(cpu: Any, n: int, offset: int) -> None:
    r = np.random.default_rng(n)
    a, b, c = (offset_array(n, np.float32, offset) for _ in range(3))
    a[:] = r.random(n, dtype=np.float32)
    b[:] = r.random(n, dtype=np.float32)
    run_cpu(compiled(cpu, "axpy"), (-(-n // 64),), (64,), a, b, c)
    np.testing.assert_array_equal(c, np.float32(2.5) * a + b)


@pytest.mark.parametrize("name", ["branchy", "some_lanes"])
@pytest.mark.parametrize("offset", [0, 1])
def test_data_dependent_branches_match_the_uncoarsened_kernel(cpu: Any, name: str, offset: int) -> None:
    """Chunks whose lanes agree run in lockstep, mixed ones lane by lane; both as one thread each."""
    n = 4097
    dtype = np.float64 if name == "branchy" else np.float32
    r = np.random.default_rng(7)
    outs = []
    for coarsen in (True, False):
        a = offset_array(n, dtype, offset)
        a[:] = r.random(n) - (0.0 if name == "branchy" else 0.5)
        a[: n // 2 // 8 * 8] = np.repeat(np.sign(r.random(n // 2 // 8) - 0.5), 8)  # runs of agreeing lanes
        c = offset_array(n, dtype, offset)
        c[:] = -7.0
        run_cpu(compiled(cpu, name, coarsen), (-(-n // 64),), (64,), a, c)
        outs.append(c.copy())
        r = np.random.default_rng(7)
    np.testing.assert_array_equal(outs[0], outs[1])


def blur_reference(u: np.ndarray) -> np.ndarray:
    rows, cols = u.shape
    out = u.copy()
    for r in range(1, rows):
        for c in range(1, cols - 1):
            if r + 1 < rows:
                out[r, c] = np.float32(sum(u[r + dr, c + dc] for dr in (-1, 0, 1) for dc in (-1, 0, 1)) / np.float32(9.0))
    return out


@pytest.mark.parametrize("shape", [(6, 9), (5, 16), (3, 130)])
def test_blur_matches_the_uncoarsened_kernel_and_faults_the_same(cpu: Any, shape: tuple[int, int]) -> None:
    """The last row reads past the end of `u`: the coarsened kernel records the same fault."""
    r = np.random.default_rng(1)
    u = r.random(shape, dtype=np.float32)
    outs = []
    faults = []
    for coarsen in (True, False):
        out = np.zeros(shape, np.float32)
        grid = (-(-shape[1] // 32), -(-shape[0] // 8))
        faults.append(run_cpu(compiled(cpu, "blur3x3", coarsen), grid, (32, 8), u, out, rank=2))
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert faults[0].count == faults[1].count == 3 * (shape[1] - 2)  # 3 reads of row `rows` per column 1 .. cols-2
    assert (faults[0].index, faults[0].length) == (shape[0], shape[0])


def test_a_helper_reads_through_its_own_parameter(cpu: Any) -> None:
    n = 999
    a, b, c = (offset_array(n, np.float32, 0) for _ in range(3))
    a[:] = np.arange(n)
    b[:] = 1.0
    run_cpu(compiled(cpu, "via_helper"), (16,), (64,), a, b, c)
    np.testing.assert_array_equal(c, 2.0 * a + 1.0)


@pytest.mark.parametrize("offset", [0, 1, 2])
@pytest.mark.parametrize("n", [3, 9, 64, 1001, 4100])
def test_neighbour_reads_match_the_uncoarsened_kernel(cpu: Any, n: int, offset: int) -> None:
    """`a[j - 4]`, `a[j]`, `a[j + 4]`: one 16-byte load per chunk each when aligned."""
    outs = []
    for coarsen in (True, False):
        a = offset_array(n, np.float32, offset)
        a[:] = np.random.default_rng(n).random(n, dtype=np.float32)
        c = offset_array(n, np.float32, offset)
        c[:] = -1.0
        run_cpu(compiled(cpu, "taps4", coarsen), (-(-n // 64),), (64,), a, c)
        outs.append(c.copy())
    np.testing.assert_array_equal(outs[0], outs[1])
    j = np.arange(4, n - 4)
    np.testing.assert_array_equal(outs[0][4 : max(4, n - 4)], a[j - 4] + a[j] + a[j + 4] + a[j + 1])


@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize("shape", [(9, 6), (17, 64), (33, 130), (5, 3), (40, 257)])
def test_stencil2d_coarsened_matches_numpy(shape: tuple[int, int], offset: int) -> None:
    import stencil2d

    ck = compile_cpu(stencil2d.stencil2d, coarsen=True)
    assert ck.coarsen > 1
    rows, cols = shape
    u = offset_array(rows * cols, np.float32, offset, shape)
    u[:] = np.random.default_rng(rows).random(shape, dtype=np.float32)
    out = offset_array(rows * cols, np.float32, offset, shape)
    assert run_cpu(ck, (-(-cols // 32), -(-rows // 8)), (32, 8), u, out, rank=2).count == 0
    np.testing.assert_allclose(out, stencil2d.reference(u), rtol=1e-6, atol=1e-7)


def test_which_reads_are_neighbour_reads() -> None:
    import stencil2d

    assert len(coarsen_plan(build_ir(K.taps4)).rows) == 3  # not a[j + 1]: 4 bytes off the chunk
    plan = coarsen_plan(build_ir(stencil2d.stencil2d))
    assert len(plan.rows) == 4 and set(plan.rows.values()) == {"u"}  # u[r, c], u[r -+ 1, c] (both arms)
    assert "u" in plan.vector  # so the vector path tests it aligned


# a CI share of 8 generated kernels by default, all 24 under `-m slow`
@pytest.mark.parametrize("seed", [s if s < 8 else pytest.param(s, marks=pytest.mark.slow) for s in range(24)])
def test_generated_kernels_coarsened_match_uncoarsened(seed: int) -> None:
    """tools/difftest.py's generated element-wise kernels (locals, branches, loops, math),
    coarsened and not, on the CPU backend: the same bits, aligned or not."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    from difftest import NP, inputs, load, make_program

    p, src, _, _ = make_program(seed)
    kern = load(src, 50_000 + seed).kern
    cks = [compile_cpu(kern, coarsen=c) for c in (True, False)]
    if cks[0].coarsen == 1:
        pytest.skip("not coarsened (too large)")
    r = np.random.default_rng(seed)
    for n, offset in ((97, 0), (1003, 1), (256, 2)):
        a0, b0, sc = inputs(p, r, n)
        outs = []
        for ck in cks:
            a, b, out = (offset_array(n, NP[p.t], offset) for _ in range(3))
            a[:], b[:] = a0, b0
            f = run_cpu(ck, (-(-n // 64),), (64,), a, b, sc, out)
            outs.append((out.copy(), f.count))
        (got, fc), (want, fw) = outs
        assert fc == fw
        same = got.view(np.uint8) == want.view(np.uint8)
        if got.dtype.kind == "f":
            same = same.reshape(n, -1).all(axis=1) | (np.isnan(got) & np.isnan(want))
        assert np.all(same), (src, np.flatnonzero(~np.asarray(same))[:5])


# ---- PTX --------------------------------------------------------------------------------------


def test_vecadd_ptx_has_16_byte_accesses_behind_the_chunk_test() -> None:
    import vecadd

    ck = compile_gpu(vecadd.vecadd, ptxas=False)
    assert ck.coarsen == 4
    filecheck(
        ck.ptx,
        textwrap.dedent(
            """
            CHECK: .entry vecadd(
            CHECK: .param .u32 vecadd_param_7,
            CHECK: .param .u64 vecadd_param_8
            CHECK: and.b64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 15;
            CHECK: ld.global.nc.v4.{{[bf]}}32
            CHECK: ld.global.nc.v4.{{[bf]}}32
            CHECK: add.rn.f32
            CHECK: st.global.v4.{{[bf]}}32
            CHECK: ld.global.nc.{{[bf]}}32
            CHECK: st.global.{{[bf]}}32
            CHECK-NOT: atom.global
            """
        ),
        what="vecadd.ptx",
    )


def test_f64_chunks_take_two_v2_accesses() -> None:
    ck = compile_gpu(K.branchy, ptxas=False)
    assert ck.ptx.count("ld.global.nc.v2.f64") + ck.ptx.count("ld.global.nc.v2.b64") == 2
    assert ck.ptx.count("st.global.v2.f64") + ck.ptx.count("st.global.v2.b64") == 2


def test_stencil2d_stores_16_bytes_and_loads_the_interior_in_one_block() -> None:
    import stencil2d

    ck = compile_gpu(stencil2d.stencil2d, ptxas=False)
    assert ck.coarsen == 4 and ck.bounds_checks == 0
    assert "st.global.v4." in ck.ptx
    # the all-lanes-interior block: every lane's neighbour reads before the first add of lane 1
    body = ck.ptx.split("ld.global.nc")
    assert len(body) - 1 >= 14


def test_taps4_ptx_loads_16_bytes_per_neighbour_row() -> None:
    ck = compile_gpu(K.taps4, ptxas=False)
    assert ck.bounds_checks == 0
    assert ck.ptx.count("ld.global.nc.v4.") == 3 and ck.ptx.count("st.global.v4.") == 1


def test_uncoarsened_kernels_keep_the_abi() -> None:
    ck = compile_gpu(K.with_raw_id, ptxas=False)
    assert ck.coarsen == 1 and "with_raw_id_param_3" in ck.ptx and "with_raw_id_param_4" not in ck.ptx


def test_launch_grid_and_hidden_arguments() -> None:
    import vecadd

    ck = compile_gpu(vecadd.vecadd, ptxas=False)
    assert launch_grid(ck, (1, 1, 1)) == (1, 1, 1)
    assert launch_grid(ck, (4097, 1, 1)) == (1025, 1, 1)
    hidden = hidden_args(ck, 1234, (4097, 1, 1), (256, 1, 1), 1)
    assert hidden[0] == 1234 and int(hidden[1]) == 1 and int(hidden[2]) == 4097 * 256


@pytest.mark.parametrize("name", ["blur3x3", "axpy", "branchy", "via_helper"])
def test_no_spills(ptxas_ok: object, name: str) -> None:
    """A bounds check left in a coarsened kernel (blur3x3: the row below) costs no spills."""
    r = compile_gpu(getattr(K, name), "sm_90", ptxas=True).resources
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0), r.ptxas_log


def test_blur_with_one_check_left_compiles_without_spills(ptxas_ok: object) -> None:
    """`ptxas -arch=sm_90 -v`: 0 bytes of spills for the 3x3 blur whose row-below reads keep
    their check (one guard missing: three checked reads), coarsened and not.  The fault path is
    a call to the cold `__az_fault` from a cold branch (an `atom.global.add.u32` there)."""
    for k, factor in ((K.blur3x3, 4), (K.blur3x3_loops, 1)):
        ck = compile_gpu(k, "sm_90", ptxas=True)
        assert ck.bounds_checks == (3 if factor == 4 else 1) and ck.coarsen == factor
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in ck.resources.ptxas_log, ck.resources.ptxas_log
        assert "call.uni" in ck.ptx and "__az_fault" in ck.ptx and "atom.global.add.u32" in ck.ptx


def test_the_fault_path_is_a_cold_branch() -> None:
    ck = compile_gpu(K.blur3x3_loops, ptxas=False)
    assert "!prof" in ck.llvm_ir and '!{ !"branch_weights", i32 1048576, i32 1 }' in ck.llvm_ir


# ---- GPU twins ----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 5, 1000, 4099, 1 << 20])
@pytest.mark.parametrize("grid", [1, 3, 4097])
def test_gpu_visits_the_users_grid_times_block(n: int, grid: int) -> None:
    dev = az.device(0)
    raw = dev.zeros(n + 1, az.i32)
    for cnt in (raw[: n], raw[1:]):  # aligned, and a view one element in
        K.visit[az.LaunchConfig(grid, 64)](cnt)
        dev.synchronize()
        np.testing.assert_array_equal(cnt.to_host(), (np.arange(n) < grid * 64).astype(np.int32))
        raw.copy_from(np.zeros(n + 1, np.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [0, 1, 2])
def test_gpu_axpy_on_views(offset: int) -> None:
    dev = az.device(0)
    n = (1 << 16) + 3
    r = np.random.default_rng(2)
    a_h, b_h = r.random(n + offset, dtype=np.float32), r.random(n + offset, dtype=np.float32)
    a, b = dev.to_device(a_h)[offset:], dev.to_device(b_h)[offset:]
    c = dev.zeros(n + offset, az.f32)[offset:]
    K.axpy[az.LaunchConfig.for_num_elems(n, block=64)](a, b, c)
    np.testing.assert_array_equal(c.to_host(), np.float32(2.5) * a_h[offset:] + b_h[offset:])


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(257, 511), (64, 1024), (9, 6)])
def test_gpu_stencil2d_matches_numpy(shape: tuple[int, int]) -> None:
    import stencil2d

    stencil2d.main(*shape)


@pytest.mark.gpu
def test_gpu_blur_matches_the_cpu_backend() -> None:
    dev = az.device(0)
    u_h = np.random.default_rng(5).random((37, 70), dtype=np.float32)
    out = dev.zeros((37, 70), az.f32)
    K.blur3x3[az.LaunchConfig.for_shape((37, 70), block=(32, 8))](dev.to_device(u_h), out)
    with pytest.raises(az.KernelFault):
        dev.synchronize()
    cpu_out = np.zeros((37, 70), np.float32)
    run_cpu(compile_cpu(K.blur3x3), (3, 5), (32, 8), u_h, cpu_out, rank=2)
    np.testing.assert_array_equal(out.to_host(), cpu_out)


def test_per_thread_tiles_are_not_coarsened() -> None:
    """A `thread.tile_2d` witness names TR x TC elements per thread, not one lane's index:
    a kernel using one keeps one thread per GPU thread (coarsening would remap it)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "fixtures" / "accept" / "owned_tiles.py"
    spec = importlib.util.spec_from_file_location("_owned_tiles_coarsen", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    kernels = [v for v in vars(mod).values() if type(v).__name__ == "Kernel" and v.generic is None]
    assert len(kernels) >= 3
    for k in kernels:
        assert compile_gpu(k, "sm_90", ptxas=False).coarsen == 1, k.__name__

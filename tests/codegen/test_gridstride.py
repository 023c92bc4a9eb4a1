"""Grid-stride loops: 16-byte vector chunks for elementwise bodies (FileCheck on LLVM IR
and PTX, ptxas), the same results as the scalar mapping (CPU backend, aligned and
misaligned views), and the mapping itself."""

from __future__ import annotations

import functools
import textwrap
from typing import Any

import cg_gridstride as K
import numpy as np
import pytest
from cg_helpers import ARCH_PARAMS, ARCHS, filecheck, rng, run_cpu

from anodize.language import ir
from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.language.typer import build_ir
from anodize.codegen.llvm.gridstride import vector_plan
from anodize.kernel import Kernel

GS_KERNELS = sorted(n for n, v in vars(K).items() if isinstance(v, Kernel))
VECTOR = {"copy_gs", "vecadd_gs", "axpy64_gs", "widen_gs", "divmod_gs", "update_gs", "loop_in_body_gs", "i64_gs", "owner_gs"}


def _plan(name: str) -> object:
    k = build_ir(getattr(K, name))
    loops = [s for s in ir.walk_stmts(k.body) if isinstance(s, ir.GridStride)]
    assert len(loops) == 1
    return vector_plan(loops[0])


@pytest.mark.parametrize("name", GS_KERNELS)
def test_which_bodies_are_elementwise(name: str) -> None:
    assert (_plan(name) is not None) == (name in VECTOR)


def test_copy_gs_llvm_has_vector_accesses_behind_an_alignment_test() -> None:
    ck = compile_gpu(K.copy_gs, ptxas=False)
    assert ck.bounds_checks == 0
    filecheck(
        ck.llvm_ir,
        textwrap.dedent(
            """
            CHECK: define ptx_kernel void @"copy_gs"(
            CHECK: ptrtoint ptr addrspace(1) %"a.data" to i64
            CHECK: and i64 {{.*}}, 15
            CHECK: ptrtoint ptr addrspace(1) %"c.data" to i64
            CHECK: and i64 {{.*}}, 15
            CHECK: br i1 {{.*}}, label %"gsv.pre", label %"gs.pre"
            CHECK: gsv.pre:
            CHECK: shl i64 {{.*}}, 2
            CHECK: gsv.body:
            CHECK: load <4 x float>, ptr addrspace(1) {{.*}}, align 16
            CHECK: store <4 x float> {{.*}}, ptr addrspace(1) {{.*}}, align 16
            CHECK: gs.pre:
            CHECK: phi i64
            CHECK: gs.body:
            CHECK: load float, ptr addrspace(1)
            CHECK-NOT: call void @"__az_fault"
            """
        ),
        what="copy_gs.ll",
    )


def test_copy_gs_ptx_uses_16_byte_nc_loads_and_stores() -> None:
    ck = compile_gpu(K.copy_gs, ptxas=False)
    filecheck(
        ck.ptx,
        textwrap.dedent(
            """
            CHECK: .entry copy_gs(
            CHECK: .reqntid 64, 1, 1
            CHECK: and.b64 {{.*}}, 15;
            CHECK: and.b64 {{.*}}, -4;
            CHECK: ld.global.nc.v4.{{[bf]}}32
            CHECK-NEXT: add.s64
            CHECK-NEXT: st.global.v4.{{[bf]}}32
            CHECK: ld.global.nc.{{[bf]}}32
            CHECK: st.global.{{[bf]}}32
            CHECK-NOT: __az_fault
            """
        ),
        what="copy_gs.ptx",
    )


def test_vecadd_gs_ptx() -> None:
    ck = compile_gpu(K.vecadd_gs, ptxas=False)
    filecheck(
        ck.ptx,
        textwrap.dedent(
            """
            CHECK: ld.global.nc.v4.{{[bf]}}32
            CHECK: ld.global.nc.v4.{{[bf]}}32
            CHECK-COUNT-4: add.rn.f32
            CHECK: st.global.v4.{{[bf]}}32
            """
        ),
        what="vecadd_gs.ptx",
    )


def test_8_byte_elements_use_two_v2_accesses() -> None:
    ck = compile_gpu(K.axpy64_gs, ptxas=False)
    filecheck(
        ck.llvm_ir,
        "CHECK-COUNT-4: load <2 x double>, ptr addrspace(1) {{.*}}, align 16\nCHECK-COUNT-2: store <2 x double>\n",
        what="axpy64_gs.ll",
    )
    filecheck(
        ck.ptx,
        "CHECK-COUNT-4: ld.global.nc.v2.{{[bf]}}64\nCHECK-COUNT-2: st.global.v2.{{[bf]}}64\n",
        what="axpy64_gs.ptx",
    )


def test_output_read_back_uses_a_plain_vector_load() -> None:
    ck = compile_gpu(K.update_gs, ptxas=False)
    filecheck(ck.ptx, "CHECK: ld.global.v4.{{[bf]}}32\nCHECK: ld.global.nc.v4.{{[bf]}}32\nCHECK: st.global.v4.{{[bf]}}32\n", what="update_gs.ptx")


@pytest.mark.parametrize("name", sorted(set(GS_KERNELS) - VECTOR))
def test_other_bodies_keep_scalar_accesses(name: str) -> None:
    ck = compile_gpu(getattr(K, name), ptxas=False)
    assert ".v4." not in ck.ptx and ".v2." not in ck.ptx
    assert "<4 x" not in ck.llvm_ir and "<2 x" not in ck.llvm_ir


@pytest.mark.parametrize("arch", ARCH_PARAMS)
@pytest.mark.parametrize("name", GS_KERNELS)
def test_ptxas_accepts_grid_stride_kernels(name: str, arch: str, ptxas_ok: object) -> None:
    ck = compile_gpu(getattr(K, name), arch, ptxas=False)
    ptxas_ok(ck.ptx, arch)  # type: ignore[operator]
    ptxas_ok(compile_gpu(getattr(K, name), arch, line_info=True, ptxas=False).ptx, arch)  # type: ignore[operator]


def test_registers_and_no_spills(ptxas_ok: object) -> None:
    for k in (K.copy_gs, K.vecadd_gs, K.axpy64_gs):
        r = compile_gpu(k, "sm_90", ptxas=True).resources
        assert r.registers is not None and r.registers <= 40
        assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)


# ---- CPU backend: the GPU's mapping gives the scalar mapping's results --------------------------


def aligned(n: int, dtype: Any, offset: int = 0) -> np.ndarray:
    """A zeroed array whose data starts `offset` elements past a 64-byte boundary."""
    item = np.dtype(dtype).itemsize
    raw = np.zeros((n + offset) * item + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset * item
    out = raw[start : start + n * item].view(dtype)
    assert n == 0 or out.ctypes.data % 16 == (offset * item) % 16
    return out


def _inputs(name: str, n: int, off: int) -> list[Any]:
    r = rng()

    def arr(values: np.ndarray, dtype: Any) -> np.ndarray:
        out = aligned(n, dtype, off)
        out[:] = values
        return out

    f32, f64, i32 = np.float32, np.float64, np.int32
    if name == "copy_gs":
        return [arr(r.random(n), f32), aligned(n, f32, off)]
    if name == "vecadd_gs":
        return [arr(r.random(n), f32), arr(r.random(n), f32), aligned(n, f32, off)]
    if name == "axpy64_gs":
        return [np.float64(1.25), arr(r.random(n), f64), arr(r.random(n), f64), aligned(n, f64, off)]
    if name == "widen_gs":
        return [arr(r.random(n), f32), aligned(n, f64, off), aligned(n, i32, off)]
    if name == "divmod_gs":
        b = r.integers(-9, 10, n)
        return [arr(r.integers(-1000, 1000, n), i32), arr(b, i32), aligned(n, i32, off), aligned(n, i32, off)]
    if name == "update_gs":
        return [arr(r.integers(0, 2**32, n), np.uint32), arr(r.integers(0, 2**32, n), np.uint32)]
    if name == "loop_in_body_gs":
        return [arr(r.random(n), f64), aligned(n, f64, off)]
    if name == "i64_gs":
        return [arr(r.integers(-(2**40), 2**40, n), np.int64), aligned(n, np.int64, off)]
    if name == "owner_gs":
        return [aligned(n, i32, off), aligned(n, i32, off)]
    raise AssertionError(name)


@functools.cache
def _cpu(name: str, vector: bool) -> Any:
    return compile_cpu(getattr(K, name), vector_grid_stride=vector)


def _run(ck: Any, grid: int, args: list[Any]) -> tuple[list[np.ndarray], int]:
    f = run_cpu(ck, (grid,), (64,), *args)
    return [a.copy() for a in args if isinstance(a, np.ndarray)], f.count


@pytest.mark.parametrize("name", sorted(VECTOR - {"owner_gs"}))
@pytest.mark.parametrize(("n", "grid"), [(0, 1), (1, 1), (3, 1), (4, 1), (5, 2), (255, 1), (256, 1), (257, 1), (1001, 2), (4099, 3), (300, 40)])
@pytest.mark.parametrize("off", [0, 1])
def test_vector_mapping_matches_scalar_mapping(name: str, n: int, grid: int, off: int) -> None:
    vec = _cpu(name, True)
    ref = _cpu(name, False)
    got, faults = _run(vec, grid, _inputs(name, n, off))
    want, want_faults = _run(ref, grid, _inputs(name, n, off))
    assert faults == want_faults
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_vector_results_match_numpy() -> None:
    vec = compile_cpu(K.vecadd_gs, vector_grid_stride=True)
    a, b, c = _inputs("vecadd_gs", 1003, 0)
    c[:] = -1
    assert run_cpu(vec, (2,), (64,), a, b, c).count == 0
    np.testing.assert_array_equal(c, a + b)
    q = compile_cpu(K.divmod_gs, vector_grid_stride=True)
    x, y, qq, rr = _inputs("divmod_gs", 1003, 0)
    f = run_cpu(q, (2,), (64,), x, y, qq, rr)
    zeros = int(np.count_nonzero(y == 0))
    assert zeros > 0 and f.count == 2 * zeros  # one fault per element and operator
    nz = y != 0
    np.testing.assert_array_equal(qq[nz], x[nz] // y[nz])
    np.testing.assert_array_equal(rr[nz], x[nz] % y[nz])
    np.testing.assert_array_equal(qq[~nz], 0)


def _owners(n: int, threads: int, vector: bool) -> np.ndarray:
    """The documented mapping: which global thread takes each index."""
    if not vector:
        return np.arange(n) % threads
    tail = n & ~3
    idx = np.arange(n)
    return np.where(idx < tail, (idx // 4) % threads, (idx - tail) % threads)


@pytest.mark.parametrize("n", [0, 7, 1000, 1003, 4096 + 2])
def test_the_mapping_itself(n: int) -> None:
    vec = _cpu("owner_gs", True)
    for off, vector in ((0, True), (1, False)):  # a misaligned view runs the scalar loop
        a, c = _inputs("owner_gs", n, off)
        assert run_cpu(vec, (3,), (64,), a, c).count == 0
        np.testing.assert_array_equal(c, _owners(n, 3 * 64, vector))
    a, c = _inputs("owner_gs", n, 0)
    run_cpu(_cpu("owner_gs", False), (3,), (64,), a, c)  # the CPU default: scalar
    np.testing.assert_array_equal(c, _owners(n, 3 * 64, False))


# ---- non-elementwise bodies: unrolled by 4 on the GPU (codegen/llvm/gridstride_unroll.py) ------


def _loop(name: str) -> ir.GridStride:
    k = build_ir(getattr(K, name))
    return next(s for s in ir.walk_stmts(k.body) if isinstance(s, ir.GridStride))


def test_which_bodies_are_unrolled() -> None:
    from anodize.codegen.llvm.gridstride_unroll import unrollable

    assert unrollable(_loop("reduction_gs")) and unrollable(_loop("atomic_gs")) and unrollable(_loop("neighbour_gs"))
    assert not unrollable(_loop("early_break_gs"))  # `break`: the scalar loop only
    assert not unrollable(_loop("loop_in_body_gs"))  # a nested loop


def test_reduction_has_four_loads_in_flight() -> None:
    ck = compile_gpu(K.reduction_gs, ptxas=True)
    loads = ck.ptx.count("ld.global.nc")
    assert loads == 5, ck.ptx  # the unrolled body's 4, the remainder loop's 1
    filecheck(ck.ptx, "CHECK: ld.global.nc\nCHECK: ld.global.nc\nCHECK: ld.global.nc\nCHECK: ld.global.nc\n", what="reduction.ptx")
    assert ck.resources.registers is not None and ck.resources.spill_stores == 0

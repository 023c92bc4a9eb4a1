"""Device-side launch checks: unused grid/block dimensions of contract-less kernels, and
bounds checks on every shared-memory access (dynamic arrays against the launch's size)."""

from __future__ import annotations

import textwrap

import cg_launch as L
import numpy as np
import pytest
from cg_helpers import ARCHS, filecheck, run_cpu

from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.kernel import Kernel

LAUNCH_KERNELS = sorted(n for n, v in vars(L).items() if isinstance(v, Kernel))

# ---- unused launch dimensions: the device check ------------------------------------------------


def test_index_1d_without_contract_reads_y_and_z_extents() -> None:
    ck = compile_gpu(L.copy_nc, ptxas=False)
    filecheck(
        ck.llvm_ir,
        textwrap.dedent(
            """
            CHECK-DAG: call i32 @"llvm.nvvm.read.ptx.sreg.nctaid.y"()
            CHECK-DAG: call i32 @"llvm.nvvm.read.ptx.sreg.nctaid.z"()
            CHECK-DAG: call i32 @"llvm.nvvm.read.ptx.sreg.ntid.y"()
            CHECK-DAG: call i32 @"llvm.nvvm.read.ptx.sreg.ntid.z"()
            CHECK: call void @"__az_fault"
            """
        ),
        what="copy_nc.ll",
    )
    filecheck(
        ck.ptx,
        textwrap.dedent(
            """
            CHECK: .entry copy_nc(
            CHECK-DAG: mov.u32 {{%r[0-9]+}}, %nctaid.y;
            CHECK-DAG: mov.u32 {{%r[0-9]+}}, %nctaid.z;
            CHECK-DAG: mov.u32 {{%r[0-9]+}}, %ntid.y;
            CHECK-DAG: mov.u32 {{%r[0-9]+}}, %ntid.z;
            CHECK: call.uni __az_fault
            """
        ),
        what="copy_nc.ptx",
    )


def test_index_2d_without_contract_reads_z_extents() -> None:
    ck = compile_gpu(L.copy2d_nc, ptxas=False)
    filecheck(
        ck.ptx,
        textwrap.dedent(
            """
            CHECK: .entry copy2d_nc(
            CHECK-DAG: mov.u32 {{%r[0-9]+}}, %nctaid.z;
            CHECK-DAG: mov.u32 {{%r[0-9]+}}, %ntid.z;
            CHECK: call.uni __az_fault
            """
        ),
        what="copy2d_nc.ptx",
    )


def test_contracted_kernel_has_no_device_dimension_check() -> None:
    ck = compile_gpu(L.copy_contracted, ptxas=False)
    for reg in ("%nctaid.y", "%nctaid.z", "%ntid.y", "%ntid.z", "atom.global"):  # a fault path: an inline atom
        assert f"{reg}" not in ck.ptx.split(".entry copy_contracted")[1], reg


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", LAUNCH_KERNELS)
def test_ptxas_accepts_launch_kernels(name: str, arch: str, ptxas_ok: object) -> None:
    ptxas_ok(compile_gpu(getattr(L, name), arch, ptxas=False).ptx, arch)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("grid", "block", "rank", "dims"),
    [
        ((4, 2), (32,), 1, 2),  # grid y
        ((4, 1, 3), (32,), 1, 3),  # grid z
        ((4,), (32, 2), 1, 2),  # block y
        ((4,), (32, 1, 2), 1, 3),  # block z
        ((4,), (32,), 2, 2),  # the launch's rank itself
    ],
)
def test_index_1d_fails_closed_on_unused_dimensions(grid: tuple[int, ...], block: tuple[int, ...], rank: int, dims: int) -> None:
    ck = compile_cpu(L.copy_nc)
    a = np.arange(128, dtype=np.float32) + 1
    c = np.zeros(128, np.float32)
    f = run_cpu(ck, grid, block, a, c, rank=rank)
    threads = int(np.prod(grid)) * int(np.prod(block))
    assert (f.count, f.site, f.index, f.length) == (threads, 0, dims, 1)
    assert not c.any()  # no witness admitted a write


def test_index_1d_runs_on_a_plain_1d_launch() -> None:
    ck = compile_cpu(L.copy_nc)
    a = np.arange(128, dtype=np.float32) + 1
    c = np.zeros(128, np.float32)
    assert run_cpu(ck, (4,), (32,), a, c, rank=1).count == 0
    np.testing.assert_array_equal(c, a)


def test_index_2d_fails_closed_on_z() -> None:
    ck = compile_cpu(L.copy2d_nc)
    m = np.arange(16 * 16, dtype=np.float32).reshape(16, 16) + 1
    out = np.zeros((16, 16), np.float32)
    f = run_cpu(ck, (2, 2, 4), (8, 8), m, out, rank=2)
    assert (f.count, f.index, f.length) == (2 * 2 * 4 * 64, 3, 2)
    assert not out.any()
    f = run_cpu(ck, (2, 2), (8, 8, 2), m, out, rank=2)
    assert (f.count, f.index, f.length) == (2 * 2 * 128, 3, 2)
    assert not out.any()
    assert run_cpu(ck, (2, 2), (8, 8), m, out, rank=2).count == 0
    np.testing.assert_array_equal(out, m)


@pytest.mark.parametrize("vector", [False, True])
def test_grid_stride_without_contract_fails_closed(vector: bool) -> None:
    """The GPU's vectorised mapping too: its scalar tail must not start from a poisoned witness."""
    ck = compile_cpu(L.copy_gs_nc, vector_grid_stride=vector)
    a = np.arange(1000, dtype=np.float32) + 1
    c = np.zeros(1000, np.float32)
    f = run_cpu(ck, (2, 2), (32,), a, c, rank=1)
    assert f.count == 2 * 2 * 32 and f.index == 2
    assert not c.any()
    assert run_cpu(ck, (2,), (32,), a, c, rank=1).count == 0
    np.testing.assert_array_equal(c, a)


# ---- shared memory: every access bounds-checked --------------------------------------------------


def test_dynamic_shared_access_is_checked_against_dynamic_smem_size() -> None:
    ck = compile_gpu(L.dyn_copy, ptxas=False)
    assert ck.bounds_checks == 2  # the dynamic write and read (`x[i] if i.get() < len(x)` proves x[i])
    filecheck(
        ck.llvm_ir,
        textwrap.dedent(
            """
            CHECK: call i32 @"llvm.nvvm.read.ptx.sreg.dynamic_smem_size"()
            CHECK: udiv i64 {{.*}}, 4
            CHECK: call void @"__az_fault"
            """
        ),
        what="dyn_copy.ll",
    )
    filecheck(ck.ptx, "CHECK: mov.u32 {{%r[0-9]+}}, %dynamic_smem_size;\nCHECK: call.uni __az_fault\n", what="dyn_copy.ptx")


def test_dynamic_shared_too_small_faults_instead_of_corrupting() -> None:
    ck = compile_cpu(L.dyn_copy)
    x = np.arange(256, dtype=np.float32) + 1
    out = np.zeros(256, np.float32)
    f = run_cpu(ck, (4,), (64,), x, out, dynamic_shared=16)  # room for 4 of the 64 elements
    assert f.count == 4 * 60 * 2  # each thread past the 4th: its write and its read
    assert (f.site, f.index, f.length) == (0, f.index, 4) and 4 <= f.index < 64  # site 0: the write
    expect = np.where(np.arange(256) % 64 < 4, x, 0)  # failed reads give 0
    np.testing.assert_array_equal(out, expect)
    out[:] = 0
    assert run_cpu(ck, (4,), (64,), x, out, dynamic_shared=64 * 4).count == 0
    np.testing.assert_array_equal(out, x)


def test_no_dynamic_shared_at_all_faults() -> None:
    ck = compile_cpu(L.dyn_copy)
    x = np.arange(64, dtype=np.float32)
    out = np.ones(64, np.float32)
    f = run_cpu(ck, (1,), (64,), x, out)
    assert f.count == 128 and f.length == 0
    assert not out.any()


def test_static_shared_out_of_range_faults() -> None:
    ck = compile_cpu(L.static_oob)
    assert ck.bounds_checks == 2  # the shared write and read (the guard proves x[i])
    x = np.arange(64, dtype=np.float32) + 1
    out = np.zeros(64, np.float32)
    f = run_cpu(ck, (1,), (64,), x, out)
    assert f.count == 64 and f.length == 32 and 32 <= f.index < 64
    np.testing.assert_array_equal(out, np.where(np.arange(64) < 32, x, 0))


def test_proven_static_shared_access_has_no_check() -> None:
    ck = compile_gpu(L.static_proven, ptxas=False)
    assert ck.bounds_checks == 0
    assert "atom.global" not in ck.ptx.split(".entry static_proven")[1].split("}")[0]

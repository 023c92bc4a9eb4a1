"""One mapping per output: why two index spaces over one output race, shown by running the
GPU's vectorised grid-stride mapping on the CPU backend, and what the checker says about it.

The CPU backend compiles with `vector_grid_stride=True` to the same 16-byte-chunk mapping
as the GPU target (codegen/llvm/gridstride.py).  Its threads run one after another, so an
element's counter ends at the number of threads that took it: every counter at 1 means
the (thread, element) pairs partition the output."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import anodize as az
from anodize import DisjointSlice, i32, kernel, launch_contract, thread
from anodize.checker.api import check_source
from anodize.codegen.driver import compile_cpu

BLOCK = 64


@launch_contract(domain=1, block=64, requires=lambda cnt, own: len(cnt) == len(own))
@kernel
def count_owner(cnt: DisjointSlice[i32], own: DisjointSlice[i32]) -> None:
    for i in thread.grid_stride(cnt):
        cnt[i] = cnt[i] + 1
        with az.unsafe():
            own[i] = thread.block_idx_x() * 64 + thread.tid_x()


def _aligned(n: int) -> np.ndarray:
    raw = np.zeros(n * 4 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64
    out = raw[start : start + n * 4].view(np.int32)
    assert out.ctypes.data % 16 == 0
    return out


def _run(ck: Any, grid: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    cnt, own = _aligned(n), _aligned(n)
    own[:] = -1
    rec = np.zeros(4, np.uint64)
    flat = [cnt.ctypes.data, n, own.ctypes.data, n]
    ck.cpu_entry((grid, 1, 1), (BLOCK, 1, 1), flat, rec.ctypes.data, 1, 0)
    assert int(rec.view(np.uint32)[0]) == 0, "no fault"
    return cnt.copy(), own.copy()


def _vector_owners(n: int, threads: int) -> np.ndarray:
    """codegen/llvm/gridstride.py's documented vector mapping: chunks of 4, then a scalar tail."""
    idx = np.arange(n)
    tail = n & ~3
    return np.where(idx < tail, (idx // 4) % threads, (idx - tail) % threads)


@pytest.fixture(scope="module")
def kernels() -> dict[bool, Any]:
    return {v: compile_cpu(count_owner, vector_grid_stride=v) for v in (True, False)}


def test_the_cpu_backend_runs_the_vector_mapping(kernels: dict[bool, Any]) -> None:
    text = kernels[True].llvm_ir
    assert "gsv.body" in text and "load <4 x i32>" in text and "store <4 x i32>" in text
    assert "gsv.body" not in kernels[False].llvm_ir


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 255, 256, 257, 1003, 4096 + 2, 20000])
@pytest.mark.parametrize("grid", [1, 3, 40])
def test_vector_mapping_is_a_partition(kernels: dict[bool, Any], n: int, grid: int) -> None:
    cnt, own = _run(kernels[True], grid, n)
    np.testing.assert_array_equal(cnt, np.ones(n, np.int32))  # each element taken exactly once
    np.testing.assert_array_equal(own, _vector_owners(n, grid * BLOCK))


@pytest.mark.parametrize("n", [8, 1003, 20000])
def test_the_two_mappings_give_elements_two_owners(kernels: dict[bool, Any], n: int) -> None:
    """Each mapping alone is a partition, but they disagree: a kernel that wrote one output in a
    vectorised loop and read or wrote it again in a scalar loop (or at `index_1d`) would touch
    an element from two threads with no barrier between them."""
    _, vec = _run(kernels[True], 2, n)
    cnt, sca = _run(kernels[False], 2, n)
    np.testing.assert_array_equal(cnt, np.ones(n, np.int32))
    np.testing.assert_array_equal(sca, np.arange(n) % (2 * BLOCK))
    differ = np.flatnonzero(vec != sca)
    assert differ.size > 0 and differ[0] == 1  # element 1: thread 0 (vector chunk) and thread 1 (scalar)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [7, 1003, 4098, 1 << 20])
def test_the_gpu_mapping_is_the_same_partition(n: int) -> None:
    """The GPU's threads run at once: a counter at 2 would show an element with two owners."""
    dev = az.device(0)
    cnt = dev.zeros(n, az.i32)
    own = dev.zeros(n, az.i32)
    count_owner[az.LaunchConfig(3, BLOCK)](cnt, own)
    dev.synchronize()
    np.testing.assert_array_equal(cnt.to_host(), np.ones(n, np.int32))
    np.testing.assert_array_equal(own.to_host(), _vector_owners(n, 3 * BLOCK))


HEADER = (
    "import anodize as az\n"
    "from anodize import kernel, func, launch_contract, thread, Slice, DisjointSlice, Index1D, f32, i32\n"
)


def _diags(body: str) -> list[Any]:
    return check_source(HEADER + body, "<mapping>")


def test_the_diagnostic_points_at_the_second_mapping_and_labels_the_first() -> None:
    (d,) = _diags(
        "@launch_contract(domain=1, block=256, requires=lambda a, c: len(a) == len(c))\n"
        "@kernel\n"
        "def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:\n"
        "    for i in thread.grid_stride(c):\n"
        "        c[i] = a[i]\n"
        "    w = thread.index_1d()\n"
        "    if w in c:\n"
        "        c[w] += 1.0\n"
    )
    assert d.code == "az-disjoint-index"
    assert (d.span.line, d.span.col) == (10, 8)
    assert "two index spaces" in d.message and "`thread.index_1d()`" in d.message
    (first,) = d.secondary
    assert first.span.line == 7 and "first accessed through the grid-stride loop" in first.text
    assert d.help is not None and "one grid-stride loop" in d.help and "separate kernels" in d.help


def test_a_helper_access_is_reported_at_the_call() -> None:
    (d,) = _diags(
        "@az.func\n"
        "def put(c: DisjointSlice[f32], i: Index1D) -> None:\n"
        "    c[i] = 1.0\n"
        "@launch_contract(domain=1, block=256)\n"
        "@kernel\n"
        "def k(c: DisjointSlice[f32]) -> None:\n"
        "    w = thread.index_1d()\n"
        "    if w in c:\n"
        "        put(c, w)\n"
        "    for i in thread.grid_stride(c):\n"
        "        put(c, i)\n"
    )
    assert d.span.line == 13 and "(inside `put`)" in d.message
    assert d.secondary[0].span.line == 11


def test_one_loop_per_output_is_accepted() -> None:
    assert not _diags(
        "@launch_contract(domain=1, block=256, requires=lambda c, d: len(c) == len(d))\n"
        "@kernel\n"
        "def k(c: DisjointSlice[f32], d: DisjointSlice[f32], n: i32) -> None:\n"
        "    for r in range(n):\n"
        "        for i in thread.grid_stride(c):\n"
        "            c[i] = c[i] + 1.0\n"
        "            d[i] = c[i]\n"
    )

"""Whole-tile moves of a per-thread tile (`t.load(x, v, fill)`, `t.store(out, v)`): the same
elements as the element-wise loop (`v[r, s] = x[t.at(r, s)]`), `fill` outside the slice,
nothing written outside the output, for every element type, group and alignment (rows whose
address is not 16-byte aligned, row views that start mid-allocation) on the CPU backend and
the debug device; the GPU build moves aligned rows with 16-byte vector accesses; a poisoned
tile moves nothing.  GPU twins run the same on the device."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import pytest

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f16, f32, f64, i32, kernel, thread
from anodize.codegen.driver import compile_gpu
from anodize.codegen.llvm.thread_tiles_io import run_width
from anodize.codegen.toolchain import find_ptxas
from anodize.language.types import BY_NAME

T = TypeVar("T", f32, f64, f16, i32)


@kernel
def moved(x: Slice2D[T], out: DisjointSlice2D[T], tr: az.Constant[int], tc: az.Constant[int],
          gr: az.Constant[int], gc: az.Constant[int]) -> None:
    t = thread.tile_2d(tr, tc, gr, gc)
    v = az.local.array((tr, tc), T)  # type: ignore[misc]
    t.load(x, v, 7)
    for r in range(tr):
        for s in range(tc):
            v[r, s] = v[r, s] + 1
    t.store(out, v)


@kernel
def one_row(x: Slice2D[f32], out: DisjointSlice2D[f32], tc: az.Constant[int]) -> None:
    t = thread.tile_2d(1, tc, 1, 4)
    v = az.local.array(tc, f32)  # a one-row tile's array may be 1-D
    t.load(x, v, -1.0)
    t.store(out, v)


DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32}
# (element type, block, tile shape): runs of 4 (f32), 2 (f64), 8 (f16) and 1 (GC = 3)
CASES = [
    ("f32", (8, 2), (2, 8, 1, 4)),
    ("f64", (4, 4), (2, 4, 2, 2)),
    ("f16", (4, 2), (1, 16, 1, 8)),
    ("i32", (4, 2), (3, 6, 1, 3)),
    ("f32", (2, 3), (4, 4, 4, 4)),
]


def _expected(x: np.ndarray, rows: int, cols: int, covered: tuple[int, int]) -> np.ndarray:
    """out after `moved`: x + 1 inside x, fill + 1 = 8 inside the launch's tiles but outside x,
    the initial -5 past the tiles."""
    want = np.full((rows, cols), -5, x.dtype)
    want[: covered[0], : covered[1]] = 8
    want[: x.shape[0], : x.shape[1]] = (x + 1)[: min(rows, x.shape[0]), : min(cols, x.shape[1])]
    return want


def _run(dev: az.Device, name: str, block: tuple[int, int], shape: tuple[int, int, int, int], rows: int, cols: int,
         x_rows: int, x_cols: int, offset_rows: int) -> None:
    tr, tc, _, _ = shape
    dt = DTYPES[name]
    full = (np.arange((x_rows + offset_rows) * x_cols) % 61).astype(dt).reshape(x_rows + offset_rows, x_cols)
    x_dev = dev.to_device(full)[offset_rows:]  # a row view: its rows start mid-allocation
    x = full[offset_rows:]
    out = dev.to_device(np.full((rows, cols), -5, dt))
    grid = (max(1, cols // (block[0] * tc)), -(-rows // (block[1] * tr)))  # the x extent may leave columns past the tiles
    moved.unsafe_launch(az.LaunchConfig(grid, block), x_dev, out, *shape)
    covered = (min(rows, grid[1] * block[1] * tr), min(cols, grid[0] * block[0] * tc))
    want = _expected(x, rows, cols, covered)
    want[covered[0]:, :] = -5
    want[:, covered[1]:] = -5
    np.testing.assert_array_equal(out.to_host(), want)


@pytest.mark.parametrize("dev_name", ["cpu", "debug"])
@pytest.mark.parametrize(("name", "block", "shape"), CASES, ids=[f"{n}-{b}-{s}" for n, b, s in CASES])
def test_moves_match_the_element_loop(dev_name: str, name: str, block: tuple[int, int], shape: tuple[int, int, int, int]) -> None:
    if dev_name == "debug" and name == "f16":
        pytest.skip("the debug device has no f16 slices")
    dev = az.device(dev_name)
    _run(dev, name, block, shape, 21, 70, 21, 70, 0)  # 70 columns: only every other f32 row is 16-byte aligned
    _run(dev, name, block, shape, 19, 64, 12, 41, 1)  # x smaller than out (fill), a row view


@pytest.mark.parametrize("dev_name", ["cpu", "debug"])
def test_one_row_tile_with_a_1d_array(dev_name: str) -> None:
    dev = az.device(dev_name)
    x = np.arange(3 * 45, dtype=np.float32).reshape(3, 45)
    out = dev.zeros((3, 45), az.f32)
    one_row.unsafe_launch(az.LaunchConfig((1, 3), (4, 1)), dev.to_device(x), out, 12)
    np.testing.assert_array_equal(out.to_host(), x)


@pytest.mark.parametrize("dev_name", ["cpu", "debug"])
def test_a_poisoned_tile_moves_nothing(dev_name: str) -> None:
    dev = az.device(dev_name)
    x = np.ones((4, 8), np.float32)
    out = dev.zeros((4, 8), az.f32)
    moved.unsafe_launch(az.LaunchConfig((1, 1, 2), (2, 2, 1)), dev.to_device(x), out, 1, 4, 1, 4)  # not 2-D: poisoned
    with pytest.raises(az.KernelFault):
        out.to_host()
    np.testing.assert_array_equal(out.to_host(), 0)


def test_run_width() -> None:
    f32_, f64_, f16_, i8_ = (BY_NAME[n] for n in ("f32", "f64", "f16", "i8"))
    assert run_width((1, 8, 1, 4), f32_) == 4 and run_width((1, 8, 1, 8), f32_) == 4
    assert run_width((1, 8, 1, 2), f32_) == 1 and run_width((1, 4, 1, 2), f64_) == 2
    assert run_width((1, 16, 1, 8), f16_) == 8 and run_width((1, 16, 1, 16), i8_) == 16


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_gpu_build_moves_rows_16_bytes_at_a_time() -> None:
    """f32, groups of 4: 4 runs a tile = 4 `ld.global.nc.v4` and 4 `st.global.v4` (each row's
    element-by-element path beside them), no stack frame; groups of 3: no vector access."""
    ck = compile_gpu(moved.specialize(T="f32", tr=2, tc=8, gr=1, gc=4), "sm_90", ptxas=True)
    assert ck.ptx.count("ld.global.nc.v4.b32") == 4 and ck.ptx.count("st.global.v4.b32") == 4
    assert ck.resources.stack_frame == 0 and ck.resources.spill_stores == 0
    ck = compile_gpu(moved.specialize(T="f64", tr=2, tc=4, gr=2, gc=2), "sm_90", ptxas=True)
    assert ck.ptx.count("ld.global.nc.v2.b64") == 4 and ck.ptx.count("st.global.v2.b64") == 4
    ck = compile_gpu(moved.specialize(T="i32", tr=3, tc=6, gr=1, gc=3), "sm_90", ptxas=True)
    assert ".v4" not in ck.ptx and ".v2" not in ck.ptx


# ---- GPU twins ----------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "block", "shape"), CASES, ids=[f"{n}-{b}-{s}" for n, b, s in CASES])
def test_gpu_moves_match_the_element_loop(name: str, block: tuple[int, int], shape: tuple[int, int, int, int]) -> None:
    dev = az.device(0)
    _run(dev, name, block, shape, 21, 70, 21, 70, 0)
    _run(dev, name, block, shape, 19, 64, 12, 41, 1)


@pytest.mark.gpu
def test_gpu_poisoned_tile_and_one_row() -> None:
    dev = az.device(0)
    x = np.arange(3 * 45, dtype=np.float32).reshape(3, 45)
    out = dev.zeros((3, 45), az.f32)
    one_row.unsafe_launch(az.LaunchConfig((1, 3), (4, 1)), dev.to_device(x), out, 12)
    np.testing.assert_array_equal(out.to_host(), x)
    out2 = dev.zeros((4, 8), az.f32)
    moved.unsafe_launch(az.LaunchConfig((1, 1, 2), (2, 2, 1)), dev.to_device(np.ones((4, 8), np.float32)), out2, 1, 4, 1, 4)
    with pytest.raises(az.KernelFault):
        out2.to_host()
    np.testing.assert_array_equal(out2.to_host(), 0)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_a_long_row_stays_in_registers() -> None:
    """128 columns a thread, loaded and stored: each column is computed where it is used, so
    nothing but the values is held across a row's branch (computed once before it, the
    addresses made ptxas spill 2 KB)."""
    ck = compile_gpu(one_row.specialize(tc=128), "sm_90", ptxas=True)
    assert ck.resources.stack_frame == 0 and ck.resources.spill_stores == 0
    assert ck.resources.registers <= 168
    assert "ld.global.nc.v4" in ck.ptx and "st.global.v4" in ck.ptx

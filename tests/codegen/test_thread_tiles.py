"""Per-thread tiles (`thread.tile_2d`, `t.at(r, s)`): the tiles of a launch partition the
output for every shape, group and block (CPU backend and debug device), a launch that is not
2-D and an index outside the tile fail closed, and the examples built on them assemble for
sm_90 with no stack frame and no spills; GPU twins run the same on the device."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize import DisjointSlice2D, i32, kernel, thread
from anodize.codegen.driver import compile_gpu
from anodize.codegen.toolchain import find_ptxas

ROOT = Path(__file__).resolve().parents[2]


@kernel
def owners(own: DisjointSlice2D[i32], rs: DisjointSlice2D[i32], tr: az.Constant[int], tc: az.Constant[int],
           gr: az.Constant[int], gc: az.Constant[int]) -> None:
    t = thread.tile_2d(tr, tc, gr, gc)
    for r in range(tr):
        for s in range(tc):
            ij = t.at(r, s)
            if ij in own:
                own[ij] += 1
            if ij in rs:
                rs[ij] = i32(r * 1000 + s)


def _expected_rs(rows: int, cols: int, block: tuple[int, int], shape: tuple[int, int, int, int]) -> np.ndarray:
    """The (r, s) owning each element, from the documented formula, inverted by brute force."""
    tr, tc, gr, gc = shape
    bx, by = block
    out = np.full((rows, cols), -1, np.int64)
    for i in range(rows):
        ii = i % (by * tr)
        r = (ii // (by * gr)) * gr + ii % gr
        for j in range(cols):
            jj = j % (bx * tc)
            s = (jj // (bx * gc)) * gc + jj % gc
            out[i, j] = r * 1000 + s
    return out


CASES = [
    ((4, 2), (8, 8, 4, 4)),
    ((3, 5), (2, 3, 1, 1)),
    ((8, 1), (1, 4, 1, 4)),
    ((2, 2), (6, 4, 3, 2)),
]


@pytest.mark.parametrize("dev_name", ["cpu", "debug"])
@pytest.mark.parametrize(("block", "shape"), CASES, ids=[f"{b}-{s}" for b, s in CASES])
def test_tiles_partition_the_output(dev_name: str, block: tuple[int, int], shape: tuple[int, int, int, int]) -> None:
    dev = az.device(dev_name)
    rows, cols = 23, 31
    tr, tc, _, _ = shape
    grid = (-(-cols // (block[0] * tc)), -(-rows // (block[1] * tr)))
    own = dev.zeros((rows, cols), az.i32)
    rs = dev.zeros((rows, cols), az.i32)
    owners.unsafe_launch(az.LaunchConfig(grid, block), own, rs, *shape)
    assert np.array_equal(own.to_host(), np.ones((rows, cols), np.int32))  # exactly one owner each
    assert np.array_equal(rs.to_host(), _expected_rs(rows, cols, block, shape))


@pytest.mark.parametrize("dev_name", ["cpu", "debug"])
def test_a_launch_that_is_not_2d_fails_closed(dev_name: str) -> None:
    dev = az.device(dev_name)
    own = dev.zeros((4, 4), az.i32)
    rs = dev.zeros((4, 4), az.i32)
    owners.unsafe_launch(az.LaunchConfig((1, 1, 2), (2, 2, 1)), own, rs, 2, 2, 1, 1)
    with pytest.raises(az.KernelFault):
        own.to_host()
    assert not own.to_host().any() and not rs.to_host().any()  # the poisoned tile wrote nothing


def _example(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"_tiles_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_examples_keep_their_tiles_in_registers() -> None:
    """`ptxas -arch=sm_90 -v`: the register-blocked sgemm and the one-block-per-row softmax
    have no stack frame, no spills and no local memory.  sgemm: two blocks an SM
    (`min_blocks_per_sm=2`: `.minnctapersm 2`, at most 128 registers), 512 FMAs per 8-wide
    step (two steps a round), its fragments read from shared memory 16 bytes at a time, and
    no bounds check left anywhere (the guards prove the global loads, the layout the shared
    reads).  softmax: 8 loads, two block reductions (4 barriers), no bounds check."""
    sg = compile_gpu(_example("sgemm").sgemm, "sm_90", ptxas=True)
    assert sg.resources.stack_frame == 0 and sg.resources.spill_stores == 0
    assert sg.resources.registers <= 128 and ".minnctapersm 2" in sg.ptx
    assert ".local" not in sg.ptx and "__az_fault," not in sg.ptx
    assert sg.ptx.count("fma.rn.f32") == 1024
    assert sg.ptx.count("ld.shared.v4") == 64 and sg.ptx.count("bar.sync") == 3  # the first tile, then one a step
    # sgemm_slots.py: the same kernel staged by multi-slot ownership (`sa[w + q * 256]`): the writes
    # proven in range (no check), the reads 16 bytes at a time, the same FMAs and barriers
    ss = compile_gpu(_example("sgemm_slots").sgemm, "sm_90", ptxas=True)
    assert ss.resources.registers <= 128 and ".minnctapersm 2" in ss.ptx
    assert ".local" not in ss.ptx and "__az_fault," not in ss.ptx and ss.bounds_checks < sg.bounds_checks  # the writes: proven
    assert ss.ptx.count("fma.rn.f32") == 1024 and ss.ptx.count("st.shared") == sg.ptx.count("st.shared") == 24
    assert ss.ptx.count("ld.shared.v4") == 64 and ss.ptx.count("ld.shared") == 64 and ss.ptx.count("bar.sync") == 3
    sm = compile_gpu(_example("softmax").softmax.specialize(per=8), "sm_90", ptxas=True)
    assert sm.resources.stack_frame == 0 and sm.resources.spill_stores == 0
    assert ".local" not in sm.ptx and "__az_fault," not in sm.ptx
    assert sm.ptx.count("bar.sync") == 2  # one a block reduction
    assert sm.ptx.count("ld.global.nc.v4.b32") == 2 and sm.ptx.count("st.global.v4.b32") == 2  # the row, 16 bytes at a time


# ---- GPU twins ----------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(("block", "shape"), CASES, ids=[f"{b}-{s}" for b, s in CASES])
def test_gpu_tiles_partition_the_output(block: tuple[int, int], shape: tuple[int, int, int, int]) -> None:
    dev = az.device(0)
    rows, cols = 23, 31
    tr, tc, _, _ = shape
    grid = (-(-cols // (block[0] * tc)), -(-rows // (block[1] * tr)))
    own = dev.zeros((rows, cols), az.i32)
    rs = dev.zeros((rows, cols), az.i32)
    owners.unsafe_launch(az.LaunchConfig(grid, block), own, rs, *shape)
    assert np.array_equal(own.to_host(), np.ones((rows, cols), np.int32))
    assert np.array_equal(rs.to_host(), _expected_rs(rows, cols, block, shape))


@pytest.mark.gpu
def test_gpu_examples() -> None:
    _example("sgemm").main(m=300, k=200, n=260)
    _example("sgemm_slots").main(m=300, k=200, n=260)
    _example("softmax").main(rows=64, cols=5000)

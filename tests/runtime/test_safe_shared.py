"""Safe shared memory at run time: a shared array smaller than the block faults (never
corrupts), `index_in_block_2d` fails closed on a block with z > 1, block-shared atomics
on every backend (the CPU backend and the debug device here; the GPU twin is marked)."""

from __future__ import annotations

import numpy as np
import pytest

import anodize as az
import rt_safe_shared_kernels as K

DEVICES = ["cpu", "debug", pytest.param("cuda:0", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("name", DEVICES)
def test_too_small_array_faults(name: str) -> None:
    dev = az.device(name)
    c = dev.zeros(64, az.f32)
    with pytest.raises(az.KernelFault) as ei:
        K.too_small[az.LaunchConfig(grid=1, block=64)](c)
        c.to_host()
    text = str(ei.value)
    assert "write" in text and "length 32" in text, text


@pytest.mark.parametrize("name", DEVICES)
def test_index_in_block_2d_needs_block_z_1(name: str) -> None:
    dev = az.device(name)
    c = dev.zeros((2, 4, 4), az.f32)
    with pytest.raises(az.KernelFault) as ei:
        K.tile_3d[az.LaunchConfig.for_shape((2, 4, 4), block=(4, 4, 2))](c)
        c.to_host()
    assert "index_in_block_2d" in str(ei.value)
    ok = dev.zeros((1, 4, 4), az.f32)
    K.tile_3d[az.LaunchConfig.for_shape((1, 4, 4), block=(4, 4, 1))](ok)
    want = np.array([[r * 32 + c for c in range(4)] for r in range(4)], np.float32)
    np.testing.assert_array_equal(ok.to_host()[0], want)


@pytest.mark.parametrize("name", DEVICES)
def test_linear_index_in_a_2d_block(name: str) -> None:
    dev = az.device(name)
    c = dev.zeros((4, 8), az.i32)
    K.linear_2d[az.LaunchConfig.for_shape((4, 8), block=(8, 4))](c)
    want = np.array([[31 - (col + 8 * r) for col in range(8)] for r in range(4)], np.int32)
    np.testing.assert_array_equal(c.to_host(), want)


@pytest.mark.parametrize("name", DEVICES)
def test_shared_atomics(name: str) -> None:
    dev = az.device(name)
    x = np.random.default_rng(5).integers(-1000, 1000, 3000).astype(np.int32)
    out = dev.to_device(np.array([0, -(2**31), 2**31 - 1, 0], np.int32))
    fout = dev.zeros(4, az.f64)
    K.shared_atomics[az.LaunchConfig(grid=5, block=128)](dev.to_device(x), out, fout)
    o = out.to_host()
    assert o[0] == x.sum() and o[1] == x.max() and o[2] == x.min()
    assert o[3] == np.bitwise_or.reduce(x)
    f = fout.to_host()
    assert f[0] == float(x[x % 2 == 0].sum()) and f[2] == float(x[x % 2 == 1].sum())
    assert f[1] == 0.0 and f[3] == 0.0


def test_witness_slots_inside_the_contracts_block_need_no_check() -> None:
    """`tile[w]` and `tile[w.col, w.row]` of a (32, 33) tile under `block=(32, 32)` are proven in
    range (no check); the 32-slot array under a block of 64 keeps its checks (and faults)."""
    import importlib.util
    from pathlib import Path

    from anodize.codegen.driver import compile_gpu

    path = Path(__file__).resolve().parents[2] / "examples" / "transpose.py"
    spec = importlib.util.spec_from_file_location("_t_transpose", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert compile_gpu(mod.transpose, ptxas=False).bounds_checks == 1  # only `m[r, c]` (an `if`-expression guard)
    assert compile_gpu(K.too_small, ptxas=False).bounds_checks == 2  # the write `s[w]` and the read (64 > 32)

"""`az.grid.sync()` (issue 27): the GPU lowering (cooperative groups' scheme, assembled by
ptxas), the CPU backend and the debug device running every block of the grid at once, the
runtime's cooperative launch on the fake driver (refused with the numbers when the grid
cannot be resident), and a real cooperative launch on a GPU (`-m gpu`)."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_cpu, compile_gpu

_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grid_sync.py"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("grid_sync_example", _EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_ptx_is_a_grid_barrier(ptxas_ok: Callable[[str, str], None]) -> None:
    ck = compile_gpu(_example().normalize, ptxas=False)
    ptx = ck.ptx
    assert re.search(r"\.global .*\.u32 __az_grid_barrier;", ptx)
    assert "atom.release.gpu.global.add.u32" in ptx
    assert "ld.acquire.gpu.global.u32" in ptx
    assert ptx.count("membar.gl") >= 2  # fence before arriving and on leaving, as cooperative groups
    # a block barrier on both sides of the grid-wide one (and one inside block.reduce)
    assert ptx.count("bar.sync") >= 3
    ptxas_ok(ptx, "sm_90")


def test_cpu_runs_every_block_at_once() -> None:
    mod = _example()
    ck = compile_cpu(mod.normalize)
    assert ck.cpu_entry is not None
    n = 3000
    x = np.random.default_rng(1).random(n, dtype=np.float32) + np.float32(0.5)
    dev = az.device("cpu")
    total, out = dev.zeros(1, az.f32), dev.zeros(n, az.f32)
    mod.normalize[az.LaunchConfig(grid=6, block=mod.BLOCK)](dev.to_device(x), total, out)
    np.testing.assert_allclose(out.to_host(), x / x.astype(np.float64).sum(), rtol=1e-4)


@pytest.mark.parametrize("device", ["cpu", "debug"])
def test_example_on_each_host_device(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_DEVICE", device)
    assert abs(_example().main(n=1500) - 1.0) < 1e-3


def test_cooperative_launch_on_the_fake_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    import fakecuda

    dev, state = fakecuda.install(monkeypatch)
    mod = _example()
    n = 4000
    x = np.random.default_rng(2).random(n, dtype=np.float32) + np.float32(0.5)
    total, out = dev.zeros(1, az.f32), dev.zeros(n, az.f32)
    mod.normalize[az.LaunchConfig(grid=16, block=mod.BLOCK)](dev.to_device(x), total, out)  # 8 SMs x 2 = 16: fits
    assert state.cooperative == 1 and state.occupancy_asks == [(mod.BLOCK, 0)]
    np.testing.assert_allclose(out.to_host(), x / x.astype(np.float64).sum(), rtol=1e-4)
    with pytest.raises(az.LaunchError) as e:
        mod.normalize[az.LaunchConfig(grid=17, block=mod.BLOCK)](dev.to_device(x), dev.zeros(1, az.f32), dev.zeros(n, az.f32))
    msg = str(e.value)
    assert "17 blocks" in msg and "8 SMs x 2 blocks" in msg and "= 16 blocks" in msg, msg


@az.launch_contract(domain=1, block=64)
@az.kernel
def inc(a: az.DisjointSlice[az.f32]) -> None:
    i = az.thread.index_1d()
    if i in a:
        a[i] = a[i] + 1.0


@az.launch_contract(domain=1, block=64, cooperative=True, requires=lambda x, out: len(out) == len(x))
@az.kernel
def rotate(x: az.Slice[az.f32], out: az.DisjointSlice[az.f32]) -> None:
    """A grid barrier is a block barrier too: the shared-memory phase discipline counts it."""
    i = az.thread.index_1d()
    w = az.thread.index_in_block()
    buf = az.shared.array(64, az.f32)
    buf[w] = x[i] if i in x else az.f32(0.0)
    az.grid.sync()
    if i in out:
        out[i] = buf[(w.get() + 1) % 64]


@pytest.mark.parametrize("device", ["cpu", "debug"])
def test_grid_barrier_separates_shared_memory_phases(device: str) -> None:
    dev = az.device(device)
    n = 256
    xh = np.arange(n, dtype=np.float32)
    out = dev.zeros(n, az.f32)
    rotate[az.LaunchConfig(grid=4, block=64)](dev.to_device(xh), out)  # the debug device's race detector: no race
    np.testing.assert_array_equal(out.to_host(), xh.reshape(4, 64)[:, np.r_[1:64, 0]].reshape(-1))


def test_plain_kernel_launch_is_not_cooperative(monkeypatch: pytest.MonkeyPatch) -> None:
    import fakecuda

    dev, state = fakecuda.install(monkeypatch)
    a = dev.zeros(1000, az.f32)
    inc[az.LaunchConfig(grid=100, block=64)](a)  # 100 blocks > 16 resident: fine when not cooperative
    assert state.cooperative == 0 and state.occupancy_asks == []
    assert float(a.to_host().sum()) == 1000.0


@pytest.mark.gpu
def test_cooperative_launch_on_a_gpu() -> None:
    dev = az.device()
    if dev.kind != "cuda":
        pytest.skip("no CUDA GPU")
    mod = _example()
    assert abs(mod.main(n=1 << 22) - 1.0) < 1e-3  # one block per SM: resident, cooperative
    n = 1 << 16
    x = dev.to_device(np.ones(n, np.float32))
    with pytest.raises(az.LaunchError, match="cannot be resident"):
        mod.normalize[az.LaunchConfig(grid=200_000, block=mod.BLOCK)](x, dev.zeros(1, az.f32), dev.zeros(n, az.f32))

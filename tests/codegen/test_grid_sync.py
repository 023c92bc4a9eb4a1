"""`az.grid.sync()`: the GPU lowering (cooperative groups' scheme on a counter passed as a hidden
parameter, assembled by ptxas), the CPU backend and the debug device running every block of the
grid at once, the runtime's cooperative launch on the fake driver (refused with the numbers when
the grid cannot be resident; each launch its own zeroed counter, allocated, zeroed and freed on
its stream around it, so two launches in flight on two streams never share one), and real
cooperative launches on a GPU, two of them overlapping on two streams (`-m gpu`)."""

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
    assert ck.grid_counter  # the runtime appends each launch's own counter
    assert "__az_grid_barrier" not in ptx  # no counter of the module's own, shared by every launch
    params = re.findall(r"\.param (.*) (normalize_param_\d+)", ptx)
    assert len(params) == 3 * 2 + 2 + 1 and params[-1][0] == ".u64 .ptr .global .align 1"  # ..., fault, rank, counter
    reg = re.search(r"ld\.param\.b64\s+(%rd\d+), \[" + params[-1][1] + r"\];", ptx)
    assert reg is not None
    assert re.search(r"atom\.release\.gpu\.global\.add\.u32 %r\d+, \[" + re.escape(reg.group(1)) + r"\]", ptx)
    assert re.search(r"ld\.acquire\.gpu\.global\.u32 %r\d+, \[" + re.escape(reg.group(1)) + r"\]", ptx)
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
    [(stream, counter, value)] = state.counted_launches  # its own counter, zeroed before it ran
    assert stream == dev._stream_h and value == 0
    assert state.counter_log == [(call, counter, stream) for call in ("alloc", "memset32", "launch", "free")]
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


def _inputs(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(n, dtype=np.float32) + np.float32(0.5)


def _two_on_two_streams(dev: Any, n: int, grid: int, repeat: int = 1) -> None:
    """Launch `normalize` twice at once, on the two streams of a pool, `repeat` times; check both."""
    mod = _example()
    cfg = az.LaunchConfig(grid=grid, block=mod.BLOCK)
    xs = [_inputs(n, 10 + k) for k in range(2)]
    with az.StreamPool(dev, 2) as pool:
        for _ in range(repeat):
            xd = [dev.to_device(x) for x in xs]
            totals, outs = [dev.zeros(1, az.f32) for _ in xs], [dev.zeros(n, az.f32) for _ in xs]
            ops = [mod.normalize[cfg].op(xd[k], totals[k], outs[k]) for k in range(2)]
            az.gather(*ops).submit(pool).wait()
            for k, x in enumerate(xs):
                np.testing.assert_allclose(outs[k].to_host(), x / x.astype(np.float64).sum(), rtol=1e-4)


def test_two_concurrent_launches_get_two_counters_on_the_fake_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    import fakecuda

    dev, state = fakecuda.install(monkeypatch)
    _two_on_two_streams(dev, 3000, 16)
    launches = state.counted_launches
    assert len(launches) == 2
    assert len({s for s, _, _ in launches}) == 2  # two streams
    assert len({c for _, c, _ in launches}) == 2  # two counters
    assert all(v == 0 for _, _, v in launches)  # each zeroed (the fake's allocations start as 0xff)
    for stream, counter, _ in launches:  # allocated, zeroed, used and freed in that order, all on its stream
        assert [(call, s) for call, c, s in state.counter_log if c == counter] == [
            (call, stream) for call in ("alloc", "memset32", "launch", "free")]


@pytest.mark.parametrize("device", ["cpu", "debug"])
def test_two_concurrent_launches_on_host_lanes(device: str) -> None:
    """The CPU backend's and the debug device's grid barrier is the launch's own (host threads)."""
    _two_on_two_streams(az.device(device), 600, 3)


@pytest.mark.gpu
def test_two_cooperative_launches_overlap_on_two_streams() -> None:
    """Two launches in flight at once, each with half the resident blocks: each barrier is its own
    launch's (one shared counter would let a block of one pass on the other's arrivals, or hang)."""
    dev = az.device()
    if dev.kind != "cuda":
        pytest.skip("no CUDA GPU")
    sms = dev._cu.properties.multiprocessor_count
    _two_on_two_streams(dev, 1 << 22, max(1, sms // 2), repeat=20)


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

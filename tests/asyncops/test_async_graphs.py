"""Graph capture and replay (CPU backend: synchronous re-runs; GPU: CUDA graphs), and the GPU overlap proof."""

from __future__ import annotations

import time

import numpy as np
import pytest
from aop_kernels import affine, shift_read, spin, vecadd

import anodize as az
from anodize.runtime.device import Device

N = 777
CFG = az.LaunchConfig.for_num_elems(N)


def _chain(dev: Device, a: az.Buffer, t: az.Buffer, u: az.Buffer) -> az.Op:
    return affine[CFG].op(a, t, 2.0, 1.0).then(affine[CFG].op(t, u, 3.0, 0.0)).then(u.to_host_op())


def test_capture_and_replay_with_new_buffers(dev: Device) -> None:
    a = dev.to_device(np.arange(N, dtype=np.float32))
    t, u = dev.empty(N, az.f32), dev.empty(N, az.f32)
    graph = az.capture(_chain(dev, a, t, u))
    assert graph.args == (a, t, u) and graph.kernel_count == 2
    ref = (np.arange(N, dtype=np.float32) * 2 + 1) * 3
    first = graph.replay()
    np.testing.assert_array_equal(first, ref)
    a2 = dev.to_device(np.full(N, 10, np.float32))
    t2, u2 = dev.empty(N, az.f32), dev.empty(N, az.f32)
    second = graph.replay(a2, t2, u2)
    np.testing.assert_array_equal(second, np.full(N, 63, np.float32))
    np.testing.assert_array_equal(u2.to_host(), np.full(N, 63, np.float32))
    np.testing.assert_array_equal(first, ref)  # each replay's host result is its own array
    a.copy_from(np.ones(N, np.float32))  # the captured buffers again, with new contents
    np.testing.assert_array_equal(graph.replay(), np.full(N, 9, np.float32))
    np.testing.assert_array_equal(graph.replay(a2, t2, u2), np.full(N, 63, np.float32))  # cached set


def test_replay_checks_arguments(dev: Device) -> None:
    a = dev.to_device(np.ones(N, np.float32))
    b = dev.to_device(np.ones(N, np.float32))
    c = dev.empty(N, az.f32)
    graph = az.capture(vecadd[CFG].op(a, b, c))
    with pytest.raises(az.ArgumentError, match="3 arrays in order, got 1"):
        graph.replay(a)
    with pytest.raises(az.ArgumentError, match=r"argument 2 \(`c` of kernel `vecadd`\) must match"):
        graph.replay(a, b, dev.empty(N + 1, az.f32))
    with pytest.raises(az.ArgumentError, match="must match"):
        graph.replay(a, b, dev.empty(N, az.f64))
    with pytest.raises(az.AliasingError):  # new arrays are validated like a launch
        graph.replay(a, b, a)
    graph.replay(b, a, c)
    np.testing.assert_array_equal(c.to_host(), np.full(N, 2, np.float32))


def test_captured_op_belongs_to_the_graph(dev: Device) -> None:
    c = dev.empty(N, az.f32)
    op = c.to_host_op()
    az.capture(op)
    with pytest.raises(az.LaunchError, match="captured graph"):
        op.run()
    with pytest.raises(az.ArgumentError, match="anodize op"):
        az.capture(c)  # type: ignore[arg-type]


def test_replay_reports_faults(dev: Device) -> None:
    a = dev.to_device(np.ones(N, np.float32))
    c = dev.empty(N, az.f32)
    graph = az.capture(shift_read[az.LaunchConfig.for_num_elems(N, block=128)].op(a, c))
    for _ in range(2):
        with pytest.raises(az.KernelFault, match="shift_read"):
            graph.replay()
    dev.check()


def test_replay_without_waiting_returns_a_handle(dev: Device) -> None:
    a = dev.to_device(np.ones(N, np.float32))
    t, u = dev.empty(N, az.f32), dev.empty(N, az.f32)
    graph = az.capture(_chain(dev, a, t, u))
    handle = graph.replay(wait=False)
    assert isinstance(handle, az.Handle)
    np.testing.assert_array_equal(handle.wait(), np.full(N, 9, np.float32))


def test_gather_inside_a_graph(dev: Device) -> None:
    a = dev.to_device(np.arange(N, dtype=np.float32))
    t, u = dev.empty(N, az.f32), dev.empty(N, az.f32)
    graph = az.capture(
        az.gather(affine[CFG].op(a, t, 1.0, 1.0).then(t.to_host_op()), affine[CFG].op(a, u, -1.0, 0.0).then(u.to_host_op()))
    )
    x, y = graph.replay()
    np.testing.assert_array_equal(x, np.arange(N, dtype=np.float32) + 1)
    np.testing.assert_array_equal(y, -np.arange(N, dtype=np.float32))


@pytest.mark.gpu
def test_gpu_graph_needs_pinned_host_arrays(gpu: Device) -> None:
    b = gpu.empty(N, az.f32)
    with pytest.raises(az.ArgumentError, match="pinned"):
        az.capture(gpu.copy_op(b, np.ones(N, np.float32)))
    host = az.pinned_empty(gpu, N, az.f32)
    host[:] = 4
    graph = az.capture(gpu.copy_op(b, host))
    graph.replay()
    np.testing.assert_array_equal(b.to_host(), np.full(N, 4, np.float32))


# ---- overlap on the GPU --------------------------------------------------------------------------


def _time(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t0


@pytest.mark.gpu
def test_gpu_independent_kernels_overlap(gpu: Device) -> None:
    """Two kernels, each on half the SMs, run concurrently on a pool of 2: together < 0.8 * sum."""
    sms = int(gpu._cu.properties.multiprocessor_count)  # type: ignore[attr-defined]
    grid = max(1, sms // 2)
    n = grid * 256
    cfg = az.LaunchConfig(grid, 256)
    x = gpu.to_device(np.ones(n, np.float32))
    y = gpu.to_device(np.full(n, 2, np.float32))
    o1, o2 = gpu.empty(n, az.f32), gpu.empty(n, az.f32)
    iters = 200_000
    with az.StreamPool(gpu, 2) as pool:
        spin[cfg].op(x, o1, 10).run()  # compile, load, warm up
        # aim for ~50 ms per kernel
        t = _time(lambda: spin[cfg].op(x, o1, iters).run())
        iters = max(1000, int(iters * 0.05 / max(t, 1e-4)))
        alone1 = min(_time(lambda: spin[cfg].op(x, o1, iters).run()) for _ in range(3))
        alone2 = min(_time(lambda: spin[cfg].op(y, o2, iters).run()) for _ in range(3))
        together = min(
            _time(lambda: az.gather(spin[cfg].op(x, o1, iters), spin[cfg].op(y, o2, iters)).submit(pool).wait())
            for _ in range(3)
        )
    print(
        f"\noverlap: {sms} SMs, grid {grid}, iters {iters}: alone {alone1 * 1e3:.2f} + {alone2 * 1e3:.2f} ms, "
        f"together {together * 1e3:.2f} ms, speed-up {(alone1 + alone2) / together:.2f}x"
    )
    assert together < 0.8 * (alone1 + alone2)
    h1, h2 = o1.to_host(), o2.to_host()
    np.testing.assert_array_equal(h1, np.ones(n, np.float32))  # 1 is the loop's fixed point
    assert np.all(h2 == h2[0]) and 1.0 <= h2[0] <= 2.0

"""Several devices: `az.devices()`, CPU stand-in devices, `copy_to`, cross-device launches,
ops and graphs that span devices, and ownership across time between devices.

In CI a second CPU device (`az.device("cpu", 1)`) stands in for a second GPU: its own
Device object, fault arena and memory space.  Two fake GPUs (tests/fakecuda.py)
check the GPU code paths' events: a cross-device op records an event on one device's
stream and waits for it on the other's.  The `gpu` twins need two GPUs (`two_gpus`).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anodize as az
from anodize.runtime import inflight
from anodize.runtime.device import Device, cpu_device

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "asyncops"))

from rt_kernels import shift_read, vecadd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent.parent
CFG = az.LaunchConfig.for_num_elems(1000, block=256)
N = 1000


def _gpu_count() -> int:
    try:
        from anodize.runtime import gpu_count

        return gpu_count()
    except Exception:  # a broken install must not break collection
        return 0


two_gpus = pytest.mark.skipif(_gpu_count() < 2, reason="needs two CUDA GPUs (anodize.runtime.gpu_count() < 2)")


def _drain(dev: Device) -> Device:
    try:
        dev.check()
    except Exception:  # a fault left over from an earlier test
        pass
    return dev


@pytest.fixture
def two_cpus() -> Iterator[tuple[Device, Device]]:
    for k in (vecadd, shift_read):
        k.store.clear()
    d0, d1 = _drain(cpu_device(0)), _drain(cpu_device(1))
    yield d0, d1
    _drain(d0), _drain(d1)
    assert inflight.in_flight() == 0, "a test left work in flight"


def _host(n: int = N, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(n, dtype=np.float32)


# ---- devices --------------------------------------------------------------------------------


def test_devices_lists_gpus_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")  # hides every GPU
    assert az.devices() == []
    monkeypatch.delenv("ANODIZE_DEVICE")
    assert [d.kind for d in az.devices()] == ["cuda"] * _gpu_count()


def test_cpu_stand_in_devices_are_distinct() -> None:
    d0, d1 = az.device("cpu"), az.device("cpu", 1)
    assert d1 is az.device("cpu:1") is az.device("cpu", 1) and d0 is az.device("cpu", 0)
    assert d0 is not d1 and d0.faults is not d1.faults
    assert d1.index == 1 and d1.kind == "cpu"
    assert d1.describe().startswith("cpu:1 (") and d0.describe().startswith("cpu (")
    for bad in ((("cpu", -1)), ("cpu", True), ("vulkan", 1)):
        with pytest.raises(az.ArgumentError):
            az.device(*bad)


# ---- copy_to --------------------------------------------------------------------------------


def test_copy_to_another_cpu_device(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    h = _host()
    a = d0.to_device(h)
    b = a.copy_to(d1)
    assert b.device is d1 and b.shape == a.shape and b.dtype == a.dtype
    assert b.ptr != a.ptr
    a.fill(0.0)  # the copy is independent of its source
    np.testing.assert_array_equal(b.to_host(), h)
    assert a.copy_to("cpu:1").device is d1  # anything `az.device` takes
    same = b.copy_to(d1)  # the same device: a new buffer
    assert same.ptr != b.ptr
    np.testing.assert_array_equal(same.to_host(), h)


def test_copy_to_views_and_shapes(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    m = np.arange(24, dtype=np.int32).reshape(4, 6)
    a = d0.to_device(m)
    np.testing.assert_array_equal(a[1:3].copy_to(d1).to_host(), m[1:3])
    strided = a[:, ::2].copy_to(d1)  # a strided view arrives contiguous
    assert strided.is_contiguous and strided.device is d1
    np.testing.assert_array_equal(strided.to_host(), m[:, ::2])
    assert d0.zeros(0, az.f32).copy_to(d1).shape == (0,)


def test_copy_to_rejects_a_non_device() -> None:
    a = az.device("cpu").to_device(np.zeros(3, np.float32))
    with pytest.raises(az.ArgumentError, match="`copy_to` takes a device"):
        a.copy_to("tpu:0")


# ---- launches: one device per launch ----------------------------------------------------------


def test_kernel_on_each_cpu_device(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    ha, hb = _host(seed=1), _host(seed=2)
    for d in (d0, d1):
        a, b, c = d.to_device(ha), d.to_device(hb), d.empty(N, az.f32)
        vecadd[CFG](a, b, c)
        np.testing.assert_array_equal(c.to_host(), ha + hb)
    assert set(vecadd[CFG]._loaded) == {id(d0), id(d1)}  # loaded once per device


def test_cross_device_argument_is_an_argument_error(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    a, c = d0.to_device(_host()), d0.empty(N, az.f32)
    b = d1.to_device(_host())
    vecadd[CFG](a, a, c)  # warm the fast paths with a good launch first
    vecadd[CFG](a, a, c)
    for call in (lambda: vecadd[CFG](a, b, c), lambda: vecadd[CFG].op(a, b, c)):
        with pytest.raises(az.ArgumentError) as e:
            call()
        text = str(e.value)
        assert "parameter `b`" in text, text
        assert d1.describe() in text and d0.describe() in text, text
        assert "`b.copy_to(dev)`" in text, text
    with pytest.raises(az.ArgumentError, match="parameter `c`"):  # the first array decides the device
        vecadd[CFG](b, b, c)


def test_faults_stay_with_their_device(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    a, c = d1.to_device(_host()), d1.empty(N, az.f32)
    shift_read[az.LaunchConfig.for_num_elems(N, block=128)](a, c)  # the last thread reads past the end, on device 1
    d0.check()  # device 0's arena has nothing
    with pytest.raises(az.KernelFault):
        d1.check()


# ---- ops that span devices --------------------------------------------------------------------


def test_op_spanning_devices_runs_in_order(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    h = _host()
    x0, y0 = d0.to_device(h), d0.empty(N, az.f32)
    y1, z1 = d1.empty(N, az.f32), d1.empty(N, az.f32)
    step = vecadd[CFG].op(x0, x0, y0).then(d1.copy_op(y1, y0)).then(vecadd[CFG].op(y1, y1, z1))
    assert step.devices() == [d0, d1]
    out = step.then(z1.to_host_op()).run()
    np.testing.assert_array_equal(out, 4 * h)


def test_gather_across_devices_on_pools(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    ha, hb = _host(seed=3), _host(seed=4)
    a0, c0 = d0.to_device(ha), d0.empty(N, az.f32)
    a1, c1 = d1.to_device(hb), d1.empty(N, az.f32)
    both = az.gather(vecadd[CFG].op(a0, a0, c0).then(c0.to_host_op()), vecadd[CFG].op(a1, a1, c1).then(c1.to_host_op()))
    with az.StreamPool(d0, 2) as p0, az.StreamPool(d1, 2) as p1:
        r0, r1 = both.submit([p0, p1]).wait()
    np.testing.assert_array_equal(r0, 2 * ha)
    np.testing.assert_array_equal(r1, 2 * hb)


def test_graph_spanning_devices_replays(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    h = _host()
    x0, y0, y1 = d0.to_device(h), d0.empty(N, az.f32), d1.empty(N, az.f32)
    graph = az.capture(vecadd[CFG].op(x0, x0, y0).then(d1.copy_op(y1, y0)).then(y1.to_host_op()))
    np.testing.assert_array_equal(graph.replay(), 2 * h)
    x0.copy_from(h + 1)
    np.testing.assert_array_equal(graph.replay(), 2 * (h + 1))


def test_lazy_copy_between_kinds_is_refused(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    a, b = d0.zeros(4, az.f32), d1.zeros(4, az.f32)
    with pytest.raises(az.ArgumentError, match="neither dst"):
        az.device("cpu", 2).copy_op(a, b)


# ---- ownership across time between devices ----------------------------------------------------


def _held_write(d0: Device, pool: az.StreamPool, x0: az.Buffer, y0: az.Buffer) -> tuple[threading.Event, az.Handle]:
    from anodize.runtime.ops import HoldOp

    gate = threading.Event()
    return gate, HoldOp(d0, gate).then(vecadd[CFG].op(x0, x0, y0)).submit(pool)


def test_op_on_device_1_waits_for_a_write_on_device_0(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    h = _host()
    x0, y0 = d0.to_device(h), d0.zeros(N, az.f32)
    y1 = d1.empty(N, az.f32)
    with az.StreamPool(d0, 2) as p0, az.StreamPool(d1, 2) as p1:
        gate, writer = _held_write(d0, p0, x0, y0)  # writes y0 once the gate opens
        reader = d1.copy_op(y1, y0).then(y1.to_host_op()).submit(p1)  # reads y0, on device 1
        time.sleep(0.2)
        assert not reader.done(), "the read on device 1 ran before the write on device 0"
        gate.set()
        np.testing.assert_array_equal(reader.wait(), 2 * h)  # it saw the write, not the zeros
        writer.wait()


def test_copy_to_waits_for_an_in_flight_write(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    h = _host()
    x0, y0 = d0.to_device(h), d0.zeros(N, az.f32)
    with az.StreamPool(d0, 2) as p0:
        gate, writer = _held_write(d0, p0, x0, y0)
        threading.Timer(0.2, gate.set).start()
        y1 = y0.copy_to(d1)  # ordered after the writer (here the host waits: CPU devices)
        np.testing.assert_array_equal(y1.to_host(), 2 * h)
        writer.wait()


def test_plain_launch_on_device_0_waits_for_a_read_on_device_1(two_cpus: tuple[Device, Device]) -> None:
    from anodize.runtime.ops import HoldOp

    d0, d1 = two_cpus
    h = _host()
    x0, y0 = d0.to_device(h), d0.to_device(h)
    y1 = d1.empty(N, az.f32)
    with az.StreamPool(d1, 2) as p1:
        gate = threading.Event()
        reader = HoldOp(d1, gate).then(d1.copy_op(y1, y0)).submit(p1)  # will read y0
        threading.Timer(0.2, gate.set).start()
        vecadd[CFG](x0, x0, y0)  # overwrites y0: must wait for the read on device 1
        reader.wait()
        np.testing.assert_array_equal(y1.to_host(), h)  # the read saw the old y0
        np.testing.assert_array_equal(y0.to_host(), 2 * h)


# ---- two fake GPUs: the events of the GPU paths ----------------------------------------------------


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any, Any, list[tuple[int, Any]]]]:
    import ctypes

    import fakecuda as fake_cuda
    from cuda.bindings import driver

    from anodize.runtime import compile as rt_compile
    from anodize.runtime import launch as rt_launch
    from anodize.runtime import peer
    from anodize.runtime.compile import LoadedKernel

    for k in (vecadd, shift_read):
        k.store.clear()
    g0, state = fake_cuda.install(monkeypatch)
    g1 = fake_cuda.FakeGpu(state)
    g1.index = 1
    g0._ctx, g1._ctx = "ctx0", "ctx1"
    first = rt_launch.compile_for_device

    def compile_for_device(kernel: Any, device: Any, **kw: Any) -> LoadedKernel:
        if device is not g1:
            return first(kernel, device, **kw)
        compiled = rt_compile.compile_for_cpu(kernel)
        return LoadedKernel(compiled, g1, compiled.cpu_entry, g1.faults.register(compiled))

    monkeypatch.setattr(rt_launch, "compile_for_device", compile_for_device)
    monkeypatch.setattr(peer, "enable_peer_access", lambda a, b: True)
    records: dict[int, int] = {}  # id(event) -> the stream it was recorded on
    waits: list[tuple[int, Any]] = []  # (stream, event)
    real_record, real_wait = driver.cuEventRecord, driver.cuStreamWaitEvent

    def record(ev: Any, stream: Any) -> Any:
        records[id(ev)] = int(stream)
        return real_record(ev, stream)

    def wait(stream: Any, ev: Any, flags: int) -> Any:
        waits.append((int(stream), ev))
        return real_wait(stream, ev, flags)

    def memcpy_peer(dst: int, dctx: Any, src: int, sctx: Any, n: int, stream: Any) -> Any:
        assert (dctx, sctx) == ("ctx1", "ctx0") or (dctx, sctx) == ("ctx0", "ctx1")
        state.run_or_record(stream, lambda: ctypes.memmove(dst, src, n))
        return (fake_cuda.OK,)

    monkeypatch.setattr(driver, "cuEventRecord", record)
    monkeypatch.setattr(driver, "cuStreamWaitEvent", wait)
    monkeypatch.setattr(driver, "cuMemcpyPeerAsync", memcpy_peer, raising=False)
    state.records = records
    yield g0, g1, state, waits
    for k in (vecadd, shift_read):
        k.store.clear()


def _stream(dev: Any) -> int:
    return int(dev.stream.handle)


def test_fake_gpus_cross_device_op_waits_on_an_event(fake_gpus: Any) -> None:
    g0, g1, state, waits = fake_gpus
    h = _host()
    x0, y0 = g0.to_device(h), g0.empty(N, az.f32)
    y1, z1 = g1.empty(N, az.f32), g1.empty(N, az.f32)
    out = vecadd[CFG].op(x0, x0, y0).then(g1.copy_op(y1, y0)).then(vecadd[CFG].op(y1, y1, z1)).then(z1.to_host_op()).run()
    np.testing.assert_array_equal(out, 4 * h)
    crossed = [s for s, ev in waits if s == _stream(g1) and state.records.get(id(ev)) == _stream(g0)]
    assert crossed, "device 1's stream never waited for an event recorded on device 0's"


def test_fake_gpus_copy_to_orders_both_streams(fake_gpus: Any) -> None:
    g0, g1, state, waits = fake_gpus
    h = _host()
    a = g0.to_device(h)
    b = a.copy_to(g1)
    assert b.device is g1
    np.testing.assert_array_equal(b.to_host(), h)
    pairs = {(s, state.records.get(id(ev))) for s, ev in waits}
    assert (_stream(g1), _stream(g0)) in pairs  # the copy waits for the source's pending writes
    assert (_stream(g0), _stream(g1)) in pairs  # later work on the source waits for the copy


def test_fake_gpus_in_flight_write_on_device_0_orders_device_1(fake_gpus: Any) -> None:
    g0, g1, state, waits = fake_gpus
    h = _host()
    x0, y0, y1 = g0.to_device(h), g0.empty(N, az.f32), g1.empty(N, az.f32)
    state.ready = False  # events never look done: the writer stays in flight
    writer = vecadd[CFG].op(x0, x0, y0).submit(az.StreamPool(g0, 2))
    reader = g1.copy_op(y1, y0).submit(az.StreamPool(g1, 2))
    assert writer.marker is not None
    assert any(ev is writer.marker.event for _, ev in waits), "the read on device 1 did not wait for the writer"
    launch_waits = len(waits)
    vecadd[CFG](x0, x0, y0)  # a plain launch on device 0 that overwrites what device 1 reads
    assert any(ev is reader.marker.event and s == _stream(g0) for s, ev in waits[launch_waits:])
    state.ready = True
    writer.wait(), reader.wait()
    np.testing.assert_array_equal(y1.to_host(), 2 * h)


# ---- the example ----------------------------------------------------------------------------------


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("_example_data_parallel", ROOT / "examples" / "data_parallel.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_data_parallel_example_on_two_cpu_devices(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")
    mod = _example()
    assert mod.shards(10, 3) == [(0, 3), (3, 6), (6, 10)]
    devs = mod.pick_devices()
    assert [d.describe().split(" ")[0] for d in devs] == ["cpu", "cpu:1"]
    res = mod.main(n=20_011)
    assert int(res.sum()) == 20_011
    assert "over 2 devices" in capsys.readouterr().out
    three = mod.main(n=5_000, devices=3)  # any number of devices
    assert int(three.sum()) == 5_000


# ---- two GPUs -------------------------------------------------------------------------------------


@pytest.fixture
def gpus() -> Iterator[tuple[Device, Device]]:
    for k in (vecadd, shift_read):
        k.store.clear()
    g0, g1 = az.device(0), az.device(1)
    yield _drain(g0), _drain(g1)
    _drain(g0), _drain(g1)


@pytest.mark.gpu
@two_gpus
def test_gpu_peer_copy_round_trip(gpus: tuple[Device, Device]) -> None:
    g0, g1 = gpus
    h = _host(1 << 20)
    a = g0.to_device(h)
    b = a.copy_to(g1)
    assert b.device is g1
    np.testing.assert_array_equal(b.to_host(), h)
    np.testing.assert_array_equal(b.copy_to(g0).to_host(), h)


@pytest.mark.gpu
@two_gpus
def test_gpu_cross_device_argument_error(gpus: tuple[Device, Device]) -> None:
    g0, g1 = gpus
    a, c, b = g0.to_device(_host()), g0.empty(N, az.f32), g1.to_device(_host())
    with pytest.raises(az.ArgumentError, match="parameter `b`"):
        vecadd[CFG](a, b, c)


@pytest.mark.gpu
@two_gpus
def test_gpu_op_spanning_devices(gpus: tuple[Device, Device]) -> None:
    g0, g1 = gpus
    h = _host(1 << 20)
    cfg = az.LaunchConfig.for_num_elems(1 << 20, block=256)
    x0, y0 = g0.to_device(h), g0.empty(1 << 20, az.f32)
    y1, z1 = g1.empty(1 << 20, az.f32), g1.empty(1 << 20, az.f32)
    op = vecadd[cfg].op(x0, x0, y0).then(g1.copy_op(y1, y0)).then(vecadd[cfg].op(y1, y1, z1)).then(z1.to_host_op())
    np.testing.assert_array_equal(op.run(), 4 * h)


@pytest.mark.gpu
@two_gpus
def test_gpu_copy_to_after_a_launch_sees_it(gpus: tuple[Device, Device]) -> None:
    g0, g1 = gpus
    n = 1 << 22
    h = _host(n)
    cfg = az.LaunchConfig.for_num_elems(n, block=256)
    x0, y0 = g0.to_device(h), g0.empty(n, az.f32)
    vecadd[cfg](x0, x0, y0)  # queued on device 0's stream, not waited for
    y1 = y0.copy_to(g1)
    vecadd[cfg](y0, y0, x0)  # device 0 overwrites x0 and reads y0: after the copy, on its stream
    np.testing.assert_array_equal(y1.to_host(), 2 * h)
    np.testing.assert_array_equal(x0.to_host(), 4 * h)


@pytest.mark.gpu
@two_gpus
def test_gpu_data_parallel_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANODIZE_DEVICE", raising=False)
    mod = _example()
    res = mod.main(n=1 << 20)
    assert int(res.sum()) == 1 << 20


def test_copy_from_a_buffer_on_another_device(two_cpus: tuple[Device, Device]) -> None:
    d0, d1 = two_cpus
    h = _host()
    a, b = d0.to_device(h), d1.zeros(N, az.f32)
    b.copy_from(a)
    np.testing.assert_array_equal(b.to_host(), h)
    with pytest.raises(az.ArgumentError, match="shape"):
        b.copy_from(d0.zeros(N + 1, az.f32))


def test_multigpu_bench_refuses_cleanly_without_two_gpus() -> None:
    import os
    import subprocess

    if _gpu_count() >= 2:
        pytest.skip("this machine has two GPUs: the bench would run")
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "multigpu_bench.py")],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "ANODIZE_DEVICE": "cpu"}, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "not run: it needs two CUDA GPUs" in r.stdout


def test_fake_gpus_graph_spanning_devices_captures_and_replays(fake_gpus: Any) -> None:
    g0, g1, state, waits = fake_gpus
    h = _host()
    x0, y0 = g0.to_device(h), g0.empty(N, az.f32)
    y1, z1 = g1.empty(N, az.f32), g1.empty(N, az.f32)
    graph = az.capture(vecadd[CFG].op(x0, x0, y0).then(g1.copy_op(y1, y0)).then(vecadd[CFG].op(y1, y1, z1)))
    graph.replay()
    np.testing.assert_array_equal(z1.to_host(), 4 * h)
    x0.copy_from(h + 1)  # work run at capture time instead of at replay would miss this
    graph.replay()
    np.testing.assert_array_equal(z1.to_host(), 4 * (h + 1))
    assert state.counts["graph_launch"] == 2

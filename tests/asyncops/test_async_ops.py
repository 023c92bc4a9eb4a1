"""Lazy ops: validation up front, `then`/`gather` ordering, run/await/submit, results and faults.

`dev` runs each test on the CPU backend (CI) and again on a GPU where there is one.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from aop_kernels import affine, shift_read, vecadd

import anodize as az
from anodize.runtime.device import Device

N = 1000
CFG = az.LaunchConfig.for_num_elems(N)


def _arange(dev: Device, scale: float = 1.0) -> az.Buffer:
    return dev.to_device((np.arange(N, dtype=np.float32) * np.float32(scale)))


def test_op_validates_now_and_runs_nothing(dev: Device) -> None:
    a, b = _arange(dev), _arange(dev, 2.0)
    c = dev.zeros(N, az.f32)
    short = dev.empty(N - 1, az.f32)
    with pytest.raises(az.ContractViolation, match="len"):
        vecadd[CFG].op(a, b, short)
    with pytest.raises(az.AliasingError):
        vecadd[CFG].op(a, b, a)
    op = vecadd[CFG].op(a, b, c)
    assert isinstance(op, az.Op) and not op.started
    np.testing.assert_array_equal(c.to_host(), np.zeros(N, np.float32))  # recorded, not run
    assert op.run() is None
    np.testing.assert_array_equal(c.to_host(), np.arange(N, dtype=np.float32) * 3)


def test_then_orders_producer_before_consumer(dev: Device) -> None:
    a = _arange(dev)
    t = dev.empty(N, az.f32)
    u = dev.empty(N, az.f32)
    op = affine[CFG].op(a, t, 2.0, 1.0).then(affine[CFG].op(t, u, 3.0, 0.0)).then(u.to_host_op())
    out = op.run()
    np.testing.assert_allclose(out, (np.arange(N, dtype=np.float32) * 2 + 1) * 3)
    assert op.result is out


def test_then_chain_on_a_pool_is_ordered(dev: Device) -> None:
    """A long dependent chain stays correct when submitted to a pool (every link waits)."""
    x = dev.to_device(np.ones(N, np.float32))
    bufs = [x] + [dev.empty(N, az.f32) for _ in range(12)]
    op: az.Op = affine[CFG].op(bufs[0], bufs[1], 1.0, 1.0)
    for k in range(1, 12):
        op = op.then(affine[CFG].op(bufs[k], bufs[k + 1], 1.0, 1.0))
    with az.StreamPool(dev, 3) as pool:
        out = op.then(bufs[12].to_host_op()).submit(pool).wait()
    np.testing.assert_array_equal(out, np.full(N, 13, np.float32))


def test_gather_results_and_copies(dev: Device) -> None:
    a = _arange(dev)
    d, e = dev.empty(N, az.f32), dev.empty(N, az.f32)
    host_in = np.full(N, 7, np.float32)
    f = dev.empty(N, az.f32)
    host_out = np.empty(N, np.float32)
    g = az.gather(
        affine[CFG].op(a, d, 2.0, 0.0).then(d.to_host_op()),
        affine[CFG].op(a, e, -1.0, 0.0).then(e.to_host_op()),
        dev.copy_op(f, host_in).then(dev.copy_op(host_out, f)),
    )
    r0, r1, r2 = g.run()
    ref = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(r0, ref * 2)
    np.testing.assert_array_equal(r1, -ref)
    assert r2 is host_out
    np.testing.assert_array_equal(host_out, host_in)


def test_gather_refuses_dependent_branches(dev: Device) -> None:
    a = _arange(dev)
    t, u = dev.empty(N, az.f32), dev.empty(N, az.f32)
    with pytest.raises(az.AliasingError, match=r"branch 0 writes `out` of kernel `affine`.*branch 1 reads"):
        az.gather(affine[CFG].op(a, t, 1.0, 0.0), affine[CFG].op(t, u, 1.0, 0.0))
    with pytest.raises(az.AliasingError, match="branch"):  # a view of the same memory counts too
        az.gather(affine[CFG].op(a, t, 1.0, 0.0), t[: N // 2].to_host_op())
    # reading the same input in both branches is fine
    g = az.gather(affine[CFG].op(a, t, 1.0, 0.0), affine[CFG].op(a, u, 1.0, 0.0))
    g.run()


def test_asyncio_await(dev: Device) -> None:
    a = _arange(dev)
    t, u = dev.empty(N, az.f32), dev.empty(N, az.f32)

    async def main() -> tuple[np.ndarray, np.ndarray]:
        first = await affine[CFG].op(a, t, 2.0, 0.0).then(t.to_host_op())
        both = await az.gather(affine[CFG].op(a, t, 1.0, 1.0), affine[CFG].op(a, u, 0.0, 5.0))
        assert both == (None, None)
        return first, u.to_host()

    first, second = asyncio.run(main())
    np.testing.assert_array_equal(first, np.arange(N, dtype=np.float32) * 2)
    np.testing.assert_array_equal(second, np.full(N, 5, np.float32))


def test_asyncio_many_concurrent_awaits(dev: Device) -> None:
    a = _arange(dev)
    outs = [dev.empty(N, az.f32) for _ in range(6)]

    async def one(k: int) -> np.ndarray:
        return await affine[CFG].op(a, outs[k], float(k), 0.0).then(outs[k].to_host_op())

    async def main() -> list[np.ndarray]:
        return await asyncio.gather(*(one(k) for k in range(6)))

    res = asyncio.run(main())
    for k, r in enumerate(res):
        np.testing.assert_array_equal(r, np.arange(N, dtype=np.float32) * k)


def test_pool_submission_returns_handles(dev: Device) -> None:
    a = _arange(dev)
    outs = [dev.empty(N, az.f32) for _ in range(8)]
    with az.StreamPool(dev, 3) as pool:
        handles = [affine[CFG].op(a, outs[k], 1.0, float(k)).then(outs[k].to_host_op()).submit(pool) for k in range(8)]
        assert all(isinstance(h, az.Handle) for h in handles)
        res = [h.wait() for h in handles]
    for k, r in enumerate(res):
        np.testing.assert_array_equal(r, np.arange(N, dtype=np.float32) + k)
        assert handles[k].done()


def test_kernel_fault_surfaces_at_completion(dev: Device) -> None:
    a = _arange(dev)
    c = dev.empty(N, az.f32)
    cfg = az.LaunchConfig.for_num_elems(N, block=128)
    with pytest.raises(az.KernelFault, match="shift_read") as info:
        shift_read[cfg].op(a, c).run()
    assert info.value.index == N and info.value.length == N
    handle = shift_read[cfg].op(a, c).submit()
    with pytest.raises(az.KernelFault):
        handle.wait()
    with pytest.raises(az.KernelFault):  # again: the outcome is kept
        handle.wait()

    async def main() -> None:
        await shift_read[cfg].op(a, c)

    with pytest.raises(az.KernelFault):
        asyncio.run(main())
    dev.check()  # the fault was reported once, by the op: nothing left for the device


def test_ops_run_once_and_compose_once(dev: Device) -> None:
    a = _arange(dev)
    c = dev.empty(N, az.f32)
    op = affine[CFG].op(a, c, 1.0, 0.0)
    with pytest.raises(az.LaunchError, match="has not completed"):
        _ = op.result
    op.run()
    with pytest.raises(az.LaunchError, match="already started"):
        op.run()
    with pytest.raises(az.LaunchError, match="already started"):
        op.then(c.to_host_op())
    part = affine[CFG].op(a, c, 1.0, 0.0)
    whole = part.then(c.to_host_op())
    with pytest.raises(az.LaunchError, match="part of another op"):
        part.run()
    with pytest.raises(az.LaunchError, match="part of another op"):
        az.gather(part)
    whole.run()


def test_copy_op_validation(dev: Device) -> None:
    b = dev.empty(N, az.f32)
    with pytest.raises(az.ArgumentError, match="dtypes"):
        dev.copy_op(b, np.zeros(N, np.float64))
    with pytest.raises(az.ArgumentError, match="shapes"):
        dev.copy_op(b, np.zeros(N + 1, np.float32))
    with pytest.raises(az.ArgumentError, match="at least one side must be a Buffer"):
        dev.copy_op(np.zeros(3, np.float32), np.zeros(3, np.float32))
    with pytest.raises(az.AliasingError, match="share memory"):
        dev.copy_op(b[0:10], b[5:15])
    ro = np.zeros(N, np.float32)
    ro.flags.writeable = False
    with pytest.raises(az.ArgumentError, match="read-only"):
        dev.copy_op(ro, b)
    # device -> device, then back
    src = _arange(dev)
    dev.copy_op(b, src).run()
    np.testing.assert_array_equal(b.to_host(), np.arange(N, dtype=np.float32))


def test_pool_argument_errors(dev: Device) -> None:
    with pytest.raises(az.ArgumentError, match="positive number"):
        az.StreamPool(dev, 0)
    op = dev.empty(4, az.f32).to_host_op()
    with pytest.raises(az.ArgumentError, match="StreamPool"):
        op.submit("pool")  # type: ignore[arg-type]
    pool = az.StreamPool(dev, 1)
    pool.close()
    with pytest.raises(az.LaunchError, match="closed"):
        op.submit(pool)
    assert op.run().shape == (4,)


def test_a_then_chain_is_one_flat_sequence_and_its_links_are_spent(cpu: Device) -> None:
    """`a.then(b).then(c)...` keeps one flat list of steps (built in linear time: each link takes
    over the list of the sequence it extends, which it claims), in order; a link already
    extended can be neither extended again nor run."""
    bufs = [cpu.zeros(16, az.f32) for _ in range(5)]
    steps = [affine[CFG].op(bufs[k], bufs[k + 1], 1.0, 1.0) for k in range(4)]
    first = steps[0].then(steps[1])
    chain = first.then(steps[2]).then(steps[3])
    assert chain.children == tuple(steps) and chain.describe() == "sequence of 4 ops"
    with pytest.raises(az.LaunchError, match="already part of another op"):
        first.then(affine[CFG].op(bufs[0], bufs[1], 1.0, 1.0))
    with pytest.raises(az.LaunchError, match="part of another op"):
        first.run()
    left = affine[CFG].op(bufs[0], bufs[1], 1.0, 1.0).then(affine[CFG].op(bufs[1], bufs[2], 1.0, 1.0))
    right = affine[CFG].op(bufs[2], bufs[3], 1.0, 1.0).then(affine[CFG].op(bufs[3], bufs[4], 1.0, 1.0))
    both = left.then(right)  # two sequences: one flat list of four
    assert len(both.children) == 4
    chain.run()
    np.testing.assert_array_equal(bufs[4].to_host(), np.full(16, 4.0, np.float32))

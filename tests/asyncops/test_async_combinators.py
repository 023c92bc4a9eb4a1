"""Combinators (runtime/combinators.py): `and_then`, `map`, `value`, `zip`/`unzip`, `shared`,
and the ownership rules they keep.  `dev` runs each test on the CPU backend and on a GPU."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import numpy as np
import pytest
from aop_kernels import affine, shift_read, vecadd

import anodize as az
from anodize.runtime.device import Device
from anodize.runtime.ops import HoldOp

N = 1000
CFG = az.LaunchConfig.for_num_elems(N)


def _ones(dev: Device, v: float = 1.0) -> az.Buffer:
    return dev.to_device(np.full(N, v, np.float32))


def test_and_then_receives_the_result_and_chains_on_a_pool(dev: Device) -> None:
    x = _ones(dev)
    bufs = [dev.empty(N, az.f32) for _ in range(10)]
    seen: list[object] = []

    def step(k: int):  # type: ignore[no-untyped-def]
        def build(prev: object) -> az.Op:
            seen.append(prev)
            return affine[CFG].op(bufs[k - 1] if k else x, bufs[k], 1.0, 1.0)

        return build

    op: az.Op = az.value(x)
    for k in range(10):
        op = op.and_then(step(k))
    op = op.and_then(lambda _: bufs[9].to_host_op())
    with az.StreamPool(dev, 3) as pool:
        out = op.submit(pool).wait()
    np.testing.assert_array_equal(out, np.full(N, 11, np.float32))
    assert seen[0] is x and seen[1:] == [None] * 9  # a kernel op's result is None
    assert op.result is out


def test_and_then_over_a_host_value_waits_for_completion(dev: Device) -> None:
    a = _ones(dev, 3.0)
    c = dev.empty(N, az.f32)
    got: list[float] = []

    def after(host: np.ndarray) -> az.Op:
        got.append(float(host[0]))  # the copy has completed: the host sees the data
        return affine[CFG].op(a, c, float(host[0]), 0.0).then(c.to_host_op())

    op = a.to_host_op().and_then(after)
    out = op.run()
    assert got == [3.0]
    np.testing.assert_array_equal(out, np.full(N, 9, np.float32))


def test_map_runs_on_the_host_after_completion_without_blocking_the_loop(dev: Device) -> None:
    a = _ones(dev, 2.0)
    c = dev.empty(N, az.f32)
    op = affine[CFG].op(a, c, 2.0, 0.0).then(c.to_host_op()).map(lambda h: float(h.sum()))

    async def main() -> tuple[float, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.ensure_future(ticker())
        r = await op
        t.cancel()
        return r, ticks

    r, ticks = asyncio.run(main())
    assert r == 4.0 * N and ticks > 0
    assert op.result == r


def test_map_then_and_then_chains_after_the_host_step(cpu: Device) -> None:
    a = _ones(cpu, 1.0)
    c = cpu.empty(N, az.f32)
    op = a.to_host_op().map(lambda h: float(h[0]) + 4.0).and_then(
        lambda k: affine[CFG].op(a, c, k, 0.0).then(c.to_host_op())
    )
    with az.StreamPool(cpu, 2) as pool:
        out = op.submit(pool).wait()
    np.testing.assert_array_equal(out, np.full(N, 5, np.float32))


def test_value_and_zip_unzip(dev: Device) -> None:
    assert az.value(7, device=dev).run() == 7
    a = _ones(dev, 2.0)
    d, e = dev.empty(N, az.f32), dev.empty(N, az.f32)
    z = az.zip(affine[CFG].op(a, d, 1.0, 1.0).then(d.to_host_op()), affine[CFG].op(a, e, 0.0, 5.0).then(e.to_host_op()))
    first, second = z.unzip()
    r2 = second.run()  # runs the zip once ...
    r1 = first.run()  # ... the other element waits for that same run
    np.testing.assert_array_equal(r1, np.full(N, 3, np.float32))
    np.testing.assert_array_equal(r2, np.full(N, 5, np.float32))
    with pytest.raises(az.ArgumentError, match="unzip"):
        affine[CFG].op(a, d, 1.0, 1.0).unzip()


def test_zip_refuses_branches_that_share_written_memory(cpu: Device) -> None:
    a = _ones(cpu)
    c = cpu.empty(N, az.f32)
    with pytest.raises(az.AliasingError, match=r"`az.zip` built at .*test_async_combinators.py:\d+: branch 0 writes"):
        az.zip(affine[CFG].op(a, c, 1.0, 0.0), affine[CFG].op(c, cpu.empty(N, az.f32), 1.0, 0.0))


def test_and_then_branch_that_writes_what_another_reads_is_refused(cpu: Device) -> None:
    """A gather branch whose `and_then` builds a writer of memory the other branch reads:
    refused before it is queued, located at the gather; nothing of it ran."""
    a = _ones(cpu)
    c, d = cpu.zeros(N, az.f32), cpu.empty(N, az.f32)
    g = az.gather(
        az.value(a).and_then(lambda x: affine[CFG].op(x, c, 1.0, 0.0)),  # writes c
        affine[CFG].op(c, d, 1.0, 0.0),  # reads c
    )
    with pytest.raises(az.AliasingError, match=r"the gather built at .*:\d+: branch 0 \(an op `and_then` built\) writes"):
        g.run()
    np.testing.assert_array_equal(c.to_host(), np.zeros(N, np.float32))


def test_shared_runs_once_and_every_consumer_follows_it(dev: Device) -> None:
    a = _ones(dev, 1.0)
    t = dev.empty(N, az.f32)
    u, w = dev.empty(N, az.f32), dev.empty(N, az.f32)
    calls = []

    def produce(_: object) -> az.Op:
        calls.append(1)
        return affine[CFG].op(a, t, 2.0, 0.0)  # t = 2

    s = az.value(None, device=dev).and_then(produce).shared()
    fan = az.gather(
        s.and_then(lambda _: affine[CFG].op(t, u, 1.0, 1.0)).then(u.to_host_op()),  # reads t
        s.and_then(lambda _: affine[CFG].op(t, w, 3.0, 0.0)).then(w.to_host_op()),  # reads t
    )
    with az.StreamPool(dev, 3) as pool:
        ru, rw = fan.submit(pool).wait()
    assert len(calls) == 1
    np.testing.assert_array_equal(ru, np.full(N, 3, np.float32))
    np.testing.assert_array_equal(rw, np.full(N, 6, np.float32))


def test_shared_writer_with_a_branch_that_writes_its_input_is_refused(cpu: Device) -> None:
    a = _ones(cpu)
    t = cpu.empty(N, az.f32)
    s = affine[CFG].op(a, t, 1.0, 0.0).shared()
    with pytest.raises(az.AliasingError):  # branch 1 writes `a` while branch 0's reader of `t`...
        az.gather(s.then(affine[CFG].op(t, cpu.empty(N, az.f32), 1.0, 0.0)), affine[CFG].op(t, a, 1.0, 0.0))


def test_and_then_fault_stops_the_chain_and_surfaces(dev: Device) -> None:
    a = _ones(dev)
    c = dev.empty(N, az.f32)
    later: list[int] = []
    op = shift_read[az.LaunchConfig.for_num_elems(N, block=128)].op(a, c).then(c.to_host_op()).and_then(lambda h: later.append(1) or az.value(h))  # type: ignore[func-returns-value]
    with pytest.raises(az.KernelFault):
        op.run()
    assert later == []  # a host step never sees the data of a faulted kernel


def test_and_then_returning_a_non_op_is_an_argument_error(cpu: Device) -> None:
    op = az.value(1, device=cpu).and_then(lambda v: v + 1)  # type: ignore[arg-type,return-value]
    with pytest.raises(az.ArgumentError, match="returned int, not an op"):
        op.run()


def test_built_ops_are_guarded_until_completion(cpu: Device) -> None:
    """What an `and_then` built joins the in-flight registry: a host write is refused."""
    gate = threading.Event()
    a = _ones(cpu)
    c = cpu.empty(N, az.f32)
    op = HoldOp(cpu, gate).and_then(lambda _: vecadd[CFG].op(a, a, c))
    with az.StreamPool(cpu, 1) as pool:
        h = op.submit(pool)
        with pytest.raises(az.InFlightError):
            c.copy_from(np.zeros(N, np.float32))
        gate.set()
        h.wait()
    np.testing.assert_array_equal(c.to_host(), np.full(N, 2, np.float32))


def test_capture_refuses_a_host_step(cpu: Device) -> None:
    a = _ones(cpu)
    with pytest.raises(az.LaunchError, match="captured graph cannot hold"):
        az.capture(a.to_host_op().map(lambda h: h.sum()))


def test_policies(dev: Device) -> None:
    a = _ones(dev)
    outs = [dev.empty(N, az.f32) for _ in range(4)]
    for policy in (az.RoundRobin(2), az.SingleStream(), az.DependencyChains(2)):
        hs = [affine[CFG].op(a, o, float(k), 0.0).then(o.to_host_op()).submit(policy) for k, o in enumerate(outs)]
        for k, h in enumerate(hs):
            np.testing.assert_array_equal(h.wait(), np.full(N, k, np.float32))
        policy.close()
    with pytest.raises(az.ArgumentError, match="positive"):
        az.RoundRobin(0)


def test_dependency_chains_keep_a_chain_on_its_stream(cpu: Device) -> None:
    gate = threading.Event()
    a = _ones(cpu)
    t, u = cpu.empty(N, az.f32), cpu.empty(N, az.f32)
    policy = az.DependencyChains(3)
    h1 = HoldOp(cpu, gate).then(affine[CFG].op(a, t, 2.0, 0.0)).submit(policy)
    h2 = affine[CFG].op(t, u, 1.0, 1.0).submit(policy)  # reads t: continues on h1's stream
    h3 = affine[CFG].op(a, cpu.empty(N, az.f32), 1.0, 0.0).submit(policy)  # independent: another stream
    assert h2.end_lane is h1.end_lane and h3.end_lane is not h1.end_lane
    h3.wait()
    gate.set()
    h2.wait()
    np.testing.assert_array_equal(u.to_host(), np.full(N, 3, np.float32))
    policy.close()


def test_set_policy_per_device(cpu: Device) -> None:
    policy = az.SingleStream()
    az.set_policy(cpu, policy)
    try:
        a = _ones(cpu)
        c = cpu.empty(N, az.f32)
        h = affine[CFG].op(a, c, 1.0, 1.0).submit()
        h.wait()
        assert h.end_lane is policy.lanes(cpu).lanes[0]
    finally:
        az.set_policy(cpu, None)
        policy.close()


def test_op_memo_hits_only_the_very_same_arguments(cpu: Device) -> None:
    """`k[cfg].op(...)` reuses the validation of one of its last two ops for the very same
    Buffer and scalar objects only (runtime/op_memo.py); anything else is validated again."""
    a, c = _ones(cpu), cpu.empty(N, az.f32)
    k = 2.0
    first = affine[CFG].op(a, c, k, 0.0)
    again = affine[CFG].op(a, c, k, 0.0)
    assert again.flat is first.flat and again._uses[0].obj is a
    with pytest.raises(az.ContractViolation):
        affine[CFG].op(a, cpu.empty(N - 1, az.f32), k, 0.0)
    with pytest.raises(az.AliasingError):
        affine[CFG].op(c, c, k, 0.0)
    again.run()
    np.testing.assert_array_equal(c.to_host(), np.full(N, 2, np.float32))


def test_and_then_and_call_op_across_devices(cpu: Device) -> None:
    """A chain that moves to a second device (a CPU stand-in for a second GPU): `call_op`
    outputs on the first, a peer copy, a `call_op` on the second, a `shared` fan-out."""
    from aop_kernels import vecadd_out

    d1 = az.device("cpu", 1)
    a = _ones(cpu, 2.0)
    b1 = d1.empty(N, az.f32)
    op = vecadd_out[CFG].call_op(a, a).and_then(lambda c: d1.copy_op(b1, c)).and_then(
        lambda b: vecadd_out[CFG].call_op(b, b)
    )
    assert op.devices() == [cpu]  # what `and_then` builds is known once queued
    s = op.shared()
    with az.StreamPool(cpu, 2) as pool:
        r = az.gather(s.and_then(lambda x: x.to_host_op()), s.map(lambda x: x.device)).submit(pool).wait()
    np.testing.assert_array_equal(r[0], np.full(N, 8, np.float32))
    assert r[1] is d1


def test_select_gives_the_first_to_complete(cpu: Device) -> None:
    gate = threading.Event()
    a = _ones(cpu)
    c = cpu.empty(N, az.f32)
    policy = az.RoundRobin(2)
    sel = az.select(HoldOp(cpu, gate).then(az.value("slow", device=cpu)), affine[CFG].op(a, c, 3.0, 0.0).then(c.to_host_op()), policy=policy)
    k, r = asyncio.run(_awaited(sel))
    assert k == 1
    np.testing.assert_array_equal(r, np.full(N, 3, np.float32))
    gate.set()
    assert sel.handles[0].wait() == "slow"
    policy.close()


async def _awaited(sel: object) -> object:
    return await sel  # type: ignore[misc]


FRESH_PROCESS = """
import sys, numpy as np, anodize as az
dev = az.device("cpu")
loaded = lambda m: f"anodize.runtime.{m}" in sys.modules
assert not loaded("copy_ops") and not loaded("peer") and not loaded("combinators")
b = dev.to_device(np.arange(4, dtype=np.float32))
host = b.to_host_op().run()                    # Buffer.to_host_op: loads runtime/copy_ops.py
assert loaded("copy_ops") and loaded("peer") and not loaded("combinators"), sorted(sys.modules)
assert host.tolist() == [0, 1, 2, 3]
c = dev.empty(4, az.f32)
op = dev.copy_op(c, b).and_then(lambda r: r.to_host_op())   # Op.and_then: loads runtime/combinators.py
assert loaded("combinators")
assert op.run().tolist() == [0, 1, 2, 3]
d = b.copy_to(az.device("cpu", 1))            # Buffer.copy_to: runtime/peer.py's slot
assert d.device is az.device("cpu", 1) and d.to_host().tolist() == [0, 1, 2, 3]
e = az.device("cpu", 1).empty(4, az.f32)
e.copy_from(b)                                 # Buffer.copy_from between devices: peer's slot
assert e.to_host().tolist() == [0, 1, 2, 3]
"""


def test_the_methods_that_front_higher_modules_load_them_on_first_use() -> None:
    """`Buffer.to_host_op`, `Device.copy_op`, `Buffer.copy_to`/`copy_from` and `Op.and_then` call
    slots that runtime/copy_ops.py, runtime/peer.py and runtime/combinators.py fill (the low
    modules import none of them): in a fresh process the first call loads the filler."""
    subprocess.run([sys.executable, "-c", FRESH_PROCESS], check=True, timeout=120)

"""Launchers that hand outputs back (runtime/outputs.py): `k[cfg].call(...)`, `k[cfg].call_op(...)`,
the contract's `outputs=`, and the guard on what a `call_op` was handed."""

from __future__ import annotations

import numpy as np
import pytest
from aop_kernels import affine, split, tile_add_out, vecadd, vecadd_out

import anodize as az
from anodize.runtime import inflight
from anodize.runtime.device import Device

N = 1000
CFG = az.LaunchConfig.for_num_elems(N)


def _arange(dev: Device) -> az.Buffer:
    return dev.to_device(np.arange(N, dtype=np.float32))


def test_call_allocates_and_returns_the_output(dev: Device) -> None:
    a = _arange(dev)
    c = vecadd_out[CFG].call(a, a)
    assert isinstance(c, az.Buffer) and c.shape == (N,) and c.dtype == np.float32 and c.device is dev
    np.testing.assert_array_equal(c.to_host(), np.arange(N, dtype=np.float32) * 2)
    c2 = vecadd_out[CFG].call(b=a, a=c)  # by keyword too
    np.testing.assert_array_equal(c2.to_host(), np.arange(N, dtype=np.float32) * 3)


def test_several_outputs_are_a_tuple_in_declared_order(dev: Device) -> None:
    x = _arange(dev)
    lo, hi = split[CFG].call(x, 1.5)
    ref = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(lo.to_host(), ref - 1.5)
    np.testing.assert_array_equal(hi.to_host(), ref + 1.5)


def test_tile_kernel_call(dev: Device) -> None:
    a = _arange(dev)
    c = tile_add_out[az.LaunchConfig.for_tiles((N,), (512,))].call(a, a)
    np.testing.assert_array_equal(c.to_host(), np.arange(N, dtype=np.float32) * 2)


def test_call_op_result_and_combinators(dev: Device) -> None:
    a = _arange(dev)
    op = vecadd_out[CFG].call_op(a, a).and_then(lambda c: split[CFG].call_op(c, 1.0)).and_then(
        lambda lo_hi: vecadd_out[CFG].call_op(*lo_hi)
    )
    out = op.run()
    np.testing.assert_array_equal(out.to_host(), np.arange(N, dtype=np.float32) * 4)
    lo, hi = split[CFG].call_op(a, 2.0).unzip()
    assert lo.run().to_host()[3] == 1.0 and hi.run().to_host()[3] == 5.0


def test_call_op_guards_its_arrays_until_it_completes(cpu: Device) -> None:
    a = _arange(cpu)
    op = vecadd_out[CFG].call_op(a, a)
    with pytest.raises(az.InFlightError, match="built by `call_op`"):
        a.copy_from(np.zeros(N, np.float32))  # it will read `a`
    with pytest.raises(az.InFlightError, match="handed to kernel op `vecadd_out`"):
        affine[CFG](cpu.zeros(N, az.f32), a, 1.0, 0.0)  # a write of `a`
    np.testing.assert_array_equal(a.to_host(), np.arange(N, dtype=np.float32))  # reading it is fine
    c = op.run()
    a.copy_from(np.zeros(N, np.float32))  # released at completion
    np.testing.assert_array_equal(c.to_host(), np.arange(N, dtype=np.float32) * 2)
    del op
    dropped = vecadd_out[CFG].call_op(a, a)
    del dropped  # dropped unrun: nothing stays guarded
    a.copy_from(np.ones(N, np.float32))
    assert inflight.in_flight() == 0


def test_call_errors(cpu: Device) -> None:
    a = _arange(cpu)
    with pytest.raises(az.ArgumentError, match=r"takes the inputs `a`, `b` \(2\), got 3"):
        vecadd_out[CFG].call(a, a, a)
    with pytest.raises(az.LaunchError, match="has no `outputs=`"):
        vecadd[CFG].call(a, a)
    with pytest.raises(az.ContractViolation):  # the launch's own checks still run
        vecadd_out[CFG].call(a, cpu.empty(N - 1, az.f32))


def test_capture_of_call_op_replays(cpu: Device) -> None:
    a = _arange(cpu)
    g = az.capture(vecadd_out[CFG].call_op(a, a))
    a.copy_from(np.ones(N, np.float32))  # the graph took it over: not guarded between replays
    out = g.replay()
    np.testing.assert_array_equal(out.to_host(), np.full(N, 2, np.float32))

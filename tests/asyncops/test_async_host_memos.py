"""The memos of a chunk loop's host path (bench/and_then_chain.py --pipeline): the output shapes
of `call_op` (runtime/outputs.py) and the pinned-memory test of a copy op (`streams.is_pinned`).
Each must answer exactly what the uncached computation would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import fakecuda
import numpy as np
import pytest
from aop_kernels import split, vecadd_out
from cuda.bindings import driver

import anodize as az
from anodize.kernel import Kernel
from anodize.language.errors import ArgumentError
from anodize.runtime import inflight, outputs
from anodize.runtime import streams as S
from anodize.runtime.device import cpu_device


def test_output_shapes_follow_the_inputs_through_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = cpu_device()
    monkeypatch.setattr(outputs, "_SHAPES", {})
    for n in (64, 32, 64, 32, 7):  # hits and misses alternate: each output has its input's length
        a = dev.to_device(np.arange(n, dtype=np.float32))
        cfg = az.LaunchConfig.for_num_elems(n)
        c = vecadd_out[cfg].call_op(a, a).run()
        assert c.shape == (n,)
        np.testing.assert_array_equal(c.to_host(), np.arange(n, dtype=np.float32) * 2)
    assert len(outputs._SHAPES) == 3  # one entry per input shape
    lo, hi = split[az.LaunchConfig.for_num_elems(64)].call(a := dev.to_device(np.ones(64, np.float32)), 2.0)
    assert lo.shape == hi.shape == a.shape  # another kernel's declaration: its own entries


def test_shape_memo_is_bounded_and_does_not_keep_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = cpu_device()
    monkeypatch.setattr(outputs, "_SHAPES", {})
    monkeypatch.setattr(outputs, "SHAPE_MEMO_ENTRIES", 2)
    for n in (8, 16, 24):
        a = dev.to_device(np.zeros(n, np.float32))
        assert vecadd_out[az.LaunchConfig.for_num_elems(n)].call(a, a).shape == (n,)
        assert len(outputs._SHAPES) <= 2
    with pytest.raises(ArgumentError, match="needs an array"):
        vecadd_out[az.LaunchConfig.for_num_elems(8)].call(1.5, a)
    with pytest.raises(ArgumentError, match="needs an array"):  # raised again: nothing was memoised
        vecadd_out[az.LaunchConfig.for_num_elems(8)].call(1.5, a)


def test_call_op_leaves_the_op_memo_to_the_launchers_own_ops() -> None:
    dev = cpu_device()
    a, c = dev.to_device(np.ones(64, np.float32)), dev.empty(64, az.f32)
    launcher = vecadd_out[az.LaunchConfig.for_num_elems(64)]
    first = launcher.op(a, a, c)
    for _ in range(3):  # each allocates a new output: an op no later launch can match, not memoised
        launcher.call_op(a, a).run()
    again = launcher.op(a, a, c)
    assert again is not first and again.spec is first.spec  # still a hit of the memo's entry for `first`
    first.run()
    again.run()
    np.testing.assert_array_equal(c.to_host(), np.full(64, 2, np.float32))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[fakecuda.FakeGpu, list[int]]]:
    import aop_kernels

    kernels = [v for v in vars(aop_kernels).values() if isinstance(v, Kernel)]
    for k in kernels:
        k.store.clear()
    dev, state = fakecuda.install(monkeypatch)
    asked: list[int] = []

    def counted(attr: Any, ptr: int) -> Any:
        asked.append(ptr)
        return state.cuPointerGetAttribute(attr, ptr)

    monkeypatch.setattr(driver, "cuPointerGetAttribute", counted)
    yield dev, asked
    for k in kernels:
        k.store.clear()
    assert inflight.in_flight() == 0


def test_is_pinned_trusts_only_this_devices_pinned_blocks(fake: tuple[fakecuda.FakeGpu, list[int]]) -> None:
    dev, asked = fake
    host = az.pinned_empty(dev, 1024, az.f32)
    assert S.is_pinned(dev, host) and S.is_pinned(dev, host[100:200]) and S.is_pinned(dev, host[::2].reshape(16, 32))
    assert asked == []  # views of this device's `pinned_empty`: no driver query
    assert not S.is_pinned(dev, np.zeros(1024, np.float32))  # pageable: the driver says so
    assert len(asked) == 1
    other = np.asarray(S._PinnedBlock(4096, (1024,), np.dtype(np.float32), None))  # pinned, not by this device
    assert S.is_pinned(dev, other[10:20])  # the driver is asked, and says pinned
    assert len(asked) == 2
    staging = S.staging_empty(dev, (300,), np.dtype(np.float32))
    assert S.is_pinned(dev, staging) and len(asked) == 2


def test_chunks_from_pinned_views_upload_without_staging(fake: tuple[fakecuda.FakeGpu, list[int]]) -> None:
    dev, asked = fake
    host = az.pinned_empty(dev, 1024, az.f32)
    host[:] = np.arange(1024, dtype=np.float32)
    buf = dev.empty(256, az.f32)
    out = np.zeros(1024, np.float32)
    for k in range(4):
        dev.copy_op(buf, host[k * 256:(k + 1) * 256]).and_then(lambda d, k=k: dev.copy_op(out[k * 256:(k + 1) * 256], d)).run()
    np.testing.assert_array_equal(out, np.arange(1024, dtype=np.float32))
    assert len(asked) == 4  # only the pageable destination of each download was asked about

"""The host cost of a lazy-op chain, bounded by what it allocates: an `and_then` step is one
slotted view of the chain's one record, and the op its function builds one slotted record
(runtime/combinators.py `_Steps`, runtime/ops.py `KernelOp`).  Timing is too noisy for CI, so
these tests count the objects the garbage collector tracks: reintroducing a per-step object
(a site record, a list per step, `Use` tuples made for each step's registration) fails them."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from aop_kernels import affine

import anodize as az
from anodize.runtime import streams as S
from anodize.runtime.device import Device
from anodize.runtime.submission import _start

N = 256
CFG = az.LaunchConfig.for_num_elems(N)
STEPS = 400


@contextmanager
def _no_collection() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _tracked() -> int:
    return len(gc.get_objects())


def _steps(dev: Device) -> tuple[az.Buffer, az.Buffer, list[Callable[[Any], az.Op]]]:
    x = dev.to_device(np.ones(N, np.float32))
    y = dev.empty(N, az.f32)
    k, d = 1.0, 0.0  # one scalar object each: the op memo's hits are by identity

    def there(_: object) -> az.Op:
        return affine[CFG].op(x, y, k, d)

    def back(_: object) -> az.Op:
        return affine[CFG].op(y, x, k, d)

    there(None), back(None)  # the launcher's plan and memo exist before counting
    return x, y, [there if i % 2 == 0 else back for i in range(STEPS)]


def test_an_and_then_step_allocates_one_object_when_built(cpu: Device) -> None:
    x, _, fns = _steps(cpu)
    start = az.value(x)
    with _no_collection():
        before = _tracked()
        op: az.Op = start
        for f in fns:
            op = op.and_then(f)
        per_step = (_tracked() - before) / STEPS
    assert per_step <= 1.05, f"building an `and_then` step left {per_step:.2f} tracked objects alive (one view expected)"
    op.run()


def test_a_queued_and_then_step_keeps_at_most_three_objects(cpu: Device) -> None:
    """Run on the calling thread's lane: each step's function ran and its kernel launched;
    alive per step are the step's view, the kernel op and its argument tuple (no `Use`
    tuples: the submission had registered those arrays already)."""
    x, y, fns = _steps(cpu)
    op: az.Op = az.value(x)
    for f in fns:
        op = op.and_then(f)
    with _no_collection():
        before = _tracked()
        handle = _start(op, S.SingleLane(cpu, S.device_lane(cpu)))
        per_step = (_tracked() - before) / STEPS
        handle.wait()
    assert per_step <= 3.05, f"queueing an `and_then` step left {per_step:.2f} tracked objects alive per step"
    np.testing.assert_array_equal(y.to_host(), np.ones(N, np.float32))


def test_a_memo_hit_op_makes_its_uses_only_when_read(cpu: Device) -> None:
    x, y, fns = _steps(cpu)
    with _no_collection():
        before = _tracked()
        ops = [f(None) for f in fns]
        per_op = (_tracked() - before - 1) / STEPS  # (the list)
    assert per_op <= 2.05, f"a memoised `op(...)` made {per_op:.2f} tracked objects (the op and its argument tuple expected)"
    uses = ops[0]._uses  # the same uses a validated op has
    assert [(u.obj, u.writes) for u in uses] == [(x, False), (y, True)]
    assert "`out` of kernel `affine`" in uses[1].label


def test_a_bad_step_is_reported_at_the_line_that_defines_its_function(cpu: Device) -> None:
    """The chain keeps no call site per step: the message names the step's function and the
    `file:line` that defines it (for a lambda written in the `and_then` call, that line)."""
    x = cpu.to_device(np.ones(N, np.float32))
    op = az.value(x).and_then(lambda _: 3)  # the line the message names
    line = test_a_bad_step_is_reported_at_the_line_that_defines_its_function.__code__.co_firstlineno + 4
    with pytest.raises(az.ArgumentError, match=rf"`<lambda>` \(.*test_async_host_cost\.py:{line}\) given to `and_then` returned int, not an op"):
        op.run()

    def bad_step(_: object) -> Any:
        return "not an op"

    with pytest.raises(az.ArgumentError, match=rf"`bad_step` \(.*test_async_host_cost\.py:{line + 5}\) given to `and_then` returned str"):
        az.value(x).and_then(lambda _: az.value(x)).and_then(bad_step).run()

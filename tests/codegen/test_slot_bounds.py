"""Multi-slot shared writes proven in range (language/shared_safe.py `slots_in_range`): a sum of
block-local witness parts (within the contract's literal block), constants and the variables of
enclosing constant `range` loops that their bodies never assign, each node fitting its type, is
bounded by interval arithmetic; inside the array it carries no bounds check, otherwise it keeps
its check (and faults on the device rather than corrupting memory)."""

from __future__ import annotations

import numpy as np
import pytest

import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread
from anodize.codegen.driver import compile_gpu

BLOCK = 64


@launch_contract(domain=1, block=BLOCK, requires=lambda x, out: len(out) == len(x))
@kernel
def quarters(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    """Four slots a thread, `w + j * 64` of 256: in range, no check."""
    w = thread.index_in_block()
    i = thread.index_1d()
    s = az.shared.array(4 * BLOCK, f32)
    for j in range(4):
        s[w + j * BLOCK] = x[i] * f32(j + 1) if i in x else f32(0.0)
    az.syncthreads()
    if i in out:
        out[i] = s[w] + s[w + BLOCK] + s[w + 2 * BLOCK] + s[w + 3 * BLOCK]


@launch_contract(domain=1, block=BLOCK)
@kernel
def one_short(out: DisjointSlice[f32]) -> None:
    """`w + j * 64` of 255 slots: the last thread's last slot is past the end: checked."""
    w = thread.index_in_block()
    s = az.shared.array(4 * BLOCK - 1, f32)
    with az.unsafe():
        for j in range(4):
            s[w + j * BLOCK] = f32(1.0)


@launch_contract(domain=1, block=BLOCK)
@kernel
def reassigned(out: DisjointSlice[f32]) -> None:
    """The loop's body assigns `j`: no range for it, so the write keeps its check."""
    w = thread.index_in_block()
    s = az.shared.array(4 * BLOCK, f32)
    with az.unsafe():
        for j in range(4):
            j = j * 2
            s[w + j * BLOCK] = f32(1.0)


@launch_contract(domain=1, block=BLOCK)
@kernel
def after_loop(out: DisjointSlice[f32]) -> None:
    """`j` after its loop (and in an inner loop that rebinds it to a wider range) has no range
    of the outer loop's: both writes keep their checks."""
    w = thread.index_in_block()
    s = az.shared.array(4 * BLOCK, f32)
    j = 0
    with az.unsafe():
        for j in range(4):
            s[w + j * BLOCK] = f32(1.0)  # proven
        for k in range(2):
            for j in range(8):
                s[w + j * BLOCK] = f32(2.0)  # j up to 7: checked
        s[w + j * BLOCK] = f32(3.0)  # after the loops: checked


@launch_contract(domain=1, block=BLOCK)
@kernel
def unbounded(out: DisjointSlice[f32], n: az.i32) -> None:
    """A loop over a value (`range(n)`) gives no range: checked."""
    w = thread.index_in_block()
    s = az.shared.array(4 * BLOCK, f32)
    with az.unsafe():
        for j in range(n):
            s[w + j * BLOCK] = f32(1.0)


@kernel
def no_contract(out: DisjointSlice[f32]) -> None:
    """No literal block: the witness's range is unknown: checked."""
    w = thread.index_in_block()
    s = az.shared.array(4 * BLOCK, f32)
    with az.unsafe():
        for j in range(4):
            s[w + j * BLOCK] = f32(1.0)


@pytest.mark.parametrize(("k", "checks"), [(quarters, 0), (one_short, 1), (reassigned, 1), (after_loop, 2),
                                           (unbounded, 1), (no_contract, 1)],
                         ids=["quarters", "one_short", "reassigned", "after_loop", "unbounded", "no_contract"])
def test_slot_writes_are_checked_unless_proven(k: az.Kernel, checks: int) -> None:
    assert compile_gpu(k, ptxas=False).bounds_checks == checks


def test_proven_slots_compute_the_same_on_the_cpu_backend() -> None:
    dev = az.device("cpu")
    n = 300
    x = np.arange(n, dtype=np.float32)
    out = dev.zeros(n, f32)
    quarters[az.LaunchConfig(grid=-(-n // BLOCK), block=BLOCK)](dev.to_device(x), out)
    np.testing.assert_array_equal(out.to_host(), x * 10)


def test_a_write_past_the_end_still_faults() -> None:
    dev = az.device("cpu")
    with pytest.raises(az.KernelFault):
        one_short[az.LaunchConfig(grid=1, block=BLOCK)](dev.zeros(1, f32))
        dev.check()

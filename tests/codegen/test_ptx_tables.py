"""A chain of conditional expressions that picks a shared array by a loop variable: LLVM's
SimplifyCFG turned it into a switch lookup table of the arrays' addresses, a `.global`
initialised with `.shared` symbols that ptxas rejects ("Invalid initial value symbol"): a
kernel `anodize check` accepts that did not assemble.  The GPU entry carries
`"no-jump-tables"`, so no table is built."""

from __future__ import annotations

import numpy as np
import pytest

import anodize as az
from anodize import DisjointSlice, Slice, f32, i64, kernel, launch_contract, thread
from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.codegen.toolchain import find_ptxas


@launch_contract(domain=1, block=256)
@kernel
def pick(a: Slice[f32], c: DisjointSlice[f32], n: i64) -> None:
    i = thread.index_1d()
    w = thread.index_in_block()
    s0 = az.shared.array(256, f32)
    s1 = az.shared.array(256, f32)
    s2 = az.shared.array(256, f32)
    s3 = az.shared.array(256, f32)
    s4 = az.shared.array(256, f32)
    v = a[i] if i in a else f32(0.0)
    s0[w] = v
    s1[w] = v + 1.0
    s2[w] = v + 2.0
    s3[w] = v + 3.0
    s4[w] = v + 4.0
    az.syncthreads()
    acc = f32(0.0)
    for k in range(n):
        j = k % 5
        acc += s0[k % 256] if j == 0 else s1[k % 256] if j == 1 else s2[k % 256] if j == 2 else s3[k % 256] if j == 3 else s4[k % 256]
    if i in c:
        c[i] = acc


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_shared_array_picked_by_a_loop_variable_assembles() -> None:
    ck = compile_gpu(pick, "sm_90", ptxas=True)
    assert ".global" not in ck.ptx.split(".entry")[0]  # no table before the kernel


def test_shared_array_picked_by_a_loop_variable_on_cpu() -> None:
    ck = compile_cpu(pick)
    assert ck.cpu_entry is not None
    dev = az.device("cpu")
    a = np.arange(256, dtype=np.float32)
    c = dev.zeros(256, az.f32)
    pick[az.LaunchConfig(grid=1, block=256)](dev.to_device(a), c, 7)
    want = sum(a[k] + (k % 5) for k in range(7))
    np.testing.assert_allclose(c.to_host(), np.full(256, want, np.float32))

"""The CPU backend's results do not depend on the host's vector ISA (`ANODIZE_CPU_ISA`,
codegen/cpu/engine.py): each kernel here is optimised for SSE4.2, AVX2, AVX-512 and the host, and run
(with the level's instructions where the host has them, else lowered to the host's: the
vectoriser's decisions, which caused the AVX-512 bug below, are the level's either way).

Regression: on AVX-512 hosts a 256-thread `az.block.reduce(v, "min"/"max")` over floats ignored
threads 160-255: LLVM 22 tail-folded the region backend's 8-warp `maxnum` loop with lane masks
and ran one vector iteration of it (`CPUTarget.float_minmax`)."""

from __future__ import annotations

import itertools

import cg_collectives as K
import numpy as np
import pytest
from cg_helpers import compiled_cpu, run_cpu

import anodize as az

from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread
from anodize.codegen.cpu.engine import CPU_ISA_VAR

LEVELS = ["host", "sse4.2", "avx2", "avx512"]


@pytest.fixture(params=[pytest.param(level, marks=pytest.mark.slow) if level == "avx2" else level for level in LEVELS])
def isa(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A vector level (AVX2, usually the host's own, under -m slow)."""
    import llvmlite.binding as llvm

    if request.param != "host" and not llvm.get_process_triple().startswith("x86_64"):
        pytest.skip("x86-64 vector levels on an x86-64 host only")
    monkeypatch.setenv(CPU_ISA_VAR, request.param)
    return str(request.param)


@launch_contract(domain=1, block=32)
@kernel
def minmax(a: Slice[f32], b: Slice[f32], lo: DisjointSlice[f32], hi: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in lo and i in a and i in b:
        lo[i] = az.math.fmin(a[i], b[i])
        hi[i] = az.math.fmax(a[i], b[i])


def _wide(isa: str, dtype: type) -> None:
    """The 8-warp block reduce, compiled for the level `isa` by the driver (a runtime launch
    would reuse a launch object's module: the level is a compile option of the driver's)."""
    scalar = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}[dtype]
    ck = compiled_cpu(K.wide.specialize(T=scalar))
    ir = ck.llvm_ir_optimized
    assert "maxnum" not in ir and "minnum" not in ir  # float min/max are compares and selects
    widths = [int(w) * (32 if t == "float" else 64) for w, t in _vector_types(ir)]
    if isa == "sse4.2":
        assert max(widths, default=0) <= 128, widths
    n, bs = 256 * 24, 256
    a = (np.random.default_rng(3).random(n) * 2000 - 1000).astype(dtype)
    outs = [np.zeros(n, a.dtype) for _ in range(4)]
    f = run_cpu(ck, (n // bs,), (bs,), a, *outs)
    assert f.count == 0
    rmax, rmin, rsum, scan = (o.reshape(-1, bs) for o in outs)
    blk = a.reshape(-1, bs)
    assert np.array_equal(rmax, np.repeat(blk.max(1, keepdims=True), bs, 1)), "block max wrong"
    assert np.array_equal(rmin, np.repeat(blk.min(1, keepdims=True), bs, 1)), "block min wrong"
    assert np.array_equal(scan, np.maximum.accumulate(blk, 1))
    np.testing.assert_allclose(rsum[:, 0], blk.sum(1, dtype=np.float64), rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow), pytest.param(np.int32, marks=pytest.mark.slow)])
def test_eight_warp_block_reduce_min_max_at_every_vector_level(isa: str, dtype: type) -> None:
    _wide(isa, dtype)


def _vector_types(ir: str) -> list[tuple[str, str]]:
    import re

    return re.findall(r"<(\d+) x (float|double)>", ir)


def test_the_level_is_the_one_the_module_is_optimised_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The knob is live: SSE4.2's and AVX-512's modules differ (the compiles of the test above)."""
    import llvmlite.binding as llvm

    if not llvm.get_process_triple().startswith("x86_64"):
        pytest.skip("x86-64 vector levels on an x86-64 host only")
    irs = set()
    for level in ("sse4.2", "avx512"):
        monkeypatch.setenv(CPU_ISA_VAR, level)
        irs.add(compiled_cpu(K.wide.specialize(T="f32")).llvm_ir_optimized)
    assert len(irs) == 2


def test_fmin_fmax_bits_match_the_interpreter(isa: str) -> None:
    """NaN operands ignored, ties (+0/-0) give the first operand: the bits of the debug device."""
    vals = [0.0, -0.0, np.nan, 1.0, -1.0, np.inf, -np.inf]
    pairs = list(itertools.product(vals, vals))
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    lo, hi = np.zeros_like(a), np.zeros_like(a)
    assert run_cpu(compiled_cpu(minmax), (2,), (32,), a, b, lo, hi).count == 0
    dev = az.device("debug")
    dlo, dhi = dev.zeros(len(a), az.f32), dev.zeros(len(a), az.f32)
    minmax[az.LaunchConfig(grid=2, block=32)](dev.to_device(a), dev.to_device(b), dlo, dhi)
    assert np.array_equal(lo.view(np.uint32), dlo.to_host().view(np.uint32))
    assert np.array_equal(hi.view(np.uint32), dhi.to_host().view(np.uint32))
    assert np.isnan(hi).sum() == 1 and np.isnan(lo).sum() == 1  # NaN only from NaN with NaN


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64], ids=lambda t: np.dtype(t).name)
def test_every_collective_test_at_every_vector_level(isa: str, dtype: type) -> None:
    """The collective tests' kernels at each level (compiled by the runtime, whose cache key
    holds the level; no launch object of another level is reused)."""
    from test_collectives import test_bitwise_and_or, test_reduce_scan_broadcast_every_type

    from anodize.kernel import Kernel

    def forget() -> None:  # the kernels' launch objects and specialisations, of another level
        for k in vars(K).values():
            if isinstance(k, Kernel):
                k.store.clear()

    forget()
    try:
        test_reduce_scan_broadcast_every_type("cpu", dtype)
        if dtype in (np.int32, np.uint64):
            test_bitwise_and_or("cpu", dtype)
    finally:
        forget()

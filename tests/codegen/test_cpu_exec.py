"""The CPU backend runs the same typed IR as the GPU: results checked against NumPy / Python."""

from __future__ import annotations

import inspect
import math

import cg_kernels as K
import numpy as np
import pytest
from cg_helpers import rng, run_cpu

from anodize.language.diagnostics import CheckError
from anodize.codegen.driver import compile_cpu


def _line_of(text: str) -> int:
    lines, start = inspect.getsourcelines(K)
    for i, ln in enumerate(lines):
        if text in ln:
            return start + i if start else i + 1
    raise AssertionError(text)


def blocks(n: int, b: int) -> int:
    return max(1, -(-n // b))


def test_vecadd() -> None:
    ck = compile_cpu(K.vecadd)
    r = rng()
    n = 1000
    a = r.random(n, dtype=np.float32) + 0.25
    b = r.random(n, dtype=np.float32) + 0.25
    c = np.full(n, -7.0, np.float32)
    f = run_cpu(ck, (blocks(n, 256),), (256,), a, b, c)
    assert f.count == 0
    np.testing.assert_array_equal(c, a + b)
    assert ck.bounds_checks == 0


def test_saxpy_scalar_param() -> None:
    ck = compile_cpu(K.saxpy)
    r = rng()
    n = 777
    x = r.standard_normal(n).astype(np.float32)
    y = r.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    alpha = np.float32(1.75)
    f = run_cpu(ck, (blocks(n, 128),), (128,), alpha, x, y, out)
    assert f.count == 0
    np.testing.assert_array_equal(out, alpha * x + y)


def test_scale2d_2d_witness() -> None:
    ck = compile_cpu(K.scale2d)
    r = rng()
    rows, cols = 37, 53
    m = r.standard_normal((rows, cols))
    out = np.zeros((rows, cols))
    f = run_cpu(ck, (blocks(cols, 16), blocks(rows, 8)), (16, 8), m, 2.5, out, rank=2)
    assert f.count == 0
    rr, cc = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    np.testing.assert_allclose(out, m * 2.5 + rr * 1000.0 + cc, rtol=0, atol=0)


def _control_ref(v: int) -> int:
    # the kernel body, run by CPython: the language's semantics are Python's here
    r = 0
    if v < 0:
        r = -1
    elif v == 0:
        r = 100
    elif v < 10:
        r = 10
    else:
        r = 1000
    k = 0
    while k < 5:
        k += 1
        if k == 3:
            continue
        r += k
    for j in range(10):
        if j == 7:
            break
        if j % 2 == 1:
            continue
        r += j
    for j in range(10, 0, -3):
        r = r * 2 + j
    return r + (1 if v > 5 and v < 50 else 2) + (3 if not v else 0) + (4 if -5 < v <= 7 else 0)


def test_control_flow() -> None:
    ck = compile_cpu(K.control)
    r = rng()
    x = np.concatenate([np.array([-6, -5, -1, 0, 1, 5, 6, 7, 8, 9, 10, 49, 50, 51], np.int32), r.integers(-100, 100, 200, dtype=np.int32)])
    out = np.zeros(len(x), np.int32)
    f = run_cpu(ck, (blocks(len(x), 64),), (64,), x, out)
    assert f.count == 0
    np.testing.assert_array_equal(out, np.array([_control_ref(int(v)) for v in x], np.int32))


def test_python_floor_division_and_modulo() -> None:
    ck = compile_cpu(K.int_ops)
    r = rng()
    n = 500
    a = r.integers(-1000, 1000, n, dtype=np.int32)
    b = r.integers(1, 50, n, dtype=np.int32) * r.choice(np.array([-1, 1], np.int32), n)
    a[:3] = [np.iinfo(np.int32).min, 7, -7]
    b[:3] = [-1, -2, 2]
    fl = np.zeros(n, np.int32)
    md = np.zeros(n, np.int32)
    f = run_cpu(ck, (blocks(n, 32),), (32,), a, b, fl, md)
    assert f.count == 0
    expect_fl = np.array([(int(x) // int(y) + 2**31) % 2**32 - 2**31 for x, y in zip(a, b, strict=True)], np.int64).astype(np.int32)
    np.testing.assert_array_equal(fl, expect_fl)
    np.testing.assert_array_equal(md, np.array([int(x) % int(y) for x, y in zip(a, b, strict=True)], np.int32))
    assert fl[0] == np.iinfo(np.int32).min  # INT_MIN // -1 wraps (documented)


def test_division_by_zero_records_a_fault_and_gives_zero() -> None:
    ck = compile_cpu(K.div_zero)
    a = np.array([7, 8, 9, 10], np.int32)
    b = np.array([2, 0, 3, 0], np.int32)
    c = np.full(4, 55, np.int32)
    f = run_cpu(ck, (1,), (32,), a, b, c)
    np.testing.assert_array_equal(c, [3, 0, 3, 0])
    assert f.count == 2
    site = ck.fault_sites[f.site]
    assert site.kind == "divide" and f.index == 8


def test_unsigned_wraparound_and_shift_clamping() -> None:
    ck = compile_cpu(K.wrap_ops)
    r = rng()
    n = 300
    a = r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = r.integers(-(2**40), 2**40, n, dtype=np.int64)
    o32 = np.zeros(n, np.uint32)
    o64 = np.zeros(n, np.uint64)
    s = np.zeros(n, np.int64)
    f = run_cpu(ck, (blocks(n, 32),), (32,), a, b, o32, o64, s)
    assert f.count == 0
    np.testing.assert_array_equal(o32, np.array([(int(v) * 3 + 7 - (int(v) << 3)) % 2**32 for v in a], np.uint64).astype(np.uint32))
    np.testing.assert_array_equal(o64, np.array([(int(v) * 0xFFFFFFFF) % 2**64 for v in a], np.uint64))
    expect = [((0 + (int(v) >> 65) + (int(v) >> 2)) + 2**63) % 2**64 - 2**63 for v in b]
    np.testing.assert_array_equal(s, np.array(expect, np.int64))


def test_casts_saturate_and_truncate() -> None:
    ck = compile_cpu(K.casts)
    r = rng()
    special = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 5e9, -0.5, 0.0, 2.9999, -2.9999], np.float32)
    x = np.concatenate([special, (r.standard_normal(100) * 1e3).astype(np.float32)])
    n = len(x)
    oi = np.zeros(n, np.int32)
    ou = np.zeros(n, np.uint32)
    of = np.zeros(n, np.float64)
    ob = np.zeros(n, np.int32)
    f = run_cpu(ck, (blocks(n, 32),), (32,), x, oi, ou, of, ob)
    assert f.count == 0

    def sat(v: float, lo: int, hi: int) -> int:
        if math.isnan(v):
            return 0
        if math.isinf(v):
            return hi if v > 0 else lo
        return max(lo, min(hi, math.trunc(v)))

    np.testing.assert_array_equal(oi, [sat(float(v), -(2**31), 2**31 - 1) for v in x])
    np.testing.assert_array_equal(ou, [sat(float(v), 0, 2**32 - 1) for v in x])
    np.testing.assert_array_equal(of, x.astype(np.float64) / 3.0)
    np.testing.assert_array_equal(ob, [1 if (v != 0 or math.isnan(v)) else 0 for v in x])


def test_math_f32_matches_numpy() -> None:
    ck = compile_cpu(K.math32)
    r = rng()
    n = 256
    x = (r.random(n) * 1.5 + 0.5).astype(np.float32)
    y = (r.random(n) * 1.5 + 0.5).astype(np.float32)
    o = np.zeros(n, np.float32)
    f = run_cpu(ck, (blocks(n, 32),), (32,), x, y, o)
    assert f.count == 0
    v, w = x, y
    one, two, three = np.float32(1), np.float32(2), np.float32(3)
    expect = (
        np.sqrt(v) + np.exp(v) + np.log(v) + np.sin(v) * np.cos(w) + np.tanh(v - w)
        + np.power(v, w) + one / np.sqrt(v) + np.abs(v - w) + np.floor(v * three) + np.ceil(w * three)
        + (v * w + one) + np.minimum(v, w) * two + np.maximum(v, w) * three
    )
    assert expect.dtype == np.float32
    np.testing.assert_allclose(o, expect, rtol=2e-6)


def test_math_f64_matches_numpy() -> None:
    ck = compile_cpu(K.math64)
    r = rng()
    x = r.random(200) * 3 + 0.01
    o = np.zeros(200)
    f = run_cpu(ck, (blocks(200, 32),), (32,), x, o)
    assert f.count == 0
    expect = np.exp(x) + np.log(x) + np.sqrt(x) + np.tanh(x) + np.abs(x - 1.0) + np.minimum(x, 0.5) + np.maximum(np.maximum(x, 0.5), 0.25)
    np.testing.assert_allclose(o, expect, rtol=1e-14)


def test_helpers_inline_with_slices_and_witnesses() -> None:
    ck = compile_cpu(K.helpers)
    r = rng()
    a = r.random(100, dtype=np.float32)
    o = np.zeros(100, np.float32)
    f = run_cpu(ck, (4,), (32,), a, o)
    assert f.count == 0
    np.testing.assert_array_equal(o, np.clip(a * np.float32(2) - np.float32(0.5), 0, 1) + (a + a))
    assert ck.bounds_checks == 0  # `i in o` + `len(a) == len(o)` flows into `read_twice(a, i)`


def test_atomics_histogram_and_grid_stride() -> None:
    ck = compile_cpu(K.histogram)
    r = rng()
    x = r.integers(0, 16, 1000, dtype=np.int32)
    h = np.zeros(16, np.uint32)
    total = np.zeros(1, np.float32)
    f = run_cpu(ck, (3,), (64,), x, h, total)  # far fewer threads than elements
    assert f.count == 0
    np.testing.assert_array_equal(h, np.bincount(x, minlength=16))
    assert total[0] == np.float32(1.5 * 1000)


def test_atomic_out_of_range_index_faults_and_is_skipped() -> None:
    ck = compile_cpu(K.histogram)
    x = np.array([1, 2, 40, 3], np.int32)
    h = np.zeros(16, np.uint32)
    total = np.zeros(1, np.float32)
    f = run_cpu(ck, (1,), (64,), x, h, total)
    assert f.count == 1 and f.index == 40 and f.length == 16
    assert ck.fault_sites[f.site].kind == "atomic" and ck.fault_sites[f.site].param == "h"
    assert h.sum() == 3


def test_grid_stride_covers_every_element() -> None:
    ck = compile_cpu(K.grid_stride_copy)
    r = rng()
    n = 1001
    x = r.random(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    f = run_cpu(ck, (2,), (64,), x, y)
    assert f.count == 0
    np.testing.assert_array_equal(y, x * np.float32(2))


def test_out_of_bounds_read_records_site_index_length() -> None:
    ck = compile_cpu(K.oob_read)
    r = rng()
    n = 100
    a = r.random(n, dtype=np.float32) + 1
    c = np.full(n, -1.0, np.float32)
    f = run_cpu(ck, (4,), (32,), a, c, rank=1)
    assert f.count == 3
    site = ck.fault_sites[f.site]
    assert (site.kind, site.param, site.line) == ("read", "a", _line_of("c[i] = a[i + 3]"))
    assert site.path.endswith("cg_kernels.py")
    assert (f.index, f.length) == (n, n)  # threads run in order: the first failure is i = n - 3
    np.testing.assert_array_equal(c[: n - 3], a[3:])
    np.testing.assert_array_equal(c[n - 3 :], 0.0)  # a failed read yields 0


def test_wrong_rank_launch_writes_nothing() -> None:
    ck = compile_cpu(K.vecadd_unguarded)
    r = rng()
    n = 64
    a = r.random(n, dtype=np.float32)
    b = r.random(n, dtype=np.float32)
    c = np.full(n, 9.0, np.float32)
    f = run_cpu(ck, (2, 2), (32, 1), a, b, c, rank=2)
    np.testing.assert_array_equal(c, 9.0)
    assert f.count >= 1
    site = ck.fault_sites[f.site]
    assert site.kind == "rank" and (f.index, f.length) == (2, 1)
    # the same kernel at the right rank works
    f = run_cpu(ck, (2,), (32,), a, b, c, rank=1)
    assert f.count == 0
    np.testing.assert_array_equal(c, a + b)


def test_bounds_checks_off_removes_checks() -> None:
    assert compile_cpu(K.vecadd_unguarded).bounds_checks == 3
    assert compile_cpu(K.vecadd_unguarded, bounds_checks=False).bounds_checks == 0


def test_unsafe_tier_kernel_runs_on_the_threaded_cpu_backend() -> None:
    ck = compile_cpu(K.block_reduce)
    x = rng().random(512, dtype=np.float32) + 0.5
    out = np.full(4, -1.0, np.float32)
    f = run_cpu(ck, (4,), (128,), x, out)
    assert f.count == 0
    # only i < len(out) feeds the reduction; the two shuffles double the block sum twice
    np.testing.assert_allclose(out, [4 * x[:4].sum(), 0, 0, 0], rtol=1e-6)


def test_sequential_cpu_target_refuses_barriers_as_an_internal_error() -> None:
    """The driver sends barrier kernels to the threaded backend: the one-loop target meeting
    one is a bug in anodize, reported as a located `az-internal`, never a user-facing code."""
    from anodize.codegen.cpu.backend import CPUTarget
    from anodize.language.typer import build_ir
    from anodize.codegen.lowerings import lower_kernel

    k = build_ir(K.block_reduce)
    with pytest.raises(CheckError) as ei:
        lower_kernel(k, CPUTarget(k, threaded=False))
    d = ei.value.diagnostics[0]
    assert d.code == "az-internal"
    assert "one-loop CPU backend" in d.message
    assert d.span.path.endswith("cg_kernels.py")
    assert d.span.line in (_line_of("buf = az.shared.array(128, f32)"), _line_of("az.syncthreads()"))

"""More CPU-backend semantics: atomics, unchecked writes, 2-D bounds, float floor division, bools."""

from __future__ import annotations

import math

import cg_kernels as K
import numpy as np
from cg_helpers import rng, run_cpu

from anodize.codegen.driver import compile_cpu, compile_gpu


def test_atomic_min_max_exchange_return_old_values() -> None:
    ck = compile_cpu(K.atomics_misc)
    r = rng()
    x = r.integers(-500, 500, 40, dtype=np.int32)
    lo = np.array([10**6], np.int32)
    hi = np.zeros(1, np.uint64)
    last = np.zeros(4, np.float32)
    old = np.zeros(40, np.int32)
    f = run_cpu(ck, (2,), (32,), x, lo, hi, last, old)
    assert f.count == 0
    assert lo[0] == x.min() and hi[0] == x.max() + 1000
    # threads run in order on the CPU, so each `min` returns the running minimum before it
    running = np.minimum.accumulate(np.concatenate([[10**6], x]))[:-1]
    np.testing.assert_array_equal(old, running)
    np.testing.assert_array_equal(last, [x[i] for i in (36, 37, 38, 39)])


def test_write_unchecked_is_still_bounds_checked() -> None:
    ck = compile_cpu(K.unchecked_writes)
    x = rng().random(20, dtype=np.float32)
    y = np.zeros(20, np.float32)
    f = run_cpu(ck, (1,), (32,), x, y)
    np.testing.assert_array_equal(y, x[::-1])
    assert f.count == 24  # 12 reads of x and 12 writes past either end
    assert ck.fault_sites[f.site].kind == "read"


def test_2d_read_checks_each_axis() -> None:
    ck = compile_cpu(K.read2d)
    m = rng().random((4, 6), dtype=np.float32)
    out = np.full(5, -1.0, np.float32)
    f = run_cpu(ck, (1,), (8,), m, 2, 3, out)
    np.testing.assert_array_equal(out, [m[2, 3], m[2, 4], m[2, 5], 0, 0])
    assert (f.count, f.index, f.length) == (2, 6, 6)  # col 6 of 6 columns: a 2-D index never wraps rows
    f = run_cpu(ck, (1,), (8,), m, 4, 0, out)
    assert (f.count, f.index, f.length) == (5, 4, 4)  # the row axis fails first
    assert ck.bounds_checks == 1  # `if i not in out: return` proves the write


def test_float_floor_division_and_modulo_follow_python() -> None:
    ck = compile_cpu(K.float_divmod)
    r = rng()
    a = np.concatenate([[7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 1.0], r.standard_normal(50) * 100])
    b = np.concatenate([[2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.1], r.standard_normal(50) * 10 + 0.5])
    q = np.zeros_like(a)
    m = np.zeros_like(a)
    f = run_cpu(ck, (2,), (32,), a, b, q, m)
    assert f.count == 0
    for i in range(len(a)):
        pq, pm = divmod(float(a[i]), float(b[i]))
        assert q[i] == pq and m[i] == pm and math.copysign(1, m[i]) == math.copysign(1, pm), (a[i], b[i])


def test_bool_slices_and_scalars() -> None:
    ck = compile_cpu(K.bools)
    p = np.array([True, False, True, False, True])
    out = np.zeros(5, np.bool_)
    n = np.zeros(5, np.int32)
    f = run_cpu(ck, (1,), (32,), p, True, out, n)
    assert f.count == 0
    np.testing.assert_array_equal(out, p != True)  # noqa: E712
    np.testing.assert_array_equal(n, p.astype(int) + 1 + (p & True))
    filecheck_bool = compile_gpu(K.bools, ptxas=False).llvm_ir
    assert "i8 %\"flag\"" in filecheck_bool  # a bool_ scalar travels as an i8


def test_module_constants_numpy_scalars_keep_their_type() -> None:
    from anodize.language.typer import build_ir
    from anodize.language.types import F32

    k = build_ir(K.module_constants)
    write = k.body[1].body[0]  # type: ignore[attr-defined]
    assert write.value.value.ty == F32  # f32 * np.float32 + int literal stays f32, then widens on store
    ck = compile_cpu(K.module_constants)
    x = rng().random(40, dtype=np.float32)
    y = np.zeros(40)
    run_cpu(ck, (2,), (32,), x, y)
    np.testing.assert_array_equal(y, (x * np.float32(0.5) + np.float32(3)).astype(np.float64))


def test_every_opt_level_compiles_and_assembles() -> None:
    from anodize.codegen.gpu.ptx import find_ptxas

    for opt in (0, 1, 2, 3):
        ck = compile_gpu(K.math32, "sm_80", opt=opt, ptxas=find_ptxas() is not None)
        assert len(ck.ptx) < 100_000  # unused libdevice functions are dropped even at -O0
        assert opt == 0 or "__nv_" not in ck.ptx

"""The 8-bit floats f8e4m3 / f8e5m2 (OCP FP8; ml_dtypes' float8_e4m3fn / float8_e5m2): the
Python reference (language/halfbits.py) against ml_dtypes and a pure-NumPy decoding, and
every backend bit-exact against it; PTX through ptxas on sm_90 (cvt.rn.satfinite,
cvt.rn.f16x2) and sm_80/sm_89 (the integer IR)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.language.halfbits import bits_to_float, round_bits

import cg_f8 as K

ml_dtypes = pytest.importorskip("ml_dtypes")
E4, E5 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
MAX = {"f8e4m3": 448.0, "f8e5m2": 57344.0}
DT = {"f8e4m3": E4, "f8e5m2": E5}


def _decode(bits: np.ndarray, e: int, m: int, fn: bool) -> np.ndarray:
    """A pure-NumPy reading of 8-bit patterns with `e` exponent and `m` fraction bits (`fn`:
    no infinity, the all-ones pattern NaN), independent of ml_dtypes and of halfbits."""
    b = bits.astype(np.int64)
    sign = np.where(b >> 7, -1.0, 1.0)
    ex, fr = (b >> m) & ((1 << e) - 1), b & ((1 << m) - 1)
    bias = (1 << (e - 1)) - 1
    val = np.where(ex == 0, fr * 2.0 ** (1 - bias - m), (fr + 2.0**m) * 2.0 ** (ex - bias - m))
    top = ex == (1 << e) - 1
    if fn:
        val = np.where(top & (fr == (1 << m) - 1), np.nan, val)
    else:
        val = np.where(top, np.where(fr == 0, np.inf, np.nan), val)
    return sign * val


def _inputs(fmt: str) -> np.ndarray:
    """Random values of every scale, every value of the format and every midpoint (ties),
    past the largest, infinities, NaNs and zeros."""
    rng = np.random.default_rng(7)
    vals = np.unique(np.arange(256, dtype=np.uint8).view(DT[fmt]).astype(np.float64))
    vals = vals[np.isfinite(vals)]
    mids = (vals[1:] + vals[:-1]) / 2
    rand = np.concatenate([rng.standard_normal(3000) * s for s in (1e-3, 1.0, 30.0, 3e3, 1e5)])
    special = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30, MAX[fmt] * 1.07, 2.0**-20]
    return np.concatenate([vals, mids, rand, special]).astype(np.float32)


def _reference(x: np.ndarray, fmt: str) -> np.ndarray:
    """ml_dtypes' rounding after saturation (the GPU's `.satfinite`; ml_dtypes itself overflows to NaN/inf)."""
    return np.where(np.isnan(x), x, np.clip(x, -MAX[fmt], MAX[fmt])).astype(DT[fmt]).view(np.uint8)


@pytest.mark.parametrize("fmt,e,m,fn", [("f8e4m3", 4, 3, True), ("f8e5m2", 5, 2, False)])
def test_halfbits_against_numpy_and_ml_dtypes(fmt: str, e: int, m: int, fn: bool) -> None:
    pats = np.arange(256, dtype=np.uint8)
    mine = np.array([bits_to_float(int(p), fmt) for p in pats])
    np.testing.assert_array_equal(mine, _decode(pats, e, m, fn))
    np.testing.assert_array_equal(mine, pats.view(DT[fmt]).astype(np.float64))
    x = _inputs(fmt)
    got = np.array([round_bits(float(v), fmt) for v in x], dtype=np.uint8)
    np.testing.assert_array_equal(got, _reference(x, fmt))
    assert round_bits(1e9, fmt) == (0x7E if fmt == "f8e4m3" else 0x7B)  # saturates
    assert round_bits(-np.inf, fmt) == (0xFE if fmt == "f8e4m3" else 0xFB)


def _run(dev: str, k: az.Kernel, args: list[object], out: object) -> np.ndarray:
    d = az.device(dev)
    bufs = [d.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    n = len(args[0])  # type: ignore[arg-type]
    o = d.empty(n, out)
    k[az.LaunchConfig.for_num_elems(n, block=64)](*bufs, o)
    return o.to_host()


@pytest.mark.parametrize("dev", ["cpu", "debug"])
@pytest.mark.parametrize("fmt", ["f8e4m3", "f8e5m2"])
def test_conversions_bit_exact(dev: str, fmt: str) -> None:
    x = _inputs(fmt)
    if dev == "debug":
        x = x[::7].copy()  # (the interpreter is slow)
    to = K.to_e4m3 if fmt == "f8e4m3" else K.to_e5m2
    got = _run(dev, to, [x], getattr(az, fmt))
    assert got.dtype == DT[fmt]
    np.testing.assert_array_equal(got.view(np.uint8), _reference(x, fmt))
    # from f64 (one rounding) and from f16
    w = x.astype(np.float64)
    if fmt == "f8e4m3":
        np.testing.assert_array_equal(_run(dev, K.e4m3_via_halves, [w], az.u8), _reference(x, fmt))
    else:
        np.testing.assert_array_equal(_run(dev, K.f64_to_e5m2, [w], az.f8e5m2).view(np.uint8), _reference(x, fmt))
        with np.errstate(over="ignore"):
            h = x.astype(np.float16)
        np.testing.assert_array_equal(_run(dev, K.e5m2_from_f16, [h], az.f8e5m2).view(np.uint8),
                                      _reference(h.astype(np.float32), fmt))
    # widening: every pattern, exact
    pats = np.arange(256, dtype=np.uint8).view(DT[fmt])
    if fmt == "f8e4m3":
        back = _run(dev, K.from_e4m3, [pats], az.f32)
        np.testing.assert_array_equal(back, pats.astype(np.float32))
    else:
        back = _run(dev, K.from_e5m2, [pats], az.f16)
        np.testing.assert_array_equal(back, pats.astype(np.float16))


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_arithmetic_promotes(dev: str) -> None:
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(500) * 20).astype(E4)
    b = (rng.standard_normal(500) * 20).astype(E5)
    got = _run(dev, K.fma_promoted, [a, b], az.f8e4m3)
    p = (a.astype(np.float32) * b.astype(np.float32)).astype(np.float16)  # f8 * f8: an f16
    want = _reference(p.astype(np.float32) + np.float32(0.25), "f8e4m3")
    np.testing.assert_array_equal(got.view(np.uint8), want)
    got = _run(dev, K.scale, [b, 1.5], az.bf16)  # an f8 scalar parameter
    want = (b.astype(np.float32) * np.float32(1.5)).astype(np.float16).astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    pats = np.arange(256, dtype=np.uint8).view(E4)
    f = pats.astype(np.float32)
    with np.errstate(invalid="ignore"):
        want_i = (f > 1.0) | (-f > 100.0)
    want_c = want_i.astype(np.int32) + np.where(f != 0, 2, 0) + pats.view(np.uint8).astype(np.int32) * 4
    np.testing.assert_array_equal(_run(dev, K.count_big, [pats], az.i32), want_c)


def test_scalar_argument_out_of_range_is_refused() -> None:
    d = az.device("cpu")
    b = d.to_device(np.zeros(4, E5))
    with pytest.raises(az.ArgumentError, match="does not fit in f8e4m3"):
        K.scale[az.LaunchConfig.for_num_elems(4, block=64)](b, 500.0, d.empty(4, az.bf16))


def test_host_buffers() -> None:
    d = az.device("cpu")
    x = np.linspace(-500, 500, 12).astype(np.float32).astype(E4)
    buf = d.to_device(x)
    assert buf.dtype == np.dtype(E4) and buf.nbytes == 12
    np.testing.assert_array_equal(buf.to_host().view(np.uint8), x.view(np.uint8))
    np.testing.assert_array_equal(buf.view(az.u8).to_host(), x.view(np.uint8))
    assert d.zeros(3, az.f8e5m2).to_host().dtype == np.dtype(E5)
    with pytest.raises(az.ArgumentError, match="expects elements of f8e4m3"):
        K.from_e4m3[az.LaunchConfig.for_num_elems(4, block=64)](d.to_device(np.zeros(4, E5)), d.empty(4, az.f32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_ptx_assembles(arch: str, ptxas_ok: Callable[[str, str], None]) -> None:
    native = arch == "sm_90"  # (sm_89's cvt needs PTX 8.1: the integer IR there)
    for name, pattern in (("to_e4m3", "cvt.rn.satfinite.e4m3x2.f32"), ("to_e5m2", "cvt.rn.satfinite.e5m2x2.f32"),
                          ("from_e4m3", "cvt.rn.f16x2.e4m3x2"), ("from_e5m2", "cvt.rn.f16x2.e5m2x2"),
                          ("fma_promoted", "cvt.rn.f16x2.e5m2x2"), ("e4m3_via_halves", ""), ("staged", "cvt.rn.satfinite.e4m3x2.f32"),
                          ("printed", "cvt.rn.f16x2.e5m2x2")):
        ptx = getattr(K, name).compile(arch).ptx
        ptxas_ok(ptx, arch)
        if pattern:
            assert (pattern in ptx) == native, (name, arch)
        assert ".e4m3x2" not in ptx or native


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["f8e4m3", "f8e5m2"])
def test_gpu_conversions_bit_exact(fmt: str) -> None:
    """The H200's cvt against the reference: equal bits, but any NaN for a NaN (the GPU's NaN
    pattern need not be ml_dtypes')."""
    x = _inputs(fmt)
    got = _run("gpu", K.to_e4m3 if fmt == "f8e4m3" else K.to_e5m2, [x], getattr(az, fmt))
    want = _reference(x, fmt)
    nan = np.isnan(x)
    np.testing.assert_array_equal(got.view(np.uint8)[~nan], want[~nan])
    assert np.isnan(got.astype(np.float32)[nan]).all()
    pats = np.arange(256, dtype=np.uint8).view(DT[fmt])
    back = _run("gpu", K.from_e4m3, [pats], az.f32) if fmt == "f8e4m3" else _run("gpu", K.from_e5m2, [pats], az.f16)
    np.testing.assert_array_equal(back, pats.astype(back.dtype))
    a = (np.random.default_rng(3).standard_normal(500) * 20).astype(E4)
    b = (np.random.default_rng(4).standard_normal(500) * 20).astype(E5)
    np.testing.assert_array_equal(_run("gpu", K.fma_promoted, [a, b], az.f8e4m3).view(np.uint8),
                                  _run("cpu", K.fma_promoted, [a, b], az.f8e4m3).view(np.uint8))


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_shared_local_and_print(dev: str, capfd: pytest.CaptureFixture[str]) -> None:
    a = np.linspace(-300, 300, 64).astype(np.float32).astype(E4)
    want = _reference(a.astype(np.float32) * 2, "f8e4m3")
    np.testing.assert_array_equal(_run(dev, K.staged, [a], az.f8e4m3).view(np.uint8), want)
    b = np.array([-1.5, 2.0], dtype=np.float32).astype(E5)
    np.testing.assert_array_equal(_run(dev, K.printed, [b], az.f16), b.astype(np.float16))
    assert "f8 -1.5 f16 -1.5" in capfd.readouterr().out

"""`az.bitcast(x, T)` on every backend, against NumPy's `view`; PTX through ptxas."""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

import anodize as az

import cg_bits as K

N = 1000


def _launch(dev_name: str, k: az.Kernel, x: np.ndarray, out: object) -> np.ndarray:
    dev = az.device(dev_name)
    a = dev.to_device(x)
    o = dev.empty(len(x), out)
    k[az.LaunchConfig.for_num_elems(len(x), block=64)](a, o)
    return o.to_host()


def _floats(rng: np.random.Generator) -> np.ndarray:
    x = (rng.standard_normal(N) * 1e3).astype(np.float32)
    x[:6] = [0.0, -0.0, np.inf, -np.inf, 1e-45, -3.5]
    return x


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_float_keys_match_numpy(dev: str) -> None:
    x = _floats(np.random.default_rng(1))
    b = x.view(np.uint32)
    want = (b ^ np.where(b >> 31 == 0, np.uint32(0x80000000), np.uint32(0xFFFFFFFF))) >> 24
    assert (_launch(dev, K.float_keys, x, az.u32) == want).all()


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_from_bits_keeps_every_pattern(dev: str) -> None:
    bits = np.random.default_rng(2).integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    bits[:3] = [0x7F800000, 0xFF800000, 0x80000000]  # inf, -inf, -0.0
    got = _launch(dev, K.from_bits, bits, az.f32)
    want = bits.view(np.float32)
    finite = ~np.isnan(want)
    assert (got.view(np.uint32)[finite] == bits[finite]).all()
    assert np.isnan(got[~finite]).all()


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_wide_and_half_bits(dev: str) -> None:
    x = np.random.default_rng(3).standard_normal(N) * 100
    got = _launch(dev, K.wide_and_half, x, az.u64)
    w = np.abs(x).view(np.uint64) >> np.uint64(32) << np.uint64(32)
    h = x.astype(np.float16).view(np.uint16).astype(np.uint64) << np.uint64(16)
    g = x.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint64)
    # bf16(f64) rounds once from f64; NumPy goes through f32 (two roundings): equal but for ties
    assert (got >> np.uint64(16) == (w | h) >> np.uint64(16)).all()
    assert (np.abs((got & np.uint64(0xFFFF)).astype(np.int64) - g.astype(np.int64)) <= 1).all()


@pytest.mark.parametrize("name", ["float_keys", "from_bits", "wide_and_half"])
def test_ptx_assembles(name: str, ptxas_ok: Callable[[str, str], None]) -> None:
    ck = getattr(K, name).compile("sm_90")
    ptxas_ok(ck.ptx, "sm_90")
    if name == "float_keys":
        assert "cvt" not in ck.ptx.split("ld.global")[-1].split("st.global")[0]  # no value conversion


def test_buffer_view_dtype() -> None:
    dev = az.device("cpu")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = dev.to_device(x)
    assert (b.view(az.u32).to_host() == x.view(np.uint32)).all()
    h = b.view(np.uint16)
    assert h.shape == (3, 8) and (h.to_host() == x.view(np.uint16)).all()
    d = b.view("f64")
    assert d.shape == (3, 2) and (d.to_host() == x.view(np.float64)).all()
    assert b.view((4, 3)).shape == (4, 3)
    d.copy_from(np.ones((3, 2)))  # one memory: writes through the view are the buffer's
    assert (b.to_host().view(np.float64) == 1.0).all()


def test_buffer_view_dtype_refusals() -> None:
    dev = az.device("cpu")
    with pytest.raises(az.ArgumentError, match="do not divide"):
        dev.to_device(np.zeros(3, np.float32)).view(az.f64)
    with pytest.raises(az.ArgumentError, match="not aligned"):
        dev.to_device(np.zeros(8, np.float32))[1:5].view(az.f64)
    with pytest.raises(az.ArgumentError, match="not an anodize element type"):
        dev.to_device(np.zeros(8, np.float32)).view(np.complex64)

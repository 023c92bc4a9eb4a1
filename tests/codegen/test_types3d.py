"""The half and small integer types and 3-D kernels: the CPU backend against NumPy (f16, ints)
and the round-to-nearest-even reference (bf16, via ml_dtypes), and PTX through ptxas."""

from __future__ import annotations

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_gpu
from anodize.codegen.toolchain import find_ptxas
from anodize.language.halfbits import round_bits

import cg_types3d as K

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(scope="module")
def dev():  # type: ignore[no-untyped-def]
    return az.device("cpu")


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16)


def test_round_bits_matches_numpy_and_ml_dtypes() -> None:
    rng = np.random.default_rng(7)
    xs = np.concatenate([
        rng.standard_normal(3000) * 10.0 ** rng.integers(-9, 9, 3000),
        np.frombuffer(rng.integers(0, 0x7F800000, 3000, dtype=np.uint32).tobytes(), np.float32).astype(np.float64),
        [0.0, -0.0, np.inf, -np.inf, 65504.0, 65519.99, 65520.0, 2.0**-25, 2.0**-24 * 1.5, 3.4e38, 3.5e38],
    ])
    xs = xs[~np.isnan(xs)]
    with np.errstate(over="ignore"):
        want16 = _bits(xs.astype(np.float16))
        wantbf = _bits(xs.astype(BF16))
    assert [round_bits(float(x), "f16") for x in xs] == want16.tolist()
    assert [round_bits(float(x), "bf16") for x in xs] == wantbf.tolist()


def test_f16_arithmetic_matches_numpy(dev) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1)
    n = 4096
    a = (rng.standard_normal(n) * 30).astype(np.float16)
    b = (rng.standard_normal(n) * 30).astype(np.float16)
    o = dev.empty(n, az.f16)
    K.ops16[az.LaunchConfig.for_num_elems(n, block=64)](dev.to_device(a), dev.to_device(b), o)
    got = o.to_host()
    k = np.arange(n) % 8
    with np.errstate(all="ignore"):
        want = np.select(
            [k == 0, k == 1, k == 2, k == 3, k == 4, k == 5, k == 6],
            [a + b, a - b, a * b, a / b, np.where(a < b, -np.abs(a), np.maximum(a, b)), np.sqrt(np.abs(a)), np.mod(a, b)],
            a * np.float16(0.5) + np.float16(1.0),
        ).astype(np.float16)
    same = (_bits(got) == _bits(want)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (np.flatnonzero(~same)[:5], got[~same][:5], want[~same][:5])


def test_bf16_arithmetic_matches_reference(dev) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(2)
    n = 4096
    a = (rng.standard_normal(n) * 1e3).astype(BF16)
    b = (rng.standard_normal(n) * 1e-3).astype(BF16)
    o = dev.empty(n, az.bf16)
    K.opsbf[az.LaunchConfig.for_num_elems(n, block=64)](dev.to_device(a), dev.to_device(b), o)
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    k = np.arange(n) % 4
    want = np.select([k == 0, k == 1, k == 2], [fa + fb, fa - fb, fa * fb], fa / fb).astype(BF16)  # one f32 op, RNE
    assert np.array_equal(_bits(o.to_host()), _bits(want))


def test_conversions(dev) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.standard_normal(1000) * 10.0 ** rng.integers(-8, 8, 1000), [70000.0, -1e6, 65519.0, 0.1, 2049.0]])
    n = len(a)
    h, b, i = dev.empty(n, az.f16), dev.empty(n, az.bf16), dev.empty(n, az.i32)
    K.convert[az.LaunchConfig.for_num_elems(n, block=64)](dev.to_device(a), h, b, i)
    with np.errstate(over="ignore", invalid="ignore"):
        a16 = a.astype(np.float16)
        assert np.array_equal(_bits(h.to_host()), _bits(a16))
        assert np.array_equal(_bits(b.to_host()), _bits(a.astype(BF16)))
        finite = np.isfinite(a16)
        assert np.array_equal(i.to_host()[finite], a16[finite].astype(np.int32))
    assert i.to_host()[n - 5] == 2**31 - 1  # inf saturates
    w = dev.empty(n, az.f64)
    K.widen[az.LaunchConfig.for_num_elems(n, block=64)](h, w)
    assert np.array_equal(w.to_host(), a16.astype(np.float64))


def test_small_ints_match_numpy(dev) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(4)
    n = 1000
    a = rng.integers(-128, 128, n).astype(np.int8)
    b = rng.integers(0, 256, n).astype(np.uint8)
    o, p = dev.empty(n, az.i16), dev.empty(n, az.u16)
    K.ints8[az.LaunchConfig.for_num_elems(n, block=64)](dev.to_device(a), dev.to_device(b), o, p)
    assert np.array_equal(o.to_host(), a + b)  # NumPy: int8 + uint8 -> int16
    assert np.array_equal(p.to_host(), b.astype(np.uint16) * b.astype(np.uint16) + a.astype(np.uint16))


def test_half_scalars_and_atomics(dev) -> None:  # type: ignore[no-untyped-def]
    o = dev.empty(3, az.f16)
    K.scalar16[az.LaunchConfig.for_num_elems(3, block=64)](o, 1.5, 0.25, -3)
    assert np.all(o.to_host() == np.float16(1.5 + 0.25 - 3))
    with pytest.raises(az.ArgumentError, match="does not fit in f16"):
        K.scalar16[az.LaunchConfig.for_num_elems(3, block=64)](o, 1e6, 0.25, 1)
    with pytest.raises(az.ArgumentError, match="i8"):
        K.scalar16[az.LaunchConfig.for_num_elems(3, block=64)](o, 1.0, 0.25, 300)
    n = 300
    a = (np.arange(n) % 7).astype(np.float16)
    h, m, c, b = dev.zeros(2, az.f16), dev.zeros(1, az.bf16), dev.zeros(1, az.i16), dev.to_device(np.array([0, 255], np.uint8))
    K.atomics16[az.LaunchConfig.for_num_elems(n, block=64)](dev.to_device(a), h, m, c, b)
    assert h.to_host()[0] == np.float16(a.astype(np.float32).sum())  # exact: small integers
    assert h.to_host()[1] in set(a.tolist())
    assert float(m.to_host()[0]) == 6.0
    assert c.to_host()[0] == n
    assert b.to_host().tolist() == [255, 0]  # u8(i) wraps: the max is 255, the min 0


def test_3d_witness_and_config(dev) -> None:  # type: ignore[no-untyped-def]
    cfg = az.LaunchConfig.for_shape((3, 5, 9), block=(4, 4, 2))
    assert cfg.rank == 3 and cfg.grid == (3, 2, 2) and cfg.block == (4, 4, 2)
    assert az.LaunchConfig.for_shape((5, 9)).rank == 2
    assert az.LaunchConfig((2, 2, 1), (4, 4, 1)).rank == 3
    assert az.LaunchConfig.for_num_elems(10).rank == 1
    o = dev.empty((3, 5, 9), az.i32)
    K.ids3[cfg](o)
    l, r, c = np.indices((3, 5, 9))
    assert np.array_equal(o.to_host(), l * 10000 + r * 100 + c)
    with pytest.raises(az.LaunchError):
        K.ids3[az.LaunchConfig.for_shape((5, 9), block=(4, 4))](o)  # rank 2 for a domain-3 kernel


def test_3d_bounds_fault(dev) -> None:  # type: ignore[no-untyped-def]
    u = dev.to_device(np.ones((2, 3, 4), np.float32))
    o = dev.empty((2, 3, 4), az.f32)
    K.read3[az.LaunchConfig.for_shape((2, 3, 4), block=(4, 4, 2))](u, o)
    with pytest.raises(az.KernelFault):
        dev.synchronize()


def test_3d_without_contract_checks_rank(dev) -> None:  # type: ignore[no-untyped-def]
    o = dev.zeros((2, 2, 2), az.i32)
    K.ids3_nocontract.unsafe_launch(az.LaunchConfig((1, 1, 2), (2, 2, 1)), o)
    dev.synchronize()
    assert o.to_host().sum() == 8
    K.ids3_nocontract.unsafe_launch(az.LaunchConfig((1, 1), (2, 2)), o)  # rank 2: the witness fails closed
    with pytest.raises(az.KernelFault):
        dev.synchronize()


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
@pytest.mark.parametrize("name", ["ops16", "opsbf", "convert", "widen", "ints8", "scalar16", "atomics16", "ids3", "ids3_nocontract", "read3"])
def test_ptx_assembles(name: str) -> None:
    ck = compile_gpu(getattr(K, name), arch="sm_90", ptxas=True)
    assert ck.cubin
    if name == "atomics16":
        assert "atom.global.add.noftz.f16" in ck.ptx  # f16 add: the native atomic, not a CAS loop
    if name == "ops16":
        assert "cvt.rn.f16.f32" in ck.ptx and "cvt.f32.f16" in ck.ptx  # f16 conversions are cvt on the GPU


@pytest.mark.gpu
def test_gpu_matches_cpu() -> None:
    gpu = az.device()
    assert gpu.kind == "cuda"
    rng = np.random.default_rng(1)
    n = 4096
    a = (rng.standard_normal(n) * 30).astype(np.float16)
    b = (rng.standard_normal(n) * 30).astype(np.float16)
    outs = []
    for d in (gpu, az.device("cpu")):
        o = d.empty(n, az.f16)
        K.ops16[az.LaunchConfig.for_num_elems(n, block=64)](d.to_device(a), d.to_device(b), o)
        outs.append(o.to_host())
    g, c = outs
    assert ((_bits(g) == _bits(c)) | (np.isnan(g) & np.isnan(c))).all()  # NaN payloads may differ
    o3 = gpu.empty((3, 5, 9), az.i32)
    K.ids3[az.LaunchConfig.for_shape((3, 5, 9), block=(4, 4, 2))](o3)
    l, r, c = np.indices((3, 5, 9))
    assert np.array_equal(o3.to_host(), l * 10000 + r * 100 + c)

"""Records shared by host and device: the layout of NumPy's `align=True` dtypes, host buffers
of records and their field views, kernels over them on the CPU backend and the debug device
against NumPy, and PTX through ptxas."""

from __future__ import annotations

import numpy as np
import pytest

import anodize as az
from anodize import f16, f32, f64, i8, i16, i32, i64, u8, u16
from anodize.codegen.gpu.ptx import find_ptxas, run_ptxas
from anodize.language.record_types import layout, record_from_dtype
from anodize.language.types import BY_NAME

import rt_record_kernels as K


def _particles(n: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    h = np.zeros(n, K.Particle.dtype)
    for part in ("pos", "vel"):
        for c in "xyz":
            h[part][c] = rng.standard_normal(n).astype(np.float32)
    h["mass"] = rng.random(n).astype(np.float32)
    h["id"] = np.arange(n)
    return h


@pytest.mark.parametrize(
    "fields",
    [
        [("a", u8), ("b", f64)],
        [("a", f16), ("b", i8), ("c", f32), ("d", u16)],
        [("a", i64), ("b", u8)],
        [("a", i16), ("b", i32), ("c", u8), ("d", u8), ("e", f64), ("f", i8)],
    ],
)
def test_layout_is_numpys_aligned_layout(fields: list[tuple[str, type]]) -> None:
    rec = layout("R", [(n, BY_NAME[t.__name__]) for n, t in fields])
    want = np.dtype([(n, BY_NAME[t.__name__].info.dtype) for n, t in fields], align=True)
    assert rec.info.dtype == want and rec.size == want.itemsize
    assert [f.offset for f in rec.fields] == [want.fields[n][1] for n, _ in fields]
    assert record_from_dtype(want) is not None
    assert record_from_dtype(np.dtype([(n, BY_NAME[t.__name__].info.dtype) for n, t in fields])) is None or want.itemsize == sum(
        BY_NAME[t.__name__].info.mem_bits // 8 for _, t in fields
    )


def test_record_class_dtype_nested_and_arrays() -> None:
    want = np.dtype([("flag", "u1"), ("h", "f2"), ("big", "f8"), ("small", "i1"), ("ids", "i4", (3,))], align=True)
    assert K.Mixed.dtype == want and K.Mixed.dtype.itemsize == 32
    vec = np.dtype([("x", "f4"), ("y", "f4"), ("z", "f4")], align=True)
    assert K.Particle.dtype == np.dtype([("pos", vec), ("vel", vec), ("mass", "f4"), ("id", "i4")], align=True)
    assert K.Vec3(1.0, 2.0, 3.0).y == 2.0  # a dataclass on the host


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_buffers_of_records(dev: str) -> None:
    d = az.device(dev)
    h = _particles(10)
    b = d.to_device(h)
    assert b.dtype == K.Particle.dtype and b.shape == (10,)
    assert (b.to_host() == h).all()
    e = d.empty(4, K.Particle)
    assert e.dtype == K.Particle.dtype and e.nbytes == 4 * 32
    z = d.zeros((2, 3), K.Mixed)
    assert z.shape == (2, 3) and (z.to_host()["ids"] == 0).all()
    # field views: strided views over the same records
    assert (b.field("mass").to_host() == h["mass"]).all()
    with pytest.raises(az.ArgumentError, match="cannot be viewed"):  # 12 bytes in a 32-byte record
        b.field("pos")
    b.field("id").fill(5)
    assert (b.to_host()["id"] == 5).all()
    ids = d.zeros(3, K.Mixed).field("ids")
    assert ids.shape == (3, 3)


def test_record_buffer_refusals() -> None:
    d = az.device("cpu")
    with pytest.raises(az.ArgumentError, match="not an anodize record"):
        d.to_device(np.zeros(3, np.dtype([("a", "u1"), ("b", "f8")])))  # packed: not C's layout
    with pytest.raises(az.ArgumentError, match="no field"):
        d.empty(3, K.Vec3).field("w")
    with pytest.raises(az.ArgumentError, match="record buffers"):
        d.empty(3, az.f32).field("x")


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_particle_step_matches_numpy(dev: str) -> None:
    d = az.device(dev)
    n = 1000 if dev == "cpu" else 200
    h = _particles(n)
    out = d.empty(n, K.Particle)
    K.advance[az.LaunchConfig.for_num_elems(n, block=128)](d.to_device(h), 0.01, out)
    r = out.to_host()
    dt = np.float32(0.01)
    vy = h["vel"]["y"] - np.float32(9.8) * dt
    np.testing.assert_array_equal(r["vel"]["y"], vy)
    np.testing.assert_array_equal(r["pos"]["x"], h["pos"]["x"] + dt * h["vel"]["x"])
    np.testing.assert_array_equal(r["pos"]["y"], h["pos"]["y"] + dt * vy)
    np.testing.assert_array_equal(r["id"], h["id"])
    np.testing.assert_array_equal(r["mass"], h["mass"])


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_mixed_fields_every_width(dev: str) -> None:
    d = az.device(dev)
    n = 100
    h = np.zeros(n, K.Mixed.dtype)
    h["flag"] = np.arange(n) % 255
    h["h"] = np.linspace(-2, 2, n).astype(np.float16)
    h["big"] = np.arange(n) * 1.5
    h["small"] = (np.arange(n) % 100) - 50
    h["ids"] = np.arange(3 * n).reshape(n, 3)
    out = d.empty(n, K.Mixed)
    K.mixed[az.LaunchConfig.for_num_elems(n, block=128)](d.to_device(h), out)
    r = out.to_host()
    np.testing.assert_array_equal(r["flag"], (h["flag"] + 1).astype(np.uint8))
    np.testing.assert_array_equal(r["h"], h["h"] * np.float16(2))
    np.testing.assert_array_equal(r["big"], h["big"] - 0.5)
    np.testing.assert_array_equal(r["small"], -h["small"])
    np.testing.assert_array_equal(r["ids"][:, :2], h["ids"][:, :2])
    np.testing.assert_array_equal(r["ids"][:, 2], h["ids"][:, 0] + h["ids"][:, 1])


def test_launch_refuses_other_element_types() -> None:
    d = az.device("cpu")
    with pytest.raises(az.ArgumentError):
        K.advance[az.LaunchConfig.for_num_elems(4, block=128)](d.empty(4, K.Mixed), 0.1, d.empty(4, K.Particle))
    with pytest.raises(az.ArgumentError):
        K.advance[az.LaunchConfig.for_num_elems(4, block=128)](d.empty(4, az.f32), 0.1, d.empty(4, K.Particle))


@pytest.mark.parametrize("name", ["advance", "mixed"])
def test_ptx_assembles(name: str) -> None:
    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    ck = getattr(K, name).compile("sm_90")
    run_ptxas(ck.ptx, "sm_90")
    assert "ld.global.nc" in ck.ptx  # the input's fields: read-only loads


@pytest.mark.parametrize("dev", ["cpu", "debug"])
def test_record_by_value(dev: str) -> None:
    d = az.device(dev)
    x = np.arange(10, dtype=np.float32)
    o = d.empty(10, az.f32)
    cfg = az.LaunchConfig.for_num_elems(10, block=128)
    K.apply[cfg](K.Params(scale=2.0, shift=(1.0, 0.5), n=3), d.to_device(x), o)
    np.testing.assert_array_equal(o.to_host(), x * 2 + np.float32(0.5) + 3)
    h = np.zeros(1, K.Params.dtype)  # a NumPy structured scalar works too
    h[0]["scale"], h[0]["n"] = 3, 1
    K.apply[cfg](h[0], d.to_device(x), o)
    np.testing.assert_array_equal(o.to_host(), x * 3 + 1)

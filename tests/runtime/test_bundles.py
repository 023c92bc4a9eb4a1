"""Bundles: one parameter of slices with their own roles, launched as one object; the alias
check between fields and with other arguments, `requires` across fields, a helper taking the
bundle, and the same code as separate slice parameters."""

from __future__ import annotations

import numpy as np
import pytest

import anodize as az
from anodize.codegen.gpu.ptx import find_ptxas

import rt_bundle_kernels as K

N = 1000


def _state(dev: az.Device, rng: np.random.Generator) -> tuple[K.State, np.ndarray, np.ndarray]:
    pos = rng.standard_normal(N).astype(np.float32)
    vel = rng.standard_normal(N).astype(np.float32)
    s = K.State(pos=dev.to_device(pos), vel=dev.to_device(vel), out=dev.empty(N, az.f32), hits=dev.zeros(1, az.u32))
    return s, pos, vel


@pytest.mark.parametrize("name", ["cpu", "debug"])
def test_bundle_matches_numpy_and_separate_slices(name: str) -> None:
    dev = az.device(name)
    s, pos, vel = _state(dev, np.random.default_rng(1))
    cfg = az.LaunchConfig.for_num_elems(N, block=256)
    K.advance[cfg](s, 0.5)
    want = pos + np.float32(0.5) * vel
    np.testing.assert_array_equal(s.out.to_host(), want)
    assert s.hits.to_host()[0] == (want < 0).sum()
    s2 = K.State(pos=s.pos, vel=s.vel, out=dev.empty(N, az.f32), hits=dev.zeros(1, az.u32))
    K.advance_helper[cfg](s2, 0.5)
    np.testing.assert_array_equal(s2.out.to_host(), want)
    assert s2.hits.to_host()[0] == (want < 0).sum()
    out2, hits2 = dev.empty(N, az.f32), dev.zeros(1, az.u32)
    K.advance_separate[cfg](s.pos, s.vel, out2, hits2, 0.5)
    np.testing.assert_array_equal(out2.to_host(), want)
    assert hits2.to_host()[0] == s.hits.to_host()[0]


def test_two_fields_aliasing_one_buffer_are_refused() -> None:
    dev = az.device("cpu")
    a = dev.to_device(np.zeros(N, np.float32))
    s = K.State(pos=a, vel=dev.zeros(N, az.f32), out=a, hits=dev.zeros(1, az.u32))
    with pytest.raises(az.AliasingError, match="s.out"):
        K.advance[az.LaunchConfig.for_num_elems(N, block=256)](s, 0.5)
    s = K.State(pos=dev.zeros(N, az.f32), vel=a, out=a[:], hits=dev.zeros(1, az.u32))  # a view of it
    with pytest.raises(az.AliasingError):
        K.advance[az.LaunchConfig.for_num_elems(N, block=256)](s, 0.5)


def test_requires_relates_fields() -> None:
    dev = az.device("cpu")
    s = K.State(pos=dev.zeros(N - 1, az.f32), vel=dev.zeros(N, az.f32), out=dev.empty(N, az.f32), hits=dev.zeros(1, az.u32))
    with pytest.raises(az.ContractViolation, match=r"len\(s.pos\) == len\(s.out\)"):
        K.advance[az.LaunchConfig.for_num_elems(N, block=256)](s, 0.5)


def test_bundle_parameters_are_the_fields() -> None:
    from anodize.language.typer import build_ir

    k = build_ir(K.advance)
    assert [(p.name, p.slice_kind.name if p.slice_kind else p.scalar.name) for p in k.params] == [
        ("s.pos", "Slice"), ("s.vel", "Slice"), ("s.out", "DisjointSlice"), ("s.hits", "AtomicSlice"), ("dt", "f32"),
    ]


def test_ptx_of_bundle_equals_separate_slices() -> None:
    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    a, b = K.advance.compile("sm_90"), K.advance_separate.compile("sm_90")
    body = lambda ptx: [ln.split("//")[0].split()[0] for ln in ptx.splitlines() if ln.strip().startswith(("ld.", "st.", "atom.", "red."))]  # noqa: E731
    assert body(a.ptx) == body(b.ptx)  # the same accesses: a bundle costs nothing in the kernel
    assert a.resources.registers == b.resources.registers

"""Record slices with an aligned base (codegen/llvm/record_align.py): which kernels get the
aligned copy, its vector accesses in the PTX (ptxas accepts them), and the same results on the
CPU backend (`compile_cpu(align_records=True)`, the GPU's two copies) whether each base is
aligned (the aligned copy) or not (the scalar copy)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import cg_records as K
import numpy as np
import pytest
from cg_helpers import run_cpu

import anodize as az
from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.codegen.llvm.record_align import aligned_records
from anodize.codegen.toolchain import find_ptxas
from anodize.language.typer import build_ir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import particles  # noqa: E402


def at_byte(n: int, dtype: Any, skew: int) -> np.ndarray:
    """A zeroed structured array whose data starts `skew` bytes past a 64-byte boundary."""
    item = np.dtype(dtype).itemsize
    raw = np.zeros(n * item + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + skew
    out = raw[start : start + n * item].view(dtype)
    assert out.ctypes.data % 64 == skew
    return out


def test_which_slices_are_versioned() -> None:
    assert aligned_records(build_ir(particles.particle_step)) == {"p": 16, "out": 16}  # 32 bytes
    assert aligned_records(build_ir(K.scale6)) == {"a": 8, "o": 8}  # 24 bytes: 8-byte aligned
    assert aligned_records(build_ir(K.scale6_gs)) == {"a": 8, "o": 8}
    assert aligned_records(build_ir(K.heads)) == {"a": 8}  # the f32 output gains nothing
    assert aligned_records(build_ir(K.swap)) == {}  # 12 bytes: nothing beyond the fields' 4
    assert aligned_records(build_ir(K.staged)) == {}  # a barrier: one copy of the body


def test_particle_step_moves_whole_records_in_16_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The aligned copy: two 16-byte loads and two 16-byte stores per 32-byte record; the scalar
    copy (a view starting 4 bytes past a 16-byte boundary): eight of each, 4 bytes wide.  (The
    warp's copy, tests/codegen/test_record_warp.py, is off here: it adds two of each.)"""
    monkeypatch.setenv("ANODIZE_RECORD_WARP", "0")
    ptx = compile_gpu(particles.particle_step, ptxas=find_ptxas() is not None).ptx
    assert ptx.count("ld.global.nc.v4.b32") == 2
    assert ptx.count("st.global.v4.b32") == 2
    assert ptx.count("ld.global.nc.b32") == 8
    assert ptx.count("st.global.b32") == 8
    assert "and.b64" in ptx and "15;" in ptx  # the runtime test of both bases


@pytest.mark.parametrize("name", ["scale6", "scale6_gs"])
def test_eight_byte_multiples_use_v2(name: str) -> None:
    ptx = compile_gpu(getattr(K, name), ptxas=find_ptxas() is not None).ptx
    assert ptx.count("ld.global.nc.v2.b32") == 3 and ptx.count("st.global.v2.b32") == 3
    assert ptx.count("ld.global.nc.b32") == 6 and ptx.count("st.global.b32") == 6
    heads = compile_gpu(K.heads, ptxas=find_ptxas() is not None).ptx
    assert heads.count("ld.global.nc.v2.b32") == 1, "adjacent fields read through a helper: one load"


def test_the_cpu_backend_keeps_one_copy_unless_asked() -> None:
    assert "rec.aligned" not in compile_cpu(particles.particle_step).llvm_ir
    assert "rec.aligned" in compile_cpu(particles.particle_step, align_records=True).llvm_ir


def test_the_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_RECORD_ALIGN", "0")
    ptx = compile_gpu(particles.particle_step, ptxas=False).ptx
    assert "v4.b32" not in ptx and ptx.count("ld.global.nc.b32") == 8


def test_a_kernel_with_a_barrier_keeps_one_copy() -> None:
    ptx = compile_gpu(K.staged, ptxas=False).ptx
    assert "v2.b32" not in ptx and ptx.count("ld.global.nc.b32") == 1


@pytest.mark.parametrize("skew_in,skew_out", [(0, 0), (4, 0), (0, 4), (8, 24), (12, 16), (36, 4)])
def test_particle_step_on_aligned_and_misaligned_views(skew_in: int, skew_out: int) -> None:
    """Both copies give NumPy's result: a base 4, 8 or 12 bytes off a 16-byte boundary takes
    the scalar copy, and a mixed pair too (one base aligned, the other not)."""
    n = 1001
    rng = np.random.default_rng(5)
    h = at_byte(n, particles.Particle.dtype, skew_in)
    h["pos"] = rng.random((n, 3), dtype=np.float32)
    h["vel"] = rng.standard_normal((n, 3), dtype=np.float32)
    h["mass"] = rng.random(n, dtype=np.float32)
    h["bounces"] = rng.integers(0, 5, n)
    out = at_byte(n, particles.Particle.dtype, skew_out)
    dt = np.float32(0.05)
    ck = compile_cpu(particles.particle_step, align_records=True)
    assert run_cpu(ck, ((n + 255) // 256,), (256,), h, dt, out).count == 0
    ref = particles.reference(h, dt)
    for name in particles.Particle.dtype.names:
        np.testing.assert_array_equal(out[name], ref[name])


@pytest.mark.parametrize("name,options", [("scale6", {}), ("scale6_gs", {}), ("scale6_gs", {"vector_grid_stride": True})])
@pytest.mark.parametrize("skew", [0, 4, 8, 20])
def test_eight_byte_aligned_records_on_every_base(skew: int, name: str, options: dict[str, bool]) -> None:
    n = 77
    a = at_byte(n, K.Six.dtype, skew)
    a["a"] = np.arange(4 * n, dtype=np.float32).reshape(n, 4)
    a["w"] = np.float32(0.5) + np.arange(n, dtype=np.float32)
    a["n"] = np.arange(n)
    o = at_byte(n, K.Six.dtype, (skew + 4) % 32)
    grid = (1,) if name == "scale6_gs" else (2,)  # the grid-stride loop: 64 threads for 77 records
    assert run_cpu(compile_cpu(getattr(K, name), align_records=True, **options), grid, (64,), a, o).count == 0
    np.testing.assert_array_equal(o["a"], a["a"] * a["w"][:, None])
    np.testing.assert_array_equal(o["w"], a["w"])
    np.testing.assert_array_equal(o["n"], a["n"] + 1)
    if name != "scale6":
        return
    f = np.zeros(n, np.float32)
    assert run_cpu(compile_cpu(K.heads, align_records=True), (2,), (64,), a, f).count == 0
    np.testing.assert_array_equal(f, a["a"][:, 0] + a["a"][:, 1])


def skewed(dev: Any, n: int, skew: int) -> Any:
    """A record Buffer of `n` particles starting `skew` bytes into an allocation, as a foreign
    array (CuPy, PyTorch) may: legal for a record of 4-byte fields, not 16-byte aligned."""
    from anodize.runtime.buffer import Buffer

    whole = dev.zeros(n + 1, particles.Particle)
    return Buffer(dev, whole._ptr + skew, (n,), whole._scalar, whole)


@pytest.mark.parametrize("where", ["cpu", pytest.param(0, marks=pytest.mark.gpu)])
@pytest.mark.parametrize("skew_in,skew_out", [(0, 0), (4, 0), (0, 12), (8, 24)])
def test_particle_step_on_skewed_buffers(where: Any, skew_in: int, skew_out: int) -> None:
    """The launch path: on the GPU an aligned pair takes the aligned copy, a skewed one the
    scalar copy; both give NumPy's result."""
    dev = az.device(where)
    n = (1 << 16) + 3
    rng = np.random.default_rng(7)
    h = np.zeros(n, particles.Particle.dtype)
    h["pos"] = rng.random((n, 3), dtype=np.float32)
    h["vel"] = rng.standard_normal((n, 3), dtype=np.float32)
    h["bounces"] = rng.integers(0, 5, n)
    a, b = skewed(dev, n, skew_in), skewed(dev, n, skew_out)
    assert a._ptr % 16 == skew_in % 16
    a.copy_from(h)
    dt = np.float32(0.05)
    particles.particle_step[az.LaunchConfig.for_num_elems(n, block=256)](a, dt, b)
    got, ref = b.to_host(), particles.reference(h, dt)
    for name in particles.Particle.dtype.names:
        np.testing.assert_array_equal(got[name], ref[name])

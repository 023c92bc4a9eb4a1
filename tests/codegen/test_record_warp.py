"""Whole warps of records moved lane-contiguously (codegen/llvm/record_warp.py): the transpose's
index arithmetic on every lane, which kernels and slices it plans, its PTX (ptxas accepts it),
and on the GPU the same results as NumPy's with it on, for full and partial warps and bases
that take the other copies."""

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
from anodize.codegen.llvm import record_warp as RW
from anodize.codegen.llvm.record_align import aligned_records
from anodize.codegen.toolchain import find_ptxas
from anodize.language.typer import build_ir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import particles  # noqa: E402


@pytest.fixture
def warp_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_RECORD_WARP", "1")
    monkeypatch.setenv("ANODIZE_CACHE", "off")


@pytest.mark.parametrize("k", [2, 4])
def test_the_transpose_hands_every_lane_its_record_and_back(k: int) -> None:
    """Row j of the warp's 32 * k chunks is lane-contiguous (chunk 32 j + lane); after the k load
    rounds lane r holds chunks r k .. r k + k - 1, and the k store rounds put chunk 32 j + s
    in lane s's row j."""
    lanes = range(RW.WARP)
    for r in lanes:
        got = {}
        for p in range(k):
            src = RW.load_source(r, p, k)
            row = RW.load_row(src, p, k)
            got[RW.load_chunk(r, p, k)] = RW.WARP * row + src  # the chunk id the source sent
        assert got == {h: r * k + h for h in range(k)}
    for s in lanes:
        rows = {}
        for p in range(k):
            r = RW.store_source(s, p, k)
            rows[RW.store_row(s, p, k)] = r * k + RW.store_chunk(r, p, k)
        assert rows == {j: RW.WARP * j + s for j in range(k)}
    for p in range(k):  # one send and one receive per lane and round
        assert sorted(RW.load_source(r, p, k) for r in lanes) == list(lanes)
        assert sorted(RW.store_source(s, p, k) for s in lanes) == list(lanes)


def test_which_slices_the_warp_moves(warp_on: None) -> None:
    def plan(kern: Any) -> Any:
        k = build_ir(kern)
        return RW.warp_plan(k, aligned_records(k))

    p = plan(particles.particle_step)
    assert (p.reads, p.writes, p.checked) == ({"p": 2}, {"out": 2}, ["out", "p"])
    p = plan(K.wide_step)
    assert (p.reads, p.writes) == ({"a": 4}, {"o": 4})  # written whole on both arms
    p = plan(K.wide_partial)
    assert (p.reads, p.writes) == ({"a": 4}, {})  # some bytes left: each lane stores its fields
    assert plan(K.wide_head) is None  # chunks 2 and 3 unread: the lanes' own loads move less
    assert plan(K.scale6) is None  # 24 bytes
    assert plan(K.heads) is None  # a helper takes the slice
    assert plan(K.staged) is None  # a barrier


def test_the_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_RECORD_WARP", "0")
    k = build_ir(particles.particle_step)
    assert RW.warp_plan(k, aligned_records(k)) is None
    assert "shfl" not in compile_gpu(particles.particle_step, ptxas=False).ptx


def test_particle_step_ptx(warp_on: None) -> None:
    """The warp's copy: two lane-contiguous 16-byte loads (512 bytes apart) and stores, 8 shuffles
    each way; the aligned and scalar copies as before; no spills."""
    c = compile_gpu(particles.particle_step, ptxas=find_ptxas() is not None)
    ptx = c.ptx
    assert ptx.count("shfl.sync.idx.b32") == 16
    assert ptx.count("ld.global.nc.v4.b32") == 4 and ptx.count("st.global.v4.b32") == 4
    assert "+512]" in ptx
    assert ptx.count("ld.global.nc.b32") == 8 and ptx.count("st.global.b32") == 8
    if c.resources is not None:
        assert c.resources.spill_stores == 0


def test_wide_record_ptx(warp_on: None) -> None:
    ptx = compile_gpu(K.wide_step, ptxas=find_ptxas() is not None).ptx
    assert ptx.count("shfl.sync.idx.b32") == 32  # 4 rounds of 4 words, each way
    assert "+1536]" in ptx  # row 3: 3 x 512 bytes on



def test_an_output_read_after_its_write_is_stored_by_its_lane(warp_on: None) -> None:
    """`o[i].t = o[i].t * 2.0` reads the record the lane wrote: the warp's stores (after the body)
    would leave that read to see memory before the write, so `o` is not the warp's to store."""
    k = build_ir(K.wide_read_back)
    p = RW.warp_plan(k, aligned_records(k))
    assert (p.reads, p.writes) == ({"a": 4}, {})
    assert compile_gpu(K.wide_read_back, ptxas=False).ptx.count("shfl.sync.idx.b32") == 16  # the loads' rounds only


def test_only_blocks_of_whole_warps_take_the_warps_copy(warp_on: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """shfl.sync names all 32 lanes: a block of 48 threads (its second warp half empty) never
    shuffles; a kernel of any block tests `ntid.x % 32 == 0` and `ntid.y == ntid.z == 1` at run
    time, and each slice's extent against the warp's end in 64 bits (no i32 wrap at large n)."""
    assert "shfl" not in compile_gpu(K.wide_copy48, ptxas=False).ptx
    ptx = compile_gpu(K.wide_copy, ptxas=find_ptxas() is not None).ptx
    first = ptx.index("shfl.sync")
    before = ptx[:first]
    assert "%ntid.x" in before and ("%ntid.y" in before or "%ntid.z" in before)
    assert sum(1 for line in before.splitlines() if "setp.le.u64" in line) == 2  # a's and o's extents
    monkeypatch.setenv("ANODIZE_RECORD_WARP", "0")
    off = compile_gpu(K.wide_copy, ptxas=False).ptx
    assert "shfl" not in off and "%ntid.y" not in off and "%ntid.z" not in off


def wide_input(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = np.zeros(n, K.Wide.dtype)
    a["t"] = rng.standard_normal(n)
    a["v"] = rng.standard_normal((n, 4))
    a["n"] = rng.integers(-5, 5, n)
    a["s"] = rng.integers(-300, 300, (n, 2))
    a["b"] = rng.integers(0, 255, (n, 4))
    a["w"] = rng.standard_normal((n, 6))
    return a


def wide_reference(a: np.ndarray) -> np.ndarray:
    o = a.copy()
    even = a["n"] % 2 == 0
    o["t"] = np.where(even, a["t"] * 2.0, -a["t"])
    o["v"][even] = a["v"][even][:, [1, 0, 3, 2]]
    o["n"][even] = a["n"][even] + 1
    o["s"][even] = a["s"][even][:, ::-1]
    o["b"][even] = a["b"][even][:, ::-1]
    o["w"][even] = a["w"][even][:, ::-1]
    return o


def partial_reference(a: np.ndarray) -> np.ndarray:
    o = np.zeros(len(a), K.Wide.dtype)
    o["t"] = a["t"] + a["w"][:, 5].astype(np.float64) + a["w"][:, 1].astype(np.float64)
    o["n"] = np.where(a["n"] > 0, a["n"], 0)
    return o


def test_wide_step_on_the_cpu() -> None:
    """The kernel and its NumPy reference agree (the GPU test below runs the warp's copy)."""
    a = wide_input(100)
    o = np.zeros(100, K.Wide.dtype)
    assert run_cpu(compile_cpu(K.wide_step), (2,), (64,), a, o).count == 0
    np.testing.assert_array_equal(o.view(np.uint8), wide_reference(a).view(np.uint8))
    o = np.zeros(100, K.Wide.dtype)
    assert run_cpu(compile_cpu(K.wide_partial), (2,), (64,), a, o).count == 0
    np.testing.assert_array_equal(o.view(np.uint8), partial_reference(a).view(np.uint8))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [(1 << 16) + 3, 4096, 31])
def test_gpu_particle_step_by_warps(warp_on: None, n: int) -> None:
    from test_record_align import skewed

    dev = az.device(0)
    rng = np.random.default_rng(7)
    h = np.zeros(n, particles.Particle.dtype)
    h["pos"] = rng.random((n, 3), dtype=np.float32)
    h["vel"] = rng.standard_normal((n, 3), dtype=np.float32)
    h["vel"][::5, 1] = -50.0
    h["bounces"] = rng.integers(0, 5, n)
    dt = np.float32(0.05)
    ref = particles.reference(h, dt)
    for skew_in, skew_out in ((0, 0), (4, 0), (0, 12)):
        a, b = skewed(dev, n, skew_in), skewed(dev, n, skew_out)
        a.copy_from(h)
        particles.particle_step[az.LaunchConfig.for_num_elems(n, block=256)](a, dt, b)
        got = b.to_host()
        for name in particles.Particle.dtype.names:
            np.testing.assert_array_equal(got[name], ref[name])


@pytest.mark.gpu
@pytest.mark.parametrize("n", [(1 << 14) + 17, 64])
def test_gpu_wide_records_by_warps(warp_on: None, n: int) -> None:
    dev = az.device(0)
    a = wide_input(n, seed=n)
    da, do = dev.to_device(a), dev.zeros(n, K.Wide)
    cfg = az.LaunchConfig.for_num_elems(n, block=64)
    K.wide_step[cfg](da, do)
    np.testing.assert_array_equal(do.to_host().view(np.uint8), wide_reference(a).view(np.uint8))
    do2 = dev.zeros(n, K.Wide)
    K.wide_partial[cfg](da, do2)
    np.testing.assert_array_equal(do2.to_host().view(np.uint8), partial_reference(a).view(np.uint8))

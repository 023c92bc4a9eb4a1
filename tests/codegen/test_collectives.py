"""Safe collectives and block witnesses, run on the threaded CPU backend against NumPy
(each test also has a GPU twin, marked `gpu`)."""

from __future__ import annotations

import cg_collectives as K
import numpy as np
import pytest

import anodize as az

TYPES = [np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64]


def _devices() -> list[object]:
    return [pytest.param("cpu", id="cpu"), pytest.param("gpu", id="gpu", marks=pytest.mark.gpu)]


def _dev(kind: str) -> az.Device:
    return az.device("cpu") if kind == "cpu" else az.device()


def _blocks(a: np.ndarray, size: int) -> np.ndarray:
    return a.reshape(-1, size)


# signed and unsigned, 32- and 64-bit, both floats by default; int64 and uint32 under -m slow
@pytest.mark.parametrize("kind", _devices())
@pytest.mark.parametrize(
    "dtype", [pytest.param(t, marks=pytest.mark.slow) if t in (np.int64, np.uint32) else t for t in TYPES], ids=lambda t: np.dtype(t).name
)
def test_reduce_scan_broadcast_every_type(kind: str, dtype: type) -> None:
    dev = _dev(kind)
    n, bs = 192, 96
    rng = np.random.default_rng(5)
    a = rng.integers(0, 50, n).astype(dtype)
    if np.dtype(dtype).kind == "i":
        a = (a - 25).astype(dtype)
    if np.dtype(dtype).kind == "f":
        a = (rng.random(n) * 8 - 4).astype(dtype)
    outs = [dev.zeros(n, a.dtype) for _ in range(9)]
    K.numeric[az.LaunchConfig(grid=2, block=bs)](dev.to_device(a), *outs)
    rsum, rmax, rmin, incl, excl, exmax, exmin, wmax, bc = (o.to_host() for o in outs)
    blk = _blocks(a, bs)
    rep = lambda v: np.repeat(v, bs)  # noqa: E731
    if a.dtype.kind == "f":
        np.testing.assert_allclose(rsum, rep(blk.sum(1, dtype=np.float64)), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(incl, np.cumsum(blk, 1, dtype=np.float64).ravel(), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(excl, (np.cumsum(blk, 1, dtype=np.float64) - blk).ravel(), rtol=1e-5, atol=1e-4)
        lowest, highest = -np.inf, np.inf
    else:
        assert np.array_equal(rsum, rep(blk.sum(1, dtype=a.dtype)))
        assert np.array_equal(incl, np.cumsum(blk, 1, dtype=a.dtype).ravel())
        assert np.array_equal(excl, (np.cumsum(blk, 1, dtype=a.dtype) - blk).ravel())
        lowest, highest = np.iinfo(a.dtype).min, np.iinfo(a.dtype).max
    # every thread of a block gets the bit-identical total
    assert all(len(set(r.tobytes() for r in np.split(rsum[k * bs : (k + 1) * bs], bs))) == 1 for k in range(2))
    assert np.array_equal(rmax, rep(blk.max(1)))
    assert np.array_equal(rmin, rep(blk.min(1)))
    ex_max = np.concatenate([np.full((2, 1), lowest, a.dtype), np.maximum.accumulate(blk, 1)[:, :-1]], 1)
    assert np.array_equal(exmax, ex_max.ravel())
    assert np.array_equal(exmin, np.minimum.accumulate(blk, 1).ravel())
    assert np.array_equal(wmax, np.repeat(a.reshape(-1, 32).max(1), 32))
    assert np.array_equal(bc, rep(blk[:, 37]))
    del highest


@pytest.mark.parametrize("kind", _devices())
@pytest.mark.parametrize("dtype", [np.int32, np.uint64], ids=lambda t: np.dtype(t).name)
def test_bitwise_and_or(kind: str, dtype: type) -> None:
    dev = _dev(kind)
    n = 128
    a = np.random.default_rng(1).integers(0, 1 << 12, n).astype(dtype) | dtype(0x100)
    outs = [dev.zeros(n, a.dtype) for _ in range(4)]
    K.bitwise[az.LaunchConfig(grid=2, block=64)](dev.to_device(a), *outs)
    rand, ror, sor, wand = (o.to_host() for o in outs)
    blk = _blocks(a, 64)
    assert np.array_equal(rand, np.repeat(np.bitwise_and.reduce(blk, 1), 64))
    assert np.array_equal(ror, np.repeat(np.bitwise_or.reduce(blk, 1), 64))
    ex = np.concatenate([np.zeros((2, 1), a.dtype), np.bitwise_or.accumulate(blk, 1)[:, :-1]], 1)
    assert np.array_equal(sor, ex.ravel())
    assert np.array_equal(wand, np.repeat(np.bitwise_and.reduce(a.reshape(-1, 32), 1), 32))


@pytest.mark.parametrize("kind", _devices())
def test_bools(kind: str) -> None:
    dev = _dev(kind)
    a = np.zeros(128, np.int32)
    a[70] = 1  # block 1 has one true value; block 0 none
    a[3] = 0
    a[64:] += 1  # block 1: all true
    outs = [dev.zeros(128, az.bool_) for _ in range(4)]
    K.bools[az.LaunchConfig(grid=2, block=64)](dev.to_device(a), *outs)
    anyv, allv, seen, src = (o.to_host() for o in outs)
    f = (a > 0).reshape(2, 64)
    assert np.array_equal(anyv, np.repeat(f.any(1), 64))
    assert np.array_equal(allv, np.repeat(f.all(1), 64))
    assert np.array_equal(seen, np.logical_or.accumulate(f, 1).ravel())
    assert np.array_equal(src, np.repeat(f[:, 3], 64))


@pytest.mark.parametrize("kind", _devices())
def test_two_dimensional_block_numbers_threads_x_fastest(kind: str) -> None:
    dev = _dev(kind)
    a = np.random.default_rng(2).integers(0, 9, (8, 32)).astype(np.float32)  # grid (2, 1) of 16 x 8 blocks
    tot, pre = dev.zeros((8, 32), az.f32), dev.zeros((8, 32), az.f32)
    K.block2d[az.LaunchConfig(grid=(2, 1), block=(16, 8))](dev.to_device(a), tot, pre)
    for bx in range(2):
        blk = a[:, 16 * bx : 16 * (bx + 1)]
        assert np.all(tot.to_host()[:, 16 * bx : 16 * (bx + 1)] == blk.sum())
        want = np.cumsum(blk.ravel()).reshape(8, 16)
        assert np.array_equal(pre.to_host()[:, 16 * bx : 16 * (bx + 1)], want)


@pytest.mark.parametrize("kind", _devices())
def test_scratch_apart_from_user_shared_memory(kind: str) -> None:
    dev = _dev(kind)
    a = np.arange(128, dtype=np.float32)
    out = dev.zeros(128, az.f32)
    K.with_user_shared[az.LaunchConfig(grid=2, block=64)](dev.to_device(a), out)
    assert np.array_equal(out.to_host(), np.repeat(a.reshape(2, 64).sum(1), 64) + a)


@pytest.mark.parametrize("kind", _devices())
def test_block_witness_one_element_per_block(kind: str) -> None:
    dev = _dev(kind)
    x = np.random.default_rng(4).random(5000, dtype=np.float32)
    partial = dev.zeros(7, az.f32)
    K.block_partials[az.LaunchConfig(grid=7, block=128)](dev.to_device(x), partial)
    p = partial.to_host()
    assert abs(float(p.sum()) - float(x.astype(np.float64).sum())) < 1e-2
    # block b's grid-stride share, reduced on the host
    idx = np.arange(5000)
    owners = (idx % (7 * 128)) // 128
    np.testing.assert_allclose(p, [x[owners == b].astype(np.float64).sum() for b in range(7)], rtol=1e-5)


@pytest.mark.parametrize("kind", _devices())
def test_block_witness_fails_closed_on_a_2d_grid(kind: str) -> None:
    dev = _dev(kind)
    partial = dev.zeros(4, az.i64)
    K.leader_no_contract.unsafe_launch(az.LaunchConfig(grid=4, block=32), partial)
    assert np.array_equal(partial.to_host(), [1, 2, 3, 4])
    partial = dev.zeros(4, az.i64)
    with pytest.raises(az.KernelFault):
        K.leader_no_contract.unsafe_launch(az.LaunchConfig(grid=(2, 2), block=32), partial)
        partial.to_host()
    assert np.array_equal(partial.to_host(), [0, 0, 0, 0])  # no block wrote anything


def test_block_witness_contract_refuses_a_2d_grid_at_launch() -> None:
    dev = az.device("cpu")
    with pytest.raises((az.LaunchError, az.ContractViolation)):
        K.block_partials[az.LaunchConfig(grid=(2, 2), block=128)](dev.zeros(8, az.f32), dev.zeros(4, az.f32))


@pytest.mark.parametrize("kind", _devices())
def test_collectives_back_to_back_and_in_a_loop(kind: str) -> None:
    """Eleven block collectives in a row (a loop of two, then two more): each sees its own
    round's values (the GPU alternates scratch halves with one barrier a collective)."""
    dev = _dev(kind)
    a = np.random.default_rng(5).integers(0, 7, 1000).astype(np.float32)
    out = dev.zeros(1000, az.f32)
    K.rounds[az.LaunchConfig.for_num_elems(1000, block=256)](dev.to_device(a), out, 5)
    pad = np.zeros(1024, np.float32)
    pad[:1000] = a
    want = np.zeros(1024, np.float32)
    for blk in range(4):
        x = pad[256 * blk : 256 * (blk + 1)]
        acc = np.float32(0)
        for k in range(5):
            acc += (x + k).sum(dtype=np.float32) - (x * k).max()
        want[256 * blk : 256 * (blk + 1)] = acc + x[3] + np.cumsum(x, dtype=np.float32)
    np.testing.assert_allclose(out.to_host(), want[:1000], rtol=1e-6)


def test_gpu_collectives_take_one_barrier_each() -> None:
    from anodize.codegen.driver import compile_gpu

    ptx = compile_gpu(K.rounds, "sm_90", ptxas=False).ptx
    assert ptx.count("bar.sync") == 4  # the loop's two reductions, the broadcast, the scan


@pytest.mark.parametrize("kind", _devices())
def test_eight_warp_block_min_max(kind: str) -> None:
    """256-thread blocks (8 warps): every thread's value counts in `min`/`max` (the CPU backend
    once skipped threads 160-255 on AVX-512 hosts: tests/codegen/test_cpu_isa.py)."""
    dev = _dev(kind)
    n, bs = 256 * 8, 256
    a = (np.random.default_rng(11).random(n) * 100).astype(np.float32)
    outs = [dev.zeros(n, az.f32) for _ in range(4)]
    K.wide[az.LaunchConfig(grid=n // bs, block=bs)](dev.to_device(a), *outs)
    rmax, rmin, _, scan = (o.to_host().reshape(-1, bs) for o in outs)
    blk = _blocks(a, bs)
    assert np.array_equal(rmax, np.repeat(blk.max(1, keepdims=True), bs, 1))
    assert np.array_equal(rmin, np.repeat(blk.min(1, keepdims=True), bs, 1))
    assert np.array_equal(scan, np.maximum.accumulate(blk, 1))

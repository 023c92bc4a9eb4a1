"""The CPU backend's split at barriers (codegen/cpu/split.py, codegen/cpu/regions.py): one host thread
per block, looping over the block's threads between synchronisation points.

Each kernel runs on the region backend and on the one-host-thread-per-GPU-thread runner
(`split_barriers=False`), which must agree bit for bit, and against NumPy where the
expected values are simple to state."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import cg_collectives as C
import cg_regions as K
import numpy as np
import pytest
from cg_helpers import Fault, compiled_cpu, rng, run_cpu

from anodize.codegen.cpu.engine import RegionModule
from anodize.codegen.cpu.split import Unsplittable, plan_kernel
from anodize.codegen.driver import compile_cpu
from anodize.language.typer import build_ir

ROOT = Path(__file__).resolve().parents[2]


def both(kernel: Any, grid: tuple[int, ...], block: tuple[int, ...], *args: Any, **kw: Any) -> tuple[list[np.ndarray], Fault]:
    """Run on both CPU backends over copies of `args`; assert they agree; the region run's arrays."""
    results = []
    for split in (True, False):
        ck = compiled_cpu(kernel, split_barriers=split)
        assert isinstance(ck.cpu_entry, RegionModule) == split
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        f = run_cpu(ck, grid, block, *copies, **kw)
        results.append(([c for c in copies if isinstance(c, np.ndarray)], f))
    (ra, rf), (ta, tf) = results
    for a, b in zip(ra, ta, strict=True):
        np.testing.assert_array_equal(a, b)
    assert (rf.count, rf.site) == (tf.count, tf.site)
    return ra, rf


def test_values_live_across_barriers_and_shared_slots_of_other_threads() -> None:
    x = rng().random(200, dtype=np.float32)
    (_, out), f = both(K.carry, (4,), (64,), x, np.zeros(200, np.float32))
    assert f.count == 0
    xp = np.concatenate([x, np.zeros(56, np.float32)]).reshape(4, 64)
    t = np.arange(64, dtype=np.float32)
    v = xp * np.float32(3.0) + t
    w = v[:, (np.arange(64) + 1) % 64]
    u = (w * np.float32(2.0))[:, 63 - np.arange(64)]
    np.testing.assert_array_equal(out, (v + u).ravel()[:200])


@pytest.mark.parametrize("n", [0, 1, 4, 9])
def test_barriers_in_a_uniform_loop_with_continue_and_break(n: int) -> None:
    x = rng().random(96, dtype=np.float32)
    (_, out), f = both(K.rounds, (3,), (32,), x, np.zeros(96, np.float32), n)
    assert f.count == 0
    acc = x.reshape(3, 32).copy()
    for r in range(min(n, 5)):
        tile = acc.copy()
        if r % 2 == 1:
            continue
        acc = acc + tile[:, (np.arange(32) + r + 1) % 32]
    np.testing.assert_array_equal(out, acc.ravel())


def test_tree_reduction_in_a_uniform_while() -> None:
    x = rng().random(256, dtype=np.float32)
    (_, out), f = both(K.halving, (4,), (64,), x, np.zeros(256, np.float32))
    assert f.count == 0
    red = x.reshape(4, 64).copy()
    s = 32
    while s:
        red[:, :s] += red[:, s : 2 * s]
        s //= 2
    np.testing.assert_array_equal(out, np.repeat(red[:, 0], 64))


def test_warp_helper_with_an_early_return_warp_reduce_and_a_vote_loop() -> None:
    x = (rng().random(128, dtype=np.float32) * 6).astype(np.float32)
    (_, out, red), f = both(K.warps, (2,), (64,), x, np.zeros(128, np.float32), np.zeros(128, np.float32))
    assert f.count == 0
    w = x.reshape(4, 32)
    one = w + w[:, np.arange(32) ^ 16]
    full = one.copy()
    for d in (8, 4, 2, 1):
        full = full + full[:, np.arange(32) ^ d]
    expect = np.concatenate([full[:2], one[2:]]).ravel()  # block 1 (warps 2, 3) stops after one round
    np.testing.assert_array_equal(out, expect)
    k = np.ceil(w.max(1)).astype(np.float32)  # the loop runs while some lane's v exceeds k
    r = np.where(np.arange(4) % 2 == 1, w.max(1), 0).astype(np.float32)
    np.testing.assert_array_equal(red, np.repeat(r + k * np.float32(1000.0), 32))


def test_a_fault_inside_a_region_is_recorded_and_the_block_goes_on() -> None:
    x = rng().random(64, dtype=np.float32)
    (_, out), f = both(K.fault_after_barrier, (2,), (32,), x, np.zeros(64, np.float32), 10)
    assert f.count == 10  # threads 54..63 read x[64..73]
    ck = compile_cpu(K.fault_after_barrier)
    site = ck.fault_sites[f.site]
    assert site.kind == "read" and site.param == "x"
    assert (f.index, f.length) == (64, 64)  # the first faulting thread in block order
    v = np.concatenate([x[10:], np.zeros(10, np.float32)])
    np.testing.assert_array_equal(out, v + x.reshape(2, 32)[:, (np.arange(32) + 1) % 32].ravel())


@pytest.mark.parametrize("stop", [0, 1])
def test_uniform_return_before_barriers_and_divergent_returns_after(stop: int) -> None:
    x = rng().random(100, dtype=np.float32)
    (_, out), f = both(K.returns, (2,), (64,), x, np.full(100, -1.0, np.float32), stop)
    assert f.count == 0
    if stop:
        assert (out == -1.0).all()
        return
    xp = np.concatenate([x, np.zeros(28, np.float32)]).reshape(2, 64)
    v = xp[:, (np.arange(64) + 5) % 64].ravel()[:100]
    np.testing.assert_array_equal(out, np.where(np.arange(100) % 2 == 0, v, -1.0).astype(np.float32))


def test_collectives_match_the_threaded_runner_bit_for_bit() -> None:
    a = (rng().random((24, 40)) * 8 - 4).astype(np.float32)
    (_, tot, pre), f = both(C.block2d, (3, 3), (16, 8), a, np.zeros((24, 40), np.float32), np.zeros((24, 40), np.float32))
    assert f.count == 0
    x = rng().random(1000, dtype=np.float32)
    (_, part), f = both(C.block_partials, (6,), (128,), x, np.zeros(6, np.float32))
    np.testing.assert_allclose(part.sum(), x.astype(np.float64).sum(), rtol=1e-5)
    b = rng().integers(-3, 3, 200).astype(np.int32)
    outs = [np.zeros(200, np.bool_) for _ in range(4)]
    (_, anyv, allv, seen, src), f = both(C.bools, (4,), (64,), b, *outs)
    bp = np.concatenate([b, np.zeros(56, np.int32)]).reshape(4, 64) > 0
    np.testing.assert_array_equal(anyv, np.repeat(bp.any(1), 64)[:200])
    np.testing.assert_array_equal(seen, np.logical_or.accumulate(bp, 1).ravel()[:200])
    np.testing.assert_array_equal(src, np.repeat(bp[:, 3], 64)[:200])


def _fixture(name: str) -> Any:
    path = ROOT / "fixtures" / "accept" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_fx_{name}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_warp_uniform_fixture_matches_the_threaded_runner() -> None:
    m = _fixture("warp_uniform")
    a = (rng().random(256) * 2 - 0.5).astype(np.float32)
    for n in (0, 3):
        (_, c), f = both(m.warp_conditions, (2,), (128,), a, np.zeros(256, np.float32), n)
        assert f.count == 0
    (c2,), f = both(m.rows, (2, 2), (32, 4), np.zeros((8, 64), np.float32))
    np.testing.assert_array_equal(c2[2], np.full(64, sum(range(32)), np.float32))  # row 2 of each block: the warp's sum
    (_, c3), f = both(m.after_loop, (2,), (256,), a, np.zeros(512, np.float32))
    assert f.count == 0


def test_collectives_fixture_matches_the_threaded_runner() -> None:
    m = _fixture("collectives")
    a = (rng().random(192) * 4 - 2).astype(np.float32)
    flags = rng().integers(0, 2, 192).astype(np.int32)
    for r in (0, 2):
        (_, _, out), f = both(m.collect, (3,), (64,), a, flags, np.zeros(192, np.float32), r)
        assert f.count == 0


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_warp_operations_in_short_circuit_operands_run_only_where_the_program_runs_them(n: int) -> None:
    x = np.zeros(65, np.float32)
    x[40] = 1.0  # only warp 1 sees a value above 0.5 (and lane 7 of warp 1 with the offset read)
    (_, out), f = both(K.short_circuit, (2,), (64,), x, np.zeros(128, np.float32), n)
    assert f.count == 0  # `x[j + 1]` reads x[64] only when n > 2, and that is in range
    w = np.tile(np.repeat([0.0, 1.0], 32), 2)
    c = w if n > 0 else np.zeros(128)
    d = np.ones(128) if n > 1 else np.ones(128)  # all(x < 2) holds everywhere
    e = np.tile(np.repeat([0.0, float(1 << 7)], 32), 2) if n > 2 else np.full(128, 7.0)
    np.testing.assert_array_equal(out, (c + 10 * d + 100 * e).astype(np.float32))


def test_forms_the_splitter_leaves_to_one_host_thread_per_gpu_thread() -> None:
    with pytest.raises(Unsplittable):
        plan_kernel(build_ir(K.stride_shuffle))
    ck = compile_cpu(K.stride_shuffle)
    assert not isinstance(ck.cpu_entry, RegionModule) and ck.cpu_entry.threaded
    x = rng().random(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    run_cpu(ck, (2,), (64,), x, out)
    np.testing.assert_array_equal(out, x[np.arange(128) ^ 1])


def test_a_block_launched_off_its_contract_is_refused() -> None:
    ck = compile_cpu(K.carry)
    with pytest.raises(ValueError, match="contract's block"):
        run_cpu(ck, (1,), (32,), np.zeros(32, np.float32), np.zeros(32, np.float32))


def test_a_million_element_block_reduction_takes_milliseconds_not_minutes() -> None:
    """One host thread per GPU thread took about 0.2 s per 256-thread block (minutes here)."""
    x = np.ones(1 << 20, np.float32)
    ck = compile_cpu(C.block_partials)
    part = np.zeros(4096, np.float32)
    run_cpu(ck, (4096,), (128,), x, part)
    t0 = time.perf_counter()
    run_cpu(ck, (4096,), (128,), x, part)
    assert time.perf_counter() - t0 < 5.0
    np.testing.assert_array_equal(part, np.full(4096, 256.0, np.float32))


def test_print_and_assert_after_a_barrier_run_thread_by_thread(capfd: pytest.CaptureFixture[str]) -> None:
    x = np.arange(64, dtype=np.float32)
    x[40] = -1.0  # read by thread 31 - 8 = 23 of block 1
    out = np.zeros(64, np.float32)
    ck = compile_cpu(K.talk)
    f = run_cpu(ck, (2,), (32,), x, out)
    lines = capfd.readouterr().out.splitlines()
    expect = [f"thread {t} sees {x[32 * b + 31 - t]:g}" for b in range(2) for t in (0, 8, 16, 24)]
    assert lines == expect
    assert f.count == 1 and ck.fault_sites[f.site].kind == "assert"
    assert ck.fault_sites[f.site].message == "negative input"
    np.testing.assert_array_equal(out, x.reshape(2, 32)[:, ::-1].ravel())


def test_a_statement_kind_the_splitter_does_not_know_is_left_to_the_threaded_runner() -> None:
    """A compound statement added to the typed IR later, holding a barrier: refused (and so
    run one host thread per GPU thread), never split around blindly."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Later:
        body: tuple
        span: object = None

    k = build_ir(K.carry)
    with pytest.raises(Unsplittable):
        plan_kernel(dataclasses.replace(k, body=(Later(k.body),)))


# ---- GPU twin: the same kernels on the GPU agree with the region backend ---------------------

GPU_CASES = [
    ("carry", (4,), 64, [("x", 200), ("out", 200)], []),
    ("rounds", (3,), 32, [("x", 96), ("out", 96)], [4]),
    ("halving", (4,), 64, [("x", 256), ("out", 256)], []),
    ("warps", (2,), 64, [("x", 128), ("out", 128), ("out", 128)], []),
    ("returns", (2,), 64, [("x", 100), ("out", 100)], [0]),
    ("short_circuit", (2,), 64, [("x", 65), ("out", 128)], [3]),
    ("arrays_across_barriers", (3,), 64, [("x", 150), ("out", 150)], [6]),
]


@pytest.mark.gpu
@pytest.mark.parametrize("name,grid,block,bufs,scalars", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_gpu_agrees_with_the_region_backend(name: str, grid: tuple[int, ...], block: int, bufs: list, scalars: list) -> None:
    import anodize as az

    k = getattr(K, name)
    gen = rng()
    host = [(gen.random(n, dtype=np.float32) * 4).astype(np.float32) if kind == "x" else np.zeros(n, np.float32) for kind, n in bufs]
    results = []
    for dev in (az.device("cpu"), az.device()):
        arrs = [dev.to_device(h) for h in host]
        k[az.LaunchConfig(grid=grid, block=block)](*arrs, *scalars)
        dev.synchronize()
        results.append([a.to_host() for a in arrs])
    assert az.device().kind == "cuda"
    for c, g in zip(*results, strict=True):
        np.testing.assert_allclose(g, c, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [0, 3, 6])
def test_each_thread_has_its_own_local_arrays_across_barriers(n: int) -> None:
    """An `az.local.array` that lives across a barrier is a per-thread slot of the region
    backend's frame (cpu_split.local_arrays), not one alloca the block's threads share."""
    assert set(plan_kernel(build_ir(K.arrays_across_barriers)).arrays) == {"mine", "scratch"}
    x = rng().random(150, dtype=np.float32)
    (_, out), f = both(K.arrays_across_barriers, (3,), (64,), x, np.zeros(150, np.float32), n)
    assert f.count == 0
    xp = np.concatenate([x, np.zeros(42, np.float32)]).reshape(3, 64)
    t = np.arange(64, dtype=np.float32)
    mine = [xp * np.float32(k + 1) + t for k in range(4)]
    s = mine[3][:, (np.arange(64) + 1) % 64]
    for k in range(n):
        s = s + mine[k % 4]
    np.testing.assert_array_equal(out, (s[:, 63 - np.arange(64)] + mine[0]).ravel()[:150])


def test_the_safe_sgemm_runs_on_the_region_backend() -> None:
    """examples/sgemm.py (shared tiles and per-thread register blocks in local arrays) takes the
    region backend: one host thread a block, not one a GPU thread."""
    spec = importlib.util.spec_from_file_location("sgemm_example", ROOT / "examples" / "sgemm.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert isinstance(compile_cpu(mod.sgemm).cpu_entry, RegionModule)
    mod.main(70, 50, 40)  # checks itself against NumPy

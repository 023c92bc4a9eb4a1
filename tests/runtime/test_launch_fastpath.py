"""The launch fast paths (runtime/launch.py): the memo and the quick path keep every check.

A repeated launch first tries the memo (the very objects of the last or the previous
launch), then the plan's quick path (every check, specialised), then the full path.  These
tests establish a memo and a hot plan, then change one thing per launch and expect the
same error the full path raises, and check that the fast paths launch exactly the
arguments the full path would.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import fakecuda
import numpy as np
import pytest
from rt_kernels import fill, scale2d, vecadd

import anodize as az
from anodize import AliasingError, ArgumentError, ContractViolation
from anodize.language.contract import Env, RequiresOverflow, first_violation, parse_requires
from anodize.runtime.device import CpuDevice, Device
from anodize.runtime.requires_fast import compile_requires

N = 256


def _bufs(dev: Device, n: int = N) -> tuple[Any, Any, Any]:
    return (
        dev.to_device(np.arange(n, dtype=np.float32)),
        dev.to_device(np.ones(n, dtype=np.float32)),
        dev.empty(n, az.f32),
    )


def _warm(dev: Device) -> tuple[Any, Any, tuple[Any, Any, Any]]:
    """A launcher with a hot plan and a memo (two launches with the same buffers)."""
    cfg = az.LaunchConfig.for_num_elems(N)
    bufs = _bufs(dev)
    launcher = vecadd[cfg]
    launcher(*bufs)
    launcher(*bufs)
    assert launcher.last_plan is not None
    return cfg, launcher, bufs


def test_last_plan_is_the_plan_the_last_launch_ran(dev: Device) -> None:
    """`Launcher.last_plan`, what anodize/torch.py reads: None before a launch, then the plan of
    the argument types just launched, on their device."""
    launcher = vecadd[az.LaunchConfig.for_num_elems(N)]
    assert launcher.last_plan is None
    launcher(*_bufs(dev))
    plan = launcher.last_plan
    assert plan is not None and plan.device is dev and plan.is_cpu == (dev.kind == "cpu")
    launcher(*_bufs(az.device("cpu", 1)))  # other buffers, another device: the full path plans again
    assert launcher.last_plan is not plan and launcher.last_plan.device is az.device("cpu", 1)


def test_repeated_launch_uses_the_memo_and_computes(dev: Device) -> None:
    cfg, launcher, (a, b, c) = _warm(dev)
    assert launcher._memo is not None and vecadd[cfg] is launcher
    for _ in range(3):
        vecadd[cfg](a, b, c)
    np.testing.assert_array_equal(c.to_host(), np.arange(N, dtype=np.float32) + 1)


def test_fast_path_catches_a_changed_dtype(dev: Device) -> None:
    cfg, launcher, (a, b, c) = _warm(dev)
    wrong = dev.to_device(np.ones(N, dtype=np.float64))
    with pytest.raises(ArgumentError, match=r"parameter `b`: expects elements of f32"):
        vecadd[cfg](a, wrong, c)
    vecadd[cfg](a, b, c)  # and the memo still works afterwards


def test_fast_path_catches_a_changed_rank(dev: Device) -> None:
    cfg, launcher, (a, b, c) = _warm(dev)
    m = dev.to_device(np.ones((16, 16), dtype=np.float32))
    with pytest.raises(ArgumentError, match=r"parameter `a`: expects a 1-D array"):
        vecadd[cfg](m, b, c)


def test_fast_path_catches_a_changed_length(dev: Device) -> None:
    cfg, launcher, (a, b, c) = _warm(dev)
    with pytest.raises(ContractViolation, match=r"`len\(b\) == len\(c\)` violated: left side 255, right side 256"):
        vecadd[cfg](a, b[: N - 1], c)
    short = dev.to_device(np.ones(N - 1, dtype=np.float32))
    with pytest.raises(ContractViolation, match=r"`len\(a\) == len\(c\)` violated"):
        vecadd[cfg](short, b, c)


def test_fast_path_catches_aliasing(dev: Device) -> None:
    cfg, launcher, (a, b, c) = _warm(dev)
    with pytest.raises(AliasingError, match=r"output `c` .* is the same buffer as `a`"):
        vecadd[cfg](a, b, a)
    with pytest.raises(AliasingError, match=r"output `c` .* overlaps the memory of `b`"):
        big = dev.to_device(np.ones(2 * N, dtype=np.float32))
        vecadd[cfg](a, big[:N], big[N // 2 : N // 2 + N])


def test_fast_path_catches_a_wrong_kind(dev: Device) -> None:
    cfg, launcher, (a, b, c) = _warm(dev)
    with pytest.raises(ArgumentError, match=r"parameter `b`"):
        vecadd[cfg](a, 3, c)


def test_fast_path_catches_another_device(dev: Device) -> None:
    if dev.kind != "cpu":
        pytest.skip("a second CPU backend instance stands in for a second device")
    cfg, launcher, (a, b, c) = _warm(dev)
    other = CpuDevice()
    b2 = other.to_device(np.ones(N, dtype=np.float32))
    with pytest.raises(ArgumentError, match=r"parameter `b`: lives on"):
        vecadd[cfg](a, b2, c)


def test_fast_path_with_scalars_rechecks_requires_and_ranges(dev: Device) -> None:
    out = dev.empty(64, az.i32)
    cfg = az.LaunchConfig.for_num_elems(64, block=64)
    rows = 8
    for _ in range(2):
        fill[cfg](out, 5, rows, 8)
    np.testing.assert_array_equal(out.to_host(), np.full(64, 5, np.int32))
    with pytest.raises(ContractViolation, match=r"`rows \* cols == len\(out\)` violated: left side 72, right side 64"):
        fill[cfg](out, 5, 9, 8)
    with pytest.raises(ContractViolation, match=r"overflows 64-bit"):
        fill[cfg](out, 5, 2**40, 2**40)
    with pytest.raises(ArgumentError, match=r"does not fit in i32"):
        fill[cfg](out, 2**31, rows, 8)
    with pytest.raises(ArgumentError, match=r"expects an integer for i32"):
        fill[cfg](out, 1.5, rows, 8)
    fill[cfg](out, 6, rows, 8)
    np.testing.assert_array_equal(out.to_host(), np.full(64, 6, np.int32))


def test_fast_path_2d(dev: Device) -> None:
    cfg = az.LaunchConfig.for_shape((8, 16))
    m = dev.to_device(np.ones((8, 16), dtype=np.float32))
    out = dev.empty((8, 16), az.f32)
    for k in (2.0, 3.0):
        scale2d[cfg](m, out, k)
    np.testing.assert_array_equal(out.to_host(), np.full((8, 16), 3.0, np.float32))
    with pytest.raises(ContractViolation, match=r"m.shape\[1\] == out.shape\[1\]"):
        scale2d[cfg](m, dev.empty((8, 15), az.f32), 2.0)


def test_memo_does_not_keep_buffers_alive(dev: Device) -> None:
    cfg = az.LaunchConfig.for_num_elems(N)
    a, b, c = _bufs(dev)
    for _ in range(2):
        vecadd[cfg](a, b, c)
    probe = weakref.ref(c)
    del c
    gc.collect()
    assert probe() is None
    a2, b2, c2 = _bufs(dev)
    vecadd[cfg](a2, b2, c2)  # a dead memo entry never matches
    np.testing.assert_array_equal(c2.to_host(), np.arange(N, dtype=np.float32) + 1)


def test_in_flight_work_sends_launches_to_the_full_path(dev: Device, plan_runs: Any, pending_op: Any) -> None:
    cfg, launcher, bufs = _warm(dev)
    seen = plan_runs()
    vecadd[cfg](*bufs)
    assert seen == []  # the memo
    pending_op()
    vecadd[cfg](*bufs)
    assert seen == [3]


# ---- the GPU launch path, without a GPU -------------------------------------------------------


def test_gpu_fast_paths_launch_what_the_full_path_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    dev, calls = fakecuda.record_launches(monkeypatch)
    cfg = az.LaunchConfig.for_num_elems(N)
    sets = [_bufs(dev) for _ in range(3)]
    vecadd.store.clear()
    try:
        launcher = vecadd[cfg]
        for _ in range(2):
            for s in sets:  # full, quick (x2), then memo hits for two sets, quick for the third
                launcher(*s)
        loaded = launcher._loaded[id(dev)]
        for s, call in zip(sets * 2, calls, strict=True):
            stream, cu_cfg, handle, *flat = call
            assert stream is dev._stream and handle == ("kernel handle", loaded.compiled.entry)
            # vecadd is coarsened (codegen/llvm/coarsen.py): a quarter of the blocks, and the extent
            assert loaded.compiled.coarsen == 4
            assert tuple(cu_cfg.grid) == (-(-cfg.grid[0] // 4), 1, 1) and tuple(cu_cfg.block) == cfg.block
            a, b, c = s
            assert flat[:6] == [a.ptr, N, b.ptr, N, c.ptr, N]
            assert flat[6] == loaded.fault_address and flat[7] == np.int32(1) and type(flat[7]) is np.int32
            assert flat[8] == cfg.grid[0] * cfg.block[0] and type(flat[8]) is np.int64
        with pytest.raises(AliasingError):
            launcher(sets[0][0], sets[0][1], sets[0][0])
        assert len(calls) == 6
    finally:
        vecadd.store.clear()


# ---- `requires`, compiled: the same verdict as the evaluator ------------------------------------

_REQUIRES = [
    "lambda a, c: len(a) == len(c)",
    "lambda a, b, c: len(a) == len(c) and len(b) == len(c)",
    "lambda out, v, rows, cols: rows * cols == len(out)",
    "lambda a, n, k: len(a) >= n * k + 1 and n // k < len(a) and -n <= 0",
    "lambda a, n, k: n - k != len(a) and 1 < n",
    "lambda m, out: m.shape[0] == out.shape[0] and m.shape[1] == out.shape[1]",
    "lambda a, n, k: len(a) * n * k * 9223372036854775807 > 0",
]


def _cases(seed: int) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    vals = [0, 1, 2, 3, -1, -7, 255, 256, 2**31, 2**32, 2**62, -(2**63), 2**63 - 1]
    return [tuple(int(rng.choice(vals)) for _ in range(6)) for _ in range(300)]


@pytest.mark.parametrize("source", _REQUIRES)
def test_compiled_requires_agrees_with_the_evaluator(source: str) -> None:
    import ast

    lam = ast.parse(source, mode="eval").body
    assert isinstance(lam, ast.Lambda)
    req = parse_requires(lam, source)
    names = req.params
    two_d = {"m", "out"} if "shape" in source else set()
    # packed layout: [len or rows, cols] per slice, one value per scalar
    slices: dict[str, tuple[int, int]] = {}
    scalars: dict[str, int] = {}
    at = 0
    for name in names:
        if name in ("a", "c", "b", "out", "m"):
            rank = 2 if name in two_d else 1
            slices[name] = (at, rank)
            at += rank
        else:
            scalars[name] = at
            at += 1
    check = compile_requires(req, slices, scalars)
    assert check is not None
    for case in _cases(len(source)):
        packed = [abs(v) if i < at else v for i, v in enumerate(case[:at])]
        for name, (i, rank) in slices.items():  # lengths are non-negative
            for k in range(rank):
                packed[i + k] = abs(packed[i + k]) % (2**40)
        env = Env(
            {n: packed[i] for n, (i, _) in slices.items()},
            {n: tuple(packed[i : i + r]) for n, (i, r) in slices.items()},
            {n: packed[i] for n, i in scalars.items()},
        )
        try:
            expected = first_violation(req, env) is None
        except (RequiresOverflow, ZeroDivisionError):
            expected = False
        assert check(packed) is expected, (source, packed)

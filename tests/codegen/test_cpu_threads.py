"""CPU backend: barriers, shared memory and warp operations (split at barriers by default,
codegen/cpu/regions.py; `split_barriers=False` runs one host thread per GPU thread)."""

from __future__ import annotations

import cg_kernels as K
import numpy as np
from cg_helpers import rng, run_cpu

from anodize.codegen.driver import compile_cpu


def test_block_reduction_with_barriers_and_shared_memory() -> None:
    ck = compile_cpu(K.block_sum)
    x = rng().random(200, dtype=np.float32) + 0.5
    out = np.zeros(4, np.float32)
    f = run_cpu(ck, (4,), (64,), x, out, dynamic_shared=64 * 4)
    assert f.count == 0
    padded = np.concatenate([x, np.zeros(56, np.float32)]).reshape(4, 64)
    np.testing.assert_allclose(out, padded.sum(axis=1) + 63, rtol=1e-5)


def test_warp_shuffles_and_votes_follow_ptx_rules() -> None:
    ck = compile_cpu(K.warp_ops)
    n = 64
    x = rng().integers(-100, 100, n, dtype=np.int32)
    x[5] = 95  # lane 5 of warp 0 makes `any(v > 90)` true there
    x[32:64] = np.abs(x[32:64]) % 90
    outs = [np.zeros(n, t) for t in (np.int32, np.int32, np.float64, np.int64, np.uint32, np.bool_)]
    f = run_cpu(ck, (1,), (64,), x, *outs)
    assert f.count == 0
    down, up, xor, idx, bal, anyv = outs
    for w in range(2):
        v = x[32 * w : 32 * (w + 1)]
        lanes = np.arange(32)
        e_down = np.where(lanes + 3 <= 31, v[np.minimum(lanes + 3, 31)], v)
        e_up = np.where(lanes - 5 >= 0, v[np.maximum(lanes - 5, 0)], v)
        e_xor = v[lanes ^ 6] * 0.5
        e_idx = np.full(32, int(v[7]) * 1_000_000_000, np.int64)
        e_bal = sum(1 << int(j) for j in lanes if v[j] > 0)
        e_any = bool((v > 90).any() and (v > -1000).all())
        sl = slice(32 * w, 32 * (w + 1))
        np.testing.assert_array_equal(down[sl], e_down)
        np.testing.assert_array_equal(up[sl], e_up)
        np.testing.assert_array_equal(xor[sl], e_xor)
        np.testing.assert_array_equal(idx[sl], e_idx)
        np.testing.assert_array_equal(bal[sl], np.full(32, e_bal, np.uint32))
        np.testing.assert_array_equal(anyv[sl], np.full(32, e_any))
    assert anyv[0] and not anyv[40]


def test_a_deadlocked_block_raises_instead_of_hanging(monkeypatch: object) -> None:
    import pytest

    from anodize.codegen.cpu import threads as cpu_threads

    monkeypatch.setattr(cpu_threads, "TIMEOUT_S", 0.3)  # type: ignore[attr-defined]
    ck = compile_cpu(K.deadlock, split_barriers=False)
    out = np.zeros(32, np.int32)
    with pytest.raises(RuntimeError, match="deadlocked"):
        run_cpu(ck, (1,), (32,), out, rank=1)


def test_a_divergent_barrier_stops_the_region_split_launch() -> None:
    """Run without the checker, a barrier under `if tid == 0` splits the block's threads:
    the region backend sees them disagree on the condition and raises at once, naming the block."""
    import pytest

    ck = compile_cpu(K.deadlock)
    out = np.zeros(64, np.int32)
    with pytest.raises(RuntimeError, match=r"block \(0, 0, 0\) diverged"):
        run_cpu(ck, (2,), (32,), out, rank=1)


def test_tiled_transpose_with_2d_shared_memory() -> None:
    ck = compile_cpu(K.transpose)
    assert ck.static_shared_bytes == 8 * 9 * 4
    a = rng().random((13, 21), dtype=np.float32)
    out = np.zeros((21, 13), np.float32)
    f = run_cpu(ck, (3, 2), (8, 8), a, out, rank=2)
    assert f.count == 0
    np.testing.assert_array_equal(out, a.T)

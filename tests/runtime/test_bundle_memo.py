"""The bundle launch's memo (anodize/bundle_launch.py, runtime/bundle_memo.py): a relaunch with
the very field objects of a recent launch skips the expansion and every check, so each test
first establishes the memos, then changes one thing and expects what a first launch gives:
the alias, dtype and `requires` errors, results in the new buffer, the new scalar's value."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import fakecuda
import numpy as np
import pytest

import anodize as az
import rt_bundle_kernels as K

N = 1000
CFG = az.LaunchConfig.for_num_elems(N, block=256)


def _state(dev: Any, seed: int = 1) -> K.State:
    rng = np.random.default_rng(seed)
    return K.State(
        pos=dev.to_device(rng.standard_normal(N).astype(np.float32)),
        vel=dev.to_device(rng.standard_normal(N).astype(np.float32)),
        out=dev.empty(N, az.f32),
        hits=dev.zeros(1, az.u32),
    )


def _want(s: K.State, dt: float) -> np.ndarray:
    return s.pos.to_host() + np.float32(dt) * s.vel.to_host()


def _warm(s: K.State, *more: K.State) -> Any:
    """The bundle kernel's launch object after launches that leave a memo of `s` (and `more`)."""
    launch = K.advance[CFG]
    for _ in range(2):
        for x in (s, *more):
            launch(x, 0.5)
    assert launch._memo is not None
    return launch


def _no_quick(launch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(flat: tuple[Any, ...]) -> None:
        raise AssertionError("the memo should have launched")

    monkeypatch.setattr(launch, "_quick", refuse)


def test_relaunch_takes_the_memo_and_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = az.device("cpu")
    s = _state(dev)
    launch = _warm(s)
    _no_quick(launch, monkeypatch)
    s.out.copy_from(np.zeros(N, np.float32))
    launch(s, 0.5)
    np.testing.assert_array_equal(s.out.to_host(), _want(s, 0.5))
    # a new bundle of the same fields is the same launch: the memo reads fields, not the bundle
    launch(K.State(pos=s.pos, vel=s.vel, out=s.out, hits=s.hits), 0.5)


def test_ping_pong_bundles_hit_both_memos(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = az.device("cpu")
    s, t = _state(dev, 1), _state(dev, 2)
    launch = _warm(s, t)
    _no_quick(launch, monkeypatch)
    for x in (s, t, s, t):
        launch(x, 0.5)
    np.testing.assert_array_equal(t.out.to_host(), _want(t, 0.5))


@pytest.mark.parametrize("change", ["alias", "view", "short", "dtype", "hits"])
def test_a_reassigned_field_is_checked_again(change: str) -> None:
    dev = az.device("cpu")
    s, t = _state(dev, 1), _state(dev, 2)
    launch = _warm(s, t)  # both bundles in the memos
    expect: Any
    if change == "alias":
        s.out, expect = s.pos, az.AliasingError  # an output field over an input field
    elif change == "view":
        s.out, expect = s.vel[:], az.AliasingError  # the same memory through another Buffer
    elif change == "short":
        s.pos, expect = dev.zeros(N - 1, az.f32), az.ContractViolation  # `requires` over the fields
    elif change == "dtype":
        s.vel, expect = dev.zeros(N, az.i32), az.ArgumentError
    else:
        s.hits, expect = dev.zeros(0, az.u32), az.ContractViolation  # `len(s.hits) >= 1`
    with pytest.raises(expect):
        launch(s, 0.5)
    with pytest.raises(expect):  # and again, now that the launch before failed
        launch(s, 0.5)
    launch(t, 0.5)  # the other bundle still launches


def test_a_new_output_and_a_new_scalar_take_effect() -> None:
    dev = az.device("cpu")
    s = _state(dev)
    launch = _warm(s)
    old = s.out
    s.out = dev.empty(N, az.f32)
    launch(s, 0.5)
    np.testing.assert_array_equal(s.out.to_host(), _want(s, 0.5))
    old.copy_from(np.zeros(N, np.float32))
    launch(s, 0.5)
    assert not old.to_host().any()  # the memo of the old output does not fire for the new one
    for dt in (0.25, np.float32(2.0), 0.25):
        launch(s, dt)
        np.testing.assert_array_equal(s.out.to_host(), _want(s, float(dt)))


def test_a_bundle_after_another_parameter() -> None:
    dev = az.device("cpu")
    a = dev.to_device(np.arange(N, dtype=np.float32))
    p = K.Pair(src=a, dst=dev.empty(N, az.f32))
    launch = K.scale_pair[CFG]
    for k in (2.0, 2.0, 2.0):
        launch(k, p)
    assert launch._memo is not None
    np.testing.assert_array_equal(p.dst.to_host(), 2 * np.arange(N, dtype=np.float32))
    p.dst = a
    with pytest.raises(az.AliasingError):
        launch(2.0, p)
    with pytest.raises(az.ArgumentError):
        launch(2.0, a)  # not a bundle where one goes


def test_in_flight_work_sends_bundle_launches_to_the_full_path(plan_runs: Any, pending_op: Any) -> None:
    dev = az.device("cpu")
    s = _state(dev)
    _warm(s)
    seen = plan_runs()
    K.advance[CFG](s, 0.5)
    assert seen == []  # the memo
    pending_op()
    K.advance[CFG](s, 0.5)
    assert seen == [5]  # the fields and dt, through the plan's checks and in-flight ordering


def test_the_memo_keeps_no_buffer_alive() -> None:
    dev = az.device("cpu")
    s = _state(dev)
    _warm(s)
    out = weakref.ref(s.out)
    s.out = dev.empty(N, az.f32)
    gc.collect()
    assert out() is None


def test_gpu_bundle_launches_pack_what_separate_slices_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    dev, calls = fakecuda.record_launches(monkeypatch)
    s, t = _state(dev, 1), _state(dev, 2)
    for k in (K.advance, K.advance_separate):
        k.store.clear()
    try:
        for x in (s, t, s, t, s):  # the full path, the quick path, then the memos
            K.advance[CFG](x, 0.5)
        assert len(calls) == 5
        for x in (s, t):
            K.advance_separate[CFG](x.pos, x.vel, x.out, x.hits, 0.5)
        bundle_s, bundle_t, sep_s, sep_t = calls[0], calls[1], calls[5], calls[6]
        for b, sep in ((bundle_s, sep_s), (bundle_t, sep_t)):  # the fault slot (at -2) is each kernel's own
            assert b[0] is sep[0] is dev._stream and b[3:-2] + b[-1:] == sep[3:-2] + sep[-1:]
            assert (tuple(b[1].grid), tuple(b[1].block)) == (tuple(sep[1].grid), tuple(sep[1].block))
        assert calls[2] == calls[4] == bundle_s and calls[3] == bundle_t
        assert bundle_s[3:5] == (s.pos.ptr, N)
        s.out = s.vel
        with pytest.raises(az.AliasingError):
            K.advance[CFG](s, 0.5)
        assert len(calls) == 7
    finally:
        for k in (K.advance, K.advance_separate):
            k.store.clear()

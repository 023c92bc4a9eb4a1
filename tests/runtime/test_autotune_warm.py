"""The autotuned warm launch's fast path (runtime/tune_launch.py): from the first repeat of the
same argument objects on, the launch relaunches the chosen launcher's own memo of them
(`Launcher.remember`) -- and only while that launcher still holds it, no lazy op is in flight,
the grid function still gives the same LaunchConfig and the choice for the key is unchanged
(`Choices`).  Buffers stay held by weak reference only."""

from __future__ import annotations

import gc
import importlib.util
import sys
import textwrap
import weakref
from typing import Any

import numpy as np
import pytest

import anodize as az
from anodize.runtime import inflight
from anodize.runtime.tune_launch import Choices

SRC = textwrap.dedent('''
    import anodize as az
    from anodize import DisjointSlice, Slice, f32, thread

    @az.autotune(configs=[az.Config(block=64), az.Config(block=128)], key=["x"])
    @az.launch_contract(domain=1, requires=lambda x, out: len(x) == len(out))
    @az.kernel
    def scale(x: Slice[f32], out: DisjointSlice[f32], s: f32) -> None:
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * s

    @az.launch_contract(domain=1, requires=lambda x, out: len(x) == len(out))
    @az.kernel
    def plain(x: Slice[f32], out: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] + 1.0
''')


@pytest.fixture
def mod(tmp_path: Any) -> Any:
    path = tmp_path / "autotune_warm_cases.py"
    path.write_text(SRC)
    spec = importlib.util.spec_from_file_location("autotune_warm_cases", path)
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = m
    spec.loader.exec_module(m)
    yield m
    del sys.modules[spec.name]


def _grid(n: int, calls: list[int]) -> Any:
    def grid(c: az.Config) -> az.LaunchConfig:
        calls[0] += 1
        return az.LaunchConfig.for_num_elems(n, block=c.block)

    return grid


def test_a_launcher_remembers_a_launch_without_launching(mod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Launcher.remember(args)`: the memo of a launch of `args` made by the quick path's checks
    and installed as the launcher's last, with the relaunch it would do; None before any plan,
    for arguments the quick path refuses, and while a lazy op is in flight."""
    dev = az.device("cpu")
    launcher = mod.plain[az.LaunchConfig.for_num_elems(64)]
    x, out = dev.to_device(np.arange(64, dtype=np.float32)), dev.zeros(64, az.f32)
    assert launcher.remember((x, out)) is None  # (no plan yet)
    launcher(x, out)
    before = launcher._memo
    got = launcher.remember((x, out))
    assert got is not None
    memo, arena, again = got
    assert launcher._memo is memo and launcher._memo2 is before
    np.testing.assert_allclose(out.to_host(), np.arange(64) + 1)
    x.copy_from(np.full(64, 5.0, np.float32))
    np.testing.assert_allclose(out.to_host(), np.arange(64) + 1)  # (nothing launched by `remember`)
    again()
    np.testing.assert_allclose(out.to_host(), 6.0)
    short = dev.zeros(32, az.f32)
    assert launcher.remember((x, short)) is None  # `requires` refuses: the full path reports it
    assert not memo((short, out)) and not memo((x, out, 1))
    monkeypatch.setitem(inflight._ACTIVE, -1, (_Pending(), ()))
    assert launcher.remember((x, out)) is None


def test_a_repeat_relaunches_the_launchers_memo_and_runs_the_kernel(mod: Any) -> None:
    dev = az.device("cpu")
    t = mod.scale._tuner
    calls = [0]
    launch = mod.scale[_grid(256, calls)]
    xh = np.arange(256, dtype=np.float32)
    x, out = dev.to_device(xh), dev.zeros(256, az.f32)
    s = 2.0
    launch(x, out, s)
    assert t.hit is not None and t.hit[5] is None  # (the first launch: no memo taken yet)
    first = calls[0]  # (the first launch tuned: the grid function of each configuration)
    launch(x, out, s)
    warm = t.hit[5]
    assert warm is not None and warm[1]._memo is warm[0]  # the launcher's own memo of these objects
    for i in range(3):  # the relaunch runs the kernel over the buffers' current contents
        x.copy_from(dev.to_device(xh + i))
        launch(x, out, s)
        np.testing.assert_allclose(out.to_host(), 2 * (xh + i))
    assert calls[0] == first + 4  # the grid function on every launch, once


def test_the_relaunch_is_taken_only_while_the_launcher_holds_its_memo(mod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another launch of the same launcher (other objects) pushes the memo out: the next autotuned
    launch goes through the launcher (and takes a fresh memo); a lazy op in flight bypasses it."""
    dev = az.device("cpu")
    t = mod.scale._tuner
    calls = [0]
    launch = mod.scale[_grid(128, calls)]
    xh = np.arange(128, dtype=np.float32)
    x, out = dev.to_device(xh), dev.zeros(128, az.f32)
    launch(x, out, 3.0)
    launch(x, out, 3.0)
    assert t.hit is not None and t.hit[5] is not None
    memo, held, arena, _ = t.hit[5]
    relaunched = [0]

    def counting() -> None:
        relaunched[0] += 1

    t.hit = (*t.hit[:5], (memo, held, arena, counting))
    launch(x, out, 3.0)
    assert relaunched == [1]
    others = [(dev.to_device(xh * k), dev.zeros(128, az.f32)) for k in (5, 7)]
    for xo, oo in others:  # the same launcher, other objects: its memos are theirs now
        held(xo, oo, 1.0)
    assert held._memo is not memo and held._memo2 is not memo
    out.copy_from(dev.zeros(128, az.f32))
    launch(x, out, 3.0)
    assert relaunched == [1]
    np.testing.assert_allclose(out.to_host(), 3 * xh)
    assert t.hit[5] is not None and t.hit[5][0] is held._memo  # a fresh memo, taken on the way
    for xo, oo in others:
        np.testing.assert_allclose(oo.to_host(), xo.to_host())
    memo, held, arena, _ = t.hit[5]
    t.hit = (*t.hit[:5], (memo, held, arena, counting))
    monkeypatch.setitem(inflight._ACTIVE, -1, (_Pending(), ()))  # a lazy op in flight (using nothing)
    out.copy_from(dev.zeros(128, az.f32))
    launch(x, out, 3.0)  # through the launcher, which orders it after in-flight work
    assert relaunched == [1]
    np.testing.assert_allclose(out.to_host(), 3 * xh)


class _Pending:
    """A registered submission that never finishes and uses no memory."""

    def poll(self) -> bool:
        return False

    def describe(self) -> str:
        return "a pending submission"


def test_alternating_argument_sets_both_relaunch_their_memos(mod: Any) -> None:
    """Double buffers: the launch before the last is remembered too, and the launcher keeps the
    memos of both; each launch runs over its own buffers."""
    dev = az.device("cpu")
    t = mod.scale._tuner
    launch = mod.scale[_grid(128, [0])]
    xh = np.arange(128, dtype=np.float32)
    sets = [(dev.to_device(xh), dev.zeros(128, az.f32)), (dev.to_device(xh), dev.zeros(128, az.f32))]
    for i in range(6):
        x, out = sets[i % 2]
        x.copy_from(xh + i)
        launch(x, out, 2.0)
        np.testing.assert_allclose(out.to_host(), 2 * (xh + i))
    assert t.hit is not None and t.hit2 is not None and t.hit[5] and t.hit2[5]
    memos = {t.hit[5][0], t.hit2[5][0]}
    held = t.hit[5][1]
    assert {held._memo, held._memo2} == memos
    relaunched = []
    for h in ("hit", "hit2"):  # (both hits relaunch from here on)
        memo, launcher, arena, again = getattr(t, h)[5]
        setattr(t, h, (*getattr(t, h)[:5], (memo, launcher, arena, lambda again=again: relaunched.append(again))))
    for i in range(4):
        launch(*sets[i % 2], 2.0)
    assert len(relaunched) == 4 and relaunched[0] is not relaunched[1] and relaunched[0] is relaunched[2]


def test_every_change_of_a_choice_forgets_the_hit(mod: Any) -> None:
    dev = az.device("cpu")
    t = mod.scale._tuner
    assert isinstance(t.best, Choices)
    x, out = dev.to_device(np.ones(64, np.float32)), dev.zeros(64, az.f32)
    launch = mod.scale[_grid(64, [0])]
    key = t.key_of((x, out, 1.0))
    other = az.Config(block=128)
    changes = (lambda b: b.__setitem__(key, other), lambda b: b.update({key: other}), lambda b: b.__ior__({key: other}),
               lambda b: b.pop(key), lambda b: b.popitem(), lambda b: b.__delitem__(key), lambda b: b.clear(),
               lambda b: b.setdefault(("another",), other))
    x2, out2 = dev.to_device(np.ones(64, np.float32)), dev.zeros(64, az.f32)
    for change in changes:
        launch(x2, out2, 1.0)
        launch(x, out, 1.0)
        launch(x, out, 1.0)
        assert t.hit is not None and t.hit[5] is not None and t.hit2 is not None
        change(t.best)
        assert t.hit is None and t.hit2 is None
    # a changed choice is what the next launch runs
    launch(x, out, 1.0)
    launch(x, out, 1.0)
    t.best[key] = other
    launch(x, out, 1.0)
    assert t.hit is not None and t.hit[2] == other and t.hit[3].block == (128, 1, 1)
    np.testing.assert_allclose(out.to_host(), 1.0)
    # a grid function that changes the choice: its launch runs the choice it was called with, the
    # next launch the new one (from a warm hit, and from the full path)
    first = az.Config(block=64)
    flip = [False]

    def changing(c: az.Config) -> az.LaunchConfig:
        if flip[0]:
            flip[0] = False
            t.best[key] = other
        return az.LaunchConfig.for_num_elems(64, block=c.block)

    relaunch = mod.scale[changing]
    for before in (3, 1, 0):  # the change in a warm hit with its memo, in its first repeat, in a full launch
        t.best[key] = first
        for _ in range(before):
            relaunch(x, out, 1.0)
        flip[0] = True
        relaunch(x, out, 1.0)
        relaunch(x, out, 1.0)
        assert t.hit is not None and t.hit[2] == other


def test_the_warm_launch_holds_buffers_by_weak_reference(mod: Any) -> None:
    dev = az.device("cpu")
    t = mod.scale._tuner
    launch = mod.scale[_grid(64, [0])]
    x, out = dev.to_device(np.ones(64, np.float32)), dev.zeros(64, az.f32)
    for _ in range(3):
        launch(x, out, 1.0)
    assert t.hit is not None and t.hit[5] is not None
    same = t.hit[0]
    refs = weakref.ref(x), weakref.ref(out)
    del x, out
    gc.collect()
    assert refs[0]() is None and refs[1]() is None
    y, o2 = dev.to_device(np.full(64, 2.0, np.float32)), dev.zeros(64, az.f32)
    assert not same((y, o2, 1.0))
    launch(y, o2, 1.0)
    np.testing.assert_allclose(o2.to_host(), 2.0)


@pytest.mark.gpu
def test_on_a_gpu_the_relaunch_runs_the_chosen_kernel_over_the_current_contents(mod: Any) -> None:
    """The relaunched memo on the device: tuned (timed) on the first launch, then every repeat
    runs the kernel over the buffers' current contents, with the right scalar."""
    dev = az.device()
    t = mod.scale._tuner
    n = 1 << 16
    launch = mod.scale[_grid(n, [0])]
    xh = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    x, out = dev.to_device(xh), dev.zeros(n, az.f32)
    launch(x, out, 1.5)
    for i in range(4):
        x.copy_from(dev.to_device(xh + i))
        launch(x, out, 1.5)
        dev.synchronize()
        np.testing.assert_allclose(out.to_host(), 1.5 * (xh + i), rtol=1e-6)
    assert t.hit is not None and t.hit[5] is not None and t.hit[5][1]._memo is t.hit[5][0]

"""A launch config built inline on every call (`k[az.LaunchConfig.for_tiles(...)](...)`) finds
the launcher a held one uses, and keeps every check.

`LaunchConfig` is interned (equal arguments: one object; only exact ints take the fast
paths), and `kernel[config]` keeps its launch object (a `Launcher`, or a generic kernel's
`GenericLaunch` with its dtype/Constant memo) per config, bounded.  Every test runs on the
CPU backend and, marked `gpu`, on device 0.
"""

from __future__ import annotations

import enum
import math
import pickle
from typing import Any

import numpy as np
import pytest

import anodize as az
from anodize import AliasingError, ArgumentError, ContractViolation, DisjointSlice, LaunchError, Slice, f32, f64, thread, tile
from anodize.runtime import config as rt_config
from anodize.runtime import launch as rt_launch

LC = az.LaunchConfig
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param(0, id="gpu", marks=pytest.mark.gpu)]
TILE = 256


@az.launch_contract(domain=1, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@az.tile_kernel(num_warps=2)
def tadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    pid = tile.program_id_1d()
    tile.store(c, pid, tile.load(a, pid, TILE) + tile.load(b, pid, TILE))


@az.launch_contract(domain=1, block=64, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@az.kernel
def vadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + b[i]


@az.launch_contract(domain=1, block=64, requires=lambda x, out: len(x) == len(out))
@az.kernel
def consts(x: Slice[f64], out: DisjointSlice[f64], K: az.Constant[int], C: az.Constant[float], F: az.Constant[bool]) -> None:
    i = thread.index_1d()
    if i in out:
        v = x[i] + float(K) + math.copysign(2.0, C) * 10.0
        if F:
            v = v + 1000.0
        out[i] = v


def _want(x: np.ndarray, k: int, c: float, f: bool) -> np.ndarray:
    return x + k + math.copysign(2.0, c) * 10.0 + (1000.0 if f else 0.0)


def _dev(which: Any) -> Any:
    return az.device(which)


def _f32(dev: Any, n: int) -> tuple[Any, Any, Any]:
    return dev.to_device(np.arange(n, dtype=np.float32)), dev.to_device(np.full(n, 2.0, np.float32)), dev.empty(n, az.f32)


# -- the config: interned, exact ----------------------------------------------------------


def test_equal_configs_are_one_object_and_hash_alike() -> None:
    assert LC.for_tiles((1000,), (256,)) is LC.for_tiles((1000,), (256,))
    assert LC.for_tiles((30, 1000), (8, 256)) is LC.for_tiles((30, 1000), (8, 256))
    assert LC.for_num_elems(1000, 250) is LC(4, 250) is LC((4,), (250,))
    assert LC((4, 2), 64) is LC((4, 2), (64, 1)) and LC((4, 2), 64).rank == 2
    assert LC(4, 64) is not LC((4, 1, 1), 64)  # rank 1 and rank 3: two configs
    assert LC(4, 64) != LC((4, 1, 1), 64)
    assert LC.for_shape((30, 40), (16, 16)) is LC((3, 2), (16, 16))
    assert hash(LC(4, 64, 128)) == hash(LC(4, 64, 128)) and LC(4, 64, 128) != LC(4, 64)
    assert LC.for_tiles((1000,), (256,)).grid == (4, 1, 1) and LC.for_tiles((0,), (256,)).grid == (1, 1, 1)
    assert LC.for_tiles((30, 1000), (8, 256)).grid == (4, 4, 1)


def test_pickle_and_copy_keep_the_rank() -> None:
    import copy

    for cfg in (LC(4, 64), LC((4, 2), 64), LC((4, 1, 1), (64, 1, 1), 512), LC.for_tiles((30, 1000), (8, 256))):
        back = pickle.loads(pickle.dumps(cfg))
        assert back == cfg and back.rank == cfg.rank and back is cfg
        assert copy.copy(cfg) == cfg and copy.deepcopy(cfg).rank == cfg.rank


@pytest.mark.parametrize(
    "make",
    [
        lambda: LC(True, 64),  # True == 1 and hashes alike: never the int's interned config
        lambda: LC(4.0, 64),
        lambda: LC(np.int64(4), 64),
        lambda: LC((4, True), 64),
        lambda: LC(0, 64),
        lambda: LC(4, 64, -1),
        lambda: LC.for_tiles((True,), (256,)),
        lambda: LC.for_tiles((1000.0,), (256,)),
        lambda: LC.for_tiles((1000,), (0,)),
        lambda: LC.for_tiles((1000, 3), (256,)),
        lambda: LC.for_tiles((True, 1000), (1, 256)),  # the 2-D memo holds exact ints only
        lambda: LC.for_tiles((30, 1000.0), (8, 256)),
        lambda: LC.for_tiles((30, 1000), (8, False)),
        lambda: LC.for_num_elems(np.int64(1000)),
        lambda: LC.for_num_elems(-1),
        lambda: LC.for_num_elems(10, 0),
    ],
)
def test_bad_arguments_are_refused_after_equal_good_ones(make: Any) -> None:
    LC(1, 64), LC(4, 64), LC((4, 1), 64), LC.for_tiles((1,), (256,)), LC.for_tiles((1000,), (256,))
    LC.for_tiles((1, 1000), (1, 256)), LC.for_tiles((30, 1000), (8, 256)), LC.for_tiles((30, 1000), (8, 1))
    LC.for_num_elems(1000), LC(4, 64, 1)
    with pytest.raises(LaunchError):
        make()


def test_int_subclasses_take_the_checked_path() -> None:
    class E(enum.IntEnum):
        FOUR = 4

    cfg = LC(E.FOUR, 64)
    assert cfg == LC(4, 64) and type(cfg.grid[0]) is int


def test_the_intern_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rt_config, "_INTERN_MAX", 8)
    made = [LC(g, 32) for g in range(1, 40)]
    assert len(rt_config._INTERN) <= 8
    assert [c.grid[0] for c in made] == list(range(1, 40)) and LC(3, 32) == made[2]
    tiles = [LC.for_tiles((g, 64), (1, 32)) for g in range(1, 40)]  # the 2-D for_tiles memo too
    assert len(rt_config._TILES_2D) <= 8 and [c.grid for c in tiles] == [(2, g, 1) for g in range(1, 40)]
    assert LC.for_tiles((3, 64), (1, 32)) == tiles[2]


# -- kernel[config]: one launch object per config -----------------------------------------


@pytest.mark.parametrize("which", DEVICES)
def test_per_call_forms_reuse_the_held_launcher(which: Any) -> None:
    """The per-call form returns the very launcher a held one is (so it launches the same
    compiled artifact, with the same plans and memo), alternating configs included."""
    dev = _dev(which)
    n = 1000
    a, b, c = _f32(dev, n)
    held = tadd[LC.for_tiles((n,), (TILE,))]
    held(a, b, c)
    other = tadd[LC.for_tiles((2 * n,), (TILE,))]
    for _ in range(3):
        assert tadd[LC.for_tiles((n,), (TILE,))] is held
        assert tadd[LC.for_tiles((2 * n,), (TILE,))] is other
        tadd[LC.for_tiles((n,), (TILE,))](a, b, c)
    np.testing.assert_array_equal(c.to_host(), np.arange(n, dtype=np.float32) + 2)
    per_call = tadd[LC.for_tiles((n,), (TILE,))]
    assert per_call.last_plan is held.last_plan and per_call.last_plan.handle is held.last_plan.handle and per_call.last_plan.entry is held.last_plan.entry
    assert held.config.block == (64, 1, 1)  # the tile kernel's block, filled in once
    v_held = vadd[LC.for_num_elems(n, 64)]
    vadd[LC(-(-n // 64), 64)](a, b, c)  # the same config, built another way
    assert vadd[LC.for_num_elems(n, 64)] is v_held and v_held.last_plan is not None


@pytest.mark.parametrize("which", DEVICES)
def test_a_cached_launcher_still_checks_every_call(which: Any) -> None:
    dev = _dev(which)
    n = 1000
    a, b, c = _f32(dev, n)
    for _ in range(2):
        tadd[LC.for_tiles((n,), (TILE,))](a, b, c)
    short = dev.empty(n - 1, az.f32)
    with pytest.raises(ContractViolation, match="len"):
        tadd[LC.for_tiles((n,), (TILE,))](a, b, short)
    with pytest.raises(ArgumentError):
        tadd[LC.for_tiles((n,), (TILE,))](a, b, dev.empty(n, az.f64))
    with pytest.raises(AliasingError):
        tadd[LC.for_tiles((n,), (TILE,))](a, b, a)
    with pytest.raises(ArgumentError):
        tadd[LC.for_tiles((n,), (TILE,))](a, b)
    tadd[LC.for_tiles((n,), (TILE,))](a, b, c)  # and still launches after the refusals
    np.testing.assert_array_equal(c.to_host(), np.arange(n, dtype=np.float32) + 2)
    with pytest.raises(LaunchError):
        tadd[[1, 2]]  # type: ignore[index]  # unhashable, not a config: the usual error
    with pytest.raises(LaunchError):
        tadd[(4, 64)]  # type: ignore[index]


@pytest.mark.parametrize("which", DEVICES)
def test_constants_never_share_a_specialisation(which: Any) -> None:
    """Per-call generic launches: each Constant value its own specialisation (True vs 1,
    1 vs 1.0 as an int Constant, -0.0 vs 0.0), the memo of one `GenericLaunch` per config."""
    dev = _dev(which)
    n = 100
    x_h = np.arange(n, dtype=np.float64)
    x, out = dev.to_device(x_h), dev.empty(n, az.f64)
    cfg = lambda: LC.for_num_elems(n, 64)  # noqa: E731
    cases = [(1, 0.0, False), (2, 0.0, False), (1, -0.0, False), (1, 0.0, True), (1, 1, False), (1, 1.0, True),
             (0, -1.5, False), (1, 0.0, False), (1, -0.0, True)]
    for _ in range(2):
        for k, c, f in cases:
            consts[cfg()](x, out, k, c, f)
            np.testing.assert_array_equal(out.to_host(), _want(x_h, k, c, f), err_msg=f"{k} {c} {f}")
    g = consts[cfg()]
    assert consts[cfg()] is g and len(g._fast) >= 8
    with pytest.raises(ArgumentError, match=r"az.Constant\[int\]"):
        consts[cfg()](x, out, True, 0.0, False)  # equal to 1, hashes alike: refused all the same
    with pytest.raises(ArgumentError, match=r"az.Constant\[int\]"):
        consts[cfg()](x, out, 1.0, 0.0, False)
    with pytest.raises(ArgumentError, match=r"az.Constant\[bool\]"):
        consts[cfg()](x, out, 1, 0.0, 1)  # 1 == True
    with pytest.raises(ArgumentError, match=r"az.Constant\[int\]"):
        consts[cfg()](x, out, [1], 0.0, False)
    with pytest.raises(ContractViolation):
        consts[cfg()](x, dev.empty(n - 1, az.f64), 1, 0.0, False)
    with pytest.raises(AliasingError):
        consts[cfg()](x, x, 1, 0.0, False)
    assert consts.specialize(K=1, C=0.0, F=False) is not consts.specialize(K=1, C=-0.0, F=False)
    assert consts.specialize(K=1, C=1, F=False) is consts.specialize(K=1, C=1.0, F=False)  # one value


@pytest.mark.parametrize("which", DEVICES)
def test_per_call_generic_launches_the_held_specialisation(which: Any) -> None:
    dev = _dev(which)
    n = 100
    x, out = dev.to_device(np.ones(n)), dev.empty(n, az.f64)
    consts.store.clear()
    held = consts[LC.for_num_elems(n, 64)]
    held(x, out, 3, 0.5, False)
    consts[LC.for_num_elems(n, 64)](x, out, 3, 0.5, False)
    spec_launcher = consts.specialize(K=3, C=0.5, F=False)[LC.for_num_elems(n, 64)]
    assert set(map(id, held._fast.values())) == {id(spec_launcher)}
    np.testing.assert_array_equal(out.to_host(), _want(np.ones(n), 3, 0.5, False))


def test_a_redefined_kernel_gets_its_own_launcher() -> None:
    dev = az.device("cpu")
    n = 100
    a, b, c = _f32(dev, n)
    first = _FIRST_TWICE
    first[LC.for_num_elems(n, 64)](a, b, c)
    np.testing.assert_array_equal(c.to_host(), 2 * np.arange(n, dtype=np.float32))
    second = _redefined()
    second[LC.for_num_elems(n, 64)](a, b, c)  # the same (interned) config, the new kernel's body
    np.testing.assert_array_equal(c.to_host(), 3 * np.arange(n, dtype=np.float32))
    assert second[LC.for_num_elems(n, 64)] is not first[LC.for_num_elems(n, 64)]


def test_launch_contract_on_a_kernel_drops_its_launchers() -> None:
    dev = az.device("cpu")
    n = 100
    a, b, c = _f32(dev, n)
    k = _FIRST_TWICE
    held = k[LC.for_num_elems(n, 64)]
    held(a, b, c)
    az.launch_contract(domain=1, block=64, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))(k)
    assert not k.store.launches and k[LC.for_num_elems(n, 64)] is not held
    k[LC.for_num_elems(n, 64)](a, b, c)
    np.testing.assert_array_equal(c.to_host(), 2 * np.arange(n, dtype=np.float32))


def test_the_launch_maps_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = az.device("cpu")
    monkeypatch.setattr(type(vadd), "_LAUNCHES_MAX", 4)
    monkeypatch.setattr(rt_launch, "_LAUNCHERS_MAX", 6)
    for n in range(60, 80):
        a, b, c = _f32(dev, n)
        vadd[LC(-(-n // 64), 64)](a, b, c)
        np.testing.assert_array_equal(c.to_host(), np.arange(n, dtype=np.float32) + 2)
    assert len(vadd.store.launches) <= 4 and len(vadd.store.launchers) <= 6


@az.launch_contract(domain=1, block=64, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@az.kernel
def _twice(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + a[i]


_FIRST_TWICE = _twice


@az.launch_contract(domain=1, block=64, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@az.kernel
def _twice(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:  # noqa: F811  # redefined, as in a notebook
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + a[i] + a[i]


def _redefined() -> Any:
    return _twice


@pytest.mark.gpu
def test_gpu_torch_tensors_per_call() -> None:
    """The bench's form: torch tensors, config per call, generic with Constants."""
    torch = pytest.importorskip("torch")
    n = 5000
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    c = torch.empty_like(a)
    held = tadd[LC.for_tiles((n,), (TILE,))]
    for _ in range(3):
        tadd[LC.for_tiles((n,), (TILE,))](a, b, c)
    assert tadd[LC.for_tiles((n,), (TILE,))] is held
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    with pytest.raises(AliasingError):
        tadd[LC.for_tiles((n,), (TILE,))](a, b, a)
    with pytest.raises(ContractViolation):
        tadd[LC.for_tiles((n,), (TILE,))](a, b, c[:-1])


def test_a_nan_constant_is_one_key() -> None:
    dev = az.device("cpu")
    n = 10
    x, out = dev.to_device(np.zeros(n)), dev.empty(n, az.f64)
    g = consts[LC.for_num_elems(n, 64)]
    before = len(g._fast)
    for _ in range(3):
        consts[LC.for_num_elems(n, 64)](x, out, 0, float("nan"), False)  # a new NaN object each time
    assert len(g._fast) == before + 1
    assert (out.to_host() == 20.0).all()  # copysign(2.0, nan) * 10: the NaN's sign bit is clear

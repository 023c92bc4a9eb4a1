"""`@az.autotune` (anodize/autotuning.py, runtime/tuning.py, tune_cache.py, tune_model.py) on the
CPU backend: every configuration is checked before it could run, refused ones are skipped with
their reason and never launched, the choice is kept per key, and the CPU backend takes the first
valid configuration untimed.  The timing and choice machinery itself runs here with wall-clock
timing (`Tuner.timed_on_cpu`), the GPU's events in the `gpu` test."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import anodize as az
from anodize.language.errors import ArgumentError
from anodize.runtime import tune_cache
from anodize.runtime.tune_model import estimate, resident_blocks
from anodize.runtime.tuning import Tuner, TuneReport

SRC = textwrap.dedent('''
    from typing import TypeVar

    import anodize as az
    from anodize import DisjointSlice, DisjointSlice2D, Slice, Slice2D, f16, f32, f64, i64, tile, thread

    T = TypeVar("T", f32, f64)

    CONFIGS = [az.Config(BM=32, BN=16), az.Config(BM=256, BN=256), az.Config(BM=16, BN=16, num_warps=2),
               az.Config(BM=8, BN=16, num_warps=4, num_stages=2)]

    @az.autotune(configs=CONFIGS, key=["n"])
    @az.launch_contract(domain=2)
    @az.tile_kernel(num_warps=4)
    def twice(x: Slice2D[f32], y: DisjointSlice2D[f32], n: i64, BM: az.Constant[int], BN: az.Constant[int]) -> None:
        # tiles of shapes (BM, BN) and (BN, BM): they add only when BM == BN (else az-type at
        # specialisation; two stores of y at those shapes would be refused for every config,
        # by name: one output, one tile shape)
        pid = tile.program_id_2d()
        t = tile.load(x, (pid.row * BM, pid.col * BN), (BM, BN))
        u = tile.load(x, (pid.row * BN, pid.col * BM), (BN, BM))
        tile.store(y, pid, t + u)

    @az.autotune(configs=[az.Config(BM=16, BN=16), az.Config(BM=8, BN=32, num_warps=2)], key=["x"])
    @az.launch_contract(domain=2)
    @az.tile_kernel(num_warps=4)
    def accumulate(x: Slice2D[f32], y: DisjointSlice2D[f32], BM: az.Constant[int], BN: az.Constant[int]) -> None:
        # reads its own output: timing it twice would double-count unless the outputs are restored
        pid = tile.program_id_2d()
        tile.store(y, pid, tile.load(y, pid, (BM, BN)) + tile.load(x, pid, (BM, BN)))

    @az.autotune(configs=[az.Config(block=64), az.Config(block=128), az.Config(block=256)], key=["x"])
    @az.launch_contract(domain=1, requires=lambda x, out: len(x) == len(out))
    @az.kernel
    def double(x: Slice[f32], out: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * 2.0

    # planted unsafe configurations: an f32 accumulator of 256 KiB (512 registers a thread at
    # 4 warps), and a second store of `c` at (R, BN) tiles, which overlap another program's
    # (BM, BN) tiles whenever R != BM (refused for every R: one output has one tile shape)
    @az.autotune(configs=[az.Config(BM=256, BN=256, BK=64, R=32, num_warps=4), az.Config(BM=32, BN=32, BK=32, R=32),
                          az.Config(BM=16, BN=32, BK=16, R=16, num_warps=2)], key=["a"])
    @az.launch_contract(domain=2)
    @az.tile_kernel(num_warps=4)
    def mm(a: Slice2D[f16], b: Slice2D[f16], c: DisjointSlice2D[f32], k: i64,
           BM: az.Constant[int], BN: az.Constant[int], BK: az.Constant[int], R: az.Constant[int]) -> None:
        pid = tile.program_id_2d()
        acc = tile.zeros((BM, BN), f32)
        for kk in range(0, k, BK):
            acc = tile.matmul(tile.load(a, (pid.row * BM, kk), (BM, BK)), tile.load(b, (kk, pid.col * BN), (BK, BN)), acc)
        tile.store(c, pid, acc)

    @az.autotune(configs=[az.Config(BM=16, BN=16, R=32), az.Config(BM=16, BN=16, R=16)], key=["a"])
    @az.launch_contract(domain=2)
    @az.tile_kernel(num_warps=4)
    def overlap(a: Slice2D[f32], c: DisjointSlice2D[f32], BM: az.Constant[int], BN: az.Constant[int], R: az.Constant[int]) -> None:
        pid = tile.program_id_2d()
        tile.store(c, pid, tile.load(a, pid, (BM, BN)))
        tile.store(c, pid, tile.load(a, pid, (R, BN)) * 2.0)

    @az.autotune(configs=[az.Config(block=64), az.Config(block=128)], key=["x"])
    @az.launch_contract(domain=1, requires=lambda x, out: len(x) == len(out))
    @az.kernel
    def triple(x: Slice[T], out: DisjointSlice[T]) -> None:
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * 3.0

    @az.autotune(configs=[az.Config(block=64), az.Config(block=128)], key=["x"])
    @az.launch_contract(domain=1, block=128, requires=lambda x, out: len(x) == len(out))
    @az.kernel
    def fixed(x: Slice[f32], out: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] + 1.0
''')


@pytest.fixture(scope="module")
def mod(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import importlib.util
    import sys

    path = tmp_path_factory.mktemp("autotune") / "autotune_cases.py"
    path.write_text(SRC)
    spec = importlib.util.spec_from_file_location("autotune_cases", path)
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = m
    spec.loader.exec_module(m)
    return m


@pytest.fixture
def timed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Tuner, "timed_on_cpu", True)


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every configuration the tuner builds a launcher for (a refused one must never appear)."""
    seen: list[Any] = []
    real = Tuner.held

    def spy(self: Tuner, key: Any, c: Any, lc: Any, args: Any) -> Any:
        seen.append(c)
        return real(self, key, c, lc, args)

    monkeypatch.setattr(Tuner, "held", spy)
    return seen


def _grid(n: int) -> Any:
    return lambda c: az.LaunchConfig.for_tiles((n, n), (c.BM, c.BN))


def test_refused_configurations_are_skipped_with_their_reason_and_never_run(mod: Any, timed: None, launched: list[Any]) -> None:
    dev = az.device("cpu")
    n = 48
    xh = np.random.default_rng(0).random((n, n), dtype=np.float32)
    x, y = dev.to_device(xh), dev.empty((n, n), az.f32)
    report = mod.twice.tune(_grid(n), x, y, n)
    by = {repr(r.config): r for r in report.records}
    overlap = by["Config(BM=32, BN=16)"]
    assert overlap.status == "skipped" and "az-type" in overlap.reason and "do not broadcast" in overlap.reason and overlap.time_ms is None
    budget = by["Config(BM=256, BN=256)"]
    assert budget.status == "skipped" and "az-type" in budget.reason and "bytes of shared memory" in budget.reason
    assert by["Config(BM=8, BN=16, num_warps=4, num_stages=2)"].status == "skipped"  # BM != BN: no broadcast again
    assert by["Config(BM=16, BN=16, num_warps=2)"].status == "ran" and report.winner == az.Config(BM=16, BN=16, num_warps=2)
    refused = {r.config for r in report.records if r.status == "skipped"}
    assert refused and not refused & set(launched), "a refused configuration was launched"
    assert report.source == "tuned" and report.compile_seconds > 0


def test_planted_unsafe_configurations_are_refused_and_never_run(mod: Any, timed: None, launched: list[Any],
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """An accumulator over the register budget is refused by the on-chip bound (it cannot live in
    registers, so its shared-memory staging is counted); a store whose tiles overlap another
    program's under some Constant is refused for every value of it (a store is always at the
    program's own tile: the only overlap is one output at two shapes).  None of them launches."""
    dev = az.device("cpu")
    rng = np.random.default_rng(5)
    a = dev.to_device(rng.standard_normal((64, 64), dtype=np.float32).astype(np.float16))
    c = dev.empty((64, 64), az.f32)
    report = mod.mm.tune(lambda cfg: az.LaunchConfig.for_tiles((64, 64), (cfg.BM, cfg.BN)), a, a, c, 64)
    by = {r.config.constants["BM"]: r for r in report.records}
    assert by[256].status == "skipped" and "az-type" in by[256].reason and "bytes of shared memory" in by[256].reason
    assert by[32].status == by[16].status == "ran" and report.winner in (by[32].config, by[16].config)
    grid = lambda cfg: az.LaunchConfig.for_tiles((64, 64), (cfg.BM, cfg.BN))  # noqa: E731
    assert mod.mm.tune(grid, a, a, c, 64).records[0].status == "skipped"  # again: the warning is not
    shown = [r for r in caplog.records if r.name == "anodize.autotune" and "BM=256" in r.getMessage()]
    assert len(shown) == 1 and "skipped: error[az-type]" in shown[0].getMessage()  # repeated (once a process)
    x = dev.to_device(np.ones((64, 64), np.float32))
    with pytest.raises(ArgumentError, match="no configuration .* is valid") as e:
        mod.overlap[lambda cfg: az.LaunchConfig.for_tiles((64, 64), (cfg.BM, cfg.BN))](x, dev.zeros((64, 64), az.f32))
    assert str(e.value.help).count("az-disjoint-index") == 2 and "one output has one tile shape" in str(e.value.help)
    refused = {by[256].config, az.Config(BM=16, BN=16, R=32), az.Config(BM=16, BN=16, R=16)}
    assert not refused & set(launched), "a refused configuration was launched"
    assert {by[32].config, by[16].config} <= set(launched)  # (the spy sees what does run)


def test_cpu_backend_runs_the_first_valid_configuration_untimed(mod: Any, launched: list[Any]) -> None:
    dev = az.device("cpu")
    n = 40
    xh = np.random.default_rng(1).random((n, n), dtype=np.float32)
    x, y = dev.to_device(xh), dev.empty((n, n), az.f32)
    mod.twice[_grid(n)](x, y, n)
    np.testing.assert_allclose(y.to_host(), 2 * xh)
    report = mod.twice.reports[(n, "float32", "float32")]
    assert report.source == "first-valid" and report.winner == az.Config(BM=16, BN=16, num_warps=2)
    statuses = [r.status for r in report.records]
    assert statuses == ["skipped", "skipped", "untimed", "untimed"]
    assert set(launched) == {az.Config(BM=16, BN=16, num_warps=2)}
    # the same key again: no tuning, the chosen configuration's launcher
    before = len(mod.twice.reports)
    mod.twice[_grid(n)](x, y, n)
    assert len(mod.twice.reports) == before and mod.twice.best(x, y, n) == az.Config(BM=16, BN=16, num_warps=2)


def test_num_warps_of_a_configuration_reaches_the_typed_model(mod: Any) -> None:
    from anodize.language.typer import build_ir

    tuner = mod.twice._tuner
    c = az.Config(BM=16, BN=16, num_warps=2)
    v = tuner.variant(c)
    assert v.num_warps == 2 and v.options == (("num_warps=", 2),)
    k = v.specialize(BM=16, BN=16)
    assert build_ir(k).tile_warps == 2 and k.spec == (("BM", 16), ("BN", 16), ("num_warps=", 2))
    staged = tuner.variant(az.Config(BM=8, BN=8, num_stages=3)).specialize(BM=8, BN=8)
    assert build_ir(staged).tile_stages == 3 and build_ir(k).tile_stages == 0


def test_outputs_are_restored_after_timing(mod: Any, timed: None) -> None:
    dev = az.device("cpu")
    n = 32
    xh = np.random.default_rng(2).random((n, n), dtype=np.float32)
    yh = np.random.default_rng(3).random((n, n), dtype=np.float32)
    x, y = dev.to_device(xh), dev.to_device(yh)
    mod.accumulate[_grid(n)](x, y)  # tunes (several timed launches), then runs once for real
    report = mod.accumulate.reports[((n, n), "float32", "float32")]
    assert [r.status for r in report.records] == ["ran", "ran"]
    np.testing.assert_allclose(y.to_host(), yh + xh, rtol=1e-6)


def test_simt_block_configurations(mod: Any, timed: None) -> None:
    dev = az.device("cpu")
    n = 1000
    xh = np.arange(n, dtype=np.float32)
    x, out = dev.to_device(xh), dev.empty(n, az.f32)
    mod.double[lambda c: az.LaunchConfig.for_num_elems(n, block=c.block)](x, out)
    np.testing.assert_allclose(out.to_host(), 2 * xh)
    assert {r.status for r in mod.double.reports[((n,), "float32", "float32")].records} == {"ran"}
    with pytest.raises(ArgumentError, match="set `block`: pass a grid function"):
        mod.double[az.LaunchConfig.for_num_elems(n, block=64)](x, dev.empty(n + 1, az.f32))
    # the contract fixes block=128: block=64 is refused before anything compiles
    mod.fixed[lambda c: az.LaunchConfig.for_num_elems(n, block=c.block)](x, out)
    rec = {repr(r.config): r for r in mod.fixed.reports[((n,), "float32", "float32")].records}
    assert rec["Config(block=64)"].status == "skipped" and "contract fixes block=(128,)" in rec["Config(block=64)"].reason
    np.testing.assert_allclose(out.to_host(), xh + 1)


def test_a_generic_kernel_tunes_per_element_type(mod: Any, timed: None) -> None:
    """One key per element type: the f64 tuning times f64 launchers, not the f32 ones the first
    tuning built for the same shapes and launch configurations (every configuration was refused
    as "expects elements of f32" when a timed tuning reused them)."""
    dev = az.device("cpu")
    n = 500
    grid = lambda c: az.LaunchConfig.for_num_elems(n, block=c.block)  # noqa: E731
    for dtype, name in ((np.float32, "float32"), (np.float64, "float64")):
        xh = np.arange(n, dtype=dtype)
        x, out = dev.to_device(xh), dev.empty(n, az.f32 if dtype == np.float32 else az.f64)
        mod.triple[grid](x, out)
        assert [r.status for r in mod.triple.reports[((n,), name, name)].records] == ["ran", "ran"]
        np.testing.assert_allclose(out.to_host(), 3 * xh)
        assert [r.status for r in mod.triple.tune(grid, x, out).records] == ["ran", "ran"]


def test_static_problems_and_launch_errors(mod: Any) -> None:
    bad = [az.Config(BM=16), az.Config(BM=16, BN=16, BK=8), az.Config(BM=16, BN=16, block=64), az.Config(BM=16, BN=16, num_warps=3)]
    t = az.autotune(configs=bad + [az.Config(BM=16, BN=16)], key=["n"])(mod.twice.kernel)
    reasons = [t._tuner.static[c] for c in bad]
    assert "binds no value for the `az.Constant` `BN`" in reasons[0]
    assert "no `az.Constant` parameter `BK`" in reasons[1]
    assert "`block` is a SIMT kernel's option" in reasons[2]
    assert "`num_warps` must be one of" in reasons[3]
    assert t._tuner.static[az.Config(BM=16, BN=16)] == ""
    dev = az.device("cpu")
    x, y = dev.empty((16, 16), az.f32), dev.empty((16, 16), az.f32)
    with pytest.raises(ArgumentError, match="bound by each autotuning configuration"):
        t[_grid(16)](x, y, 16, BM=16)
    with pytest.raises(ArgumentError, match="takes 3 arguments"):
        t[_grid(16)](x, y, 16, 16, 16)
    with pytest.raises(ArgumentError, match="not a parameter"):
        az.autotune(configs=[az.Config(BM=16, BN=16)], key=["m"])(mod.twice.kernel)
    nothing = az.autotune(configs=[az.Config(BM=32, BN=16)], key=["n"])(mod.twice.kernel)
    with pytest.raises(ArgumentError, match="no configuration of autotuned kernel `twice` is valid"):
        nothing[_grid(32)](dev.empty((32, 32), az.f32), dev.empty((32, 32), az.f32), 32)
    with pytest.raises(ArgumentError, match="two configurations are equal"):
        az.autotune(configs=[az.Config(BM=1, BN=1), az.Config(BN=1, BM=1)])(mod.twice.kernel)
    with pytest.raises(ArgumentError, match="positive int"):
        az.Config(num_warps=0)


def test_prune_configs_by_a_user_function(mod: Any) -> None:
    seen: list[Any] = []

    def prune(configs: list[Any], args: dict[str, Any]) -> list[Any]:
        seen.append(sorted(args))
        return [c for c in configs if c.BM == 8]

    t = az.autotune(configs=[az.Config(BM=16, BN=16), az.Config(BM=8, BN=8)], key=["n"], prune_configs_by=prune)(mod.twice.kernel)
    dev = az.device("cpu")
    x, y = dev.to_device(np.ones((16, 16), np.float32)), dev.empty((16, 16), az.f32)
    t[_grid(16)](x, y, 16)
    r = t.reports[(16, "float32", "float32")]
    assert [x.status for x in r.records] == ["pruned", "untimed"] and r.winner == az.Config(BM=8, BN=8)
    assert seen == [["n", "x", "y"]]


def test_seed_file_round_trip(mod: Any, tmp_path: Any) -> None:
    configs = [az.Config(BM=16, BN=16), az.Config(BM=8, BN=8)]
    a = az.autotune(configs=configs, key=["n"], prune_configs_by=lambda cs, _: cs[1:])(mod.twice.kernel)
    dev = az.device("cpu")
    x, y = dev.to_device(np.ones((16, 16), np.float32)), dev.empty((16, 16), az.f32)
    a[_grid(16)](x, y, 16)
    path = str(tmp_path / "seed.json")
    assert a.export(path) == 1
    b = az.autotune(configs=configs, key=["n"], seed=path)(mod.twice.kernel)
    b[_grid(16)](x, y, 16)
    rep = b.reports[(16, "float32", "float32")]
    assert rep.source == "seed" and rep.winner == az.Config(BM=8, BN=8)
    # a seed naming a configuration the decorator does not declare is ignored (tuned instead)
    data = json.loads(open(path).read())
    data["entries"][0]["config"] = {"BM": 4, "BN": 4}
    open(path, "w").write(json.dumps(data))
    c = az.autotune(configs=configs, key=["n"], seed=path)(mod.twice.kernel)
    c[_grid(16)](x, y, 16)
    assert c.reports[(16, "float32", "float32")].source == "first-valid"


def test_persistent_cache_is_content_addressed_and_distrusted(mod: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path))
    gpu = SimpleNamespace(kind="cuda", name="Fake H200", compute_capability=(9, 0))
    other = SimpleNamespace(kind="cuda", name="Fake A100", compute_capability=(8, 0))
    t = mod.twice._tuner
    key = (64, "float32", "float32")
    win = az.Config(BM=16, BN=16, num_warps=2)
    report = TuneReport(key, win, "tuned")
    tune_cache.store(t, key, gpu, report)
    assert tune_cache.load(t, key, gpu) == win
    assert tune_cache.load(t, key, other) is None  # another GPU model: tuned again
    assert tune_cache.load(t, (65, "float32", "float32"), gpu) is None
    (entry,) = list((tmp_path / "tune").iterdir())
    assert entry.name == tune_cache._digest(t, key, gpu) + ".json"
    data = json.loads(entry.read_text())
    data["config"] = {"BM": 4096, "BN": 4096}  # not a declared configuration: never trusted
    entry.write_text(json.dumps(data))
    assert tune_cache.load(t, key, gpu) is None
    entry.write_text("{not json")
    assert tune_cache.load(t, key, gpu) is None
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({**data, "config": win.to_json()}))
    entry.unlink()
    os.symlink(target, entry)  # a link out of the cache is not followed
    assert tune_cache.load(t, key, gpu) is None
    monkeypatch.setenv("ANODIZE_CACHE", "off")
    assert tune_cache.load(t, key, gpu) is None


def test_the_model_prunes_spills_and_non_resident_blocks() -> None:
    assert resident_blocks(256, 32, 0, (9, 0)) == 8  # the thread limit (2048)
    assert resident_blocks(256, 128, 0, (9, 0)) == 2  # 65536 registers / (128 x 256)
    assert resident_blocks(128, 64, 100 * 1024, (9, 0)) == 2  # 228 KiB of shared memory
    assert resident_blocks(1024, 255, 0, (9, 0)) == 0
    dev = SimpleNamespace(kind="cuda", compute_capability=(9, 0))

    def art(regs: int, spills: int = 0, shared: int = 0, threads: int = 256) -> Any:
        res = SimpleNamespace(registers=regs, spill_stores=spills, spill_loads=0)
        return SimpleNamespace(resources=res, contract=SimpleNamespace(block=(threads,)), static_shared_bytes=shared, dynamic_shared_bytes=0)

    assert "spills" in estimate(art(255, spills=64), dev).problem
    assert "cannot be resident" in estimate(art(255, threads=1024), dev).problem
    assert estimate(art(64), dev).score > estimate(art(128), dev).score


def test_cli_tune(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from anodize.cli import main

    f = tmp_path / "tunable.py"
    f.write_text(SRC.replace("key=[\"n\"])", "key=[\"n\"], inputs=make)", 1).replace(
        "CONFIGS = [", textwrap.dedent('''
        def make(dev, n):
            x = dev.to_device(__import__("numpy").ones((n, n), "float32"))
            return (lambda c: az.LaunchConfig.for_tiles((n, n), (c.BM, c.BN))), (x, dev.empty((n, n), az.f32), n)

        CONFIGS = [''').strip("\n"), 1))
    seed = tmp_path / "seed.json"
    assert main(["tune", f"{f}:twice", "--shape", "n=32", "--export", str(seed)]) == 0
    out = capsys.readouterr().out
    assert "winner Config(BM=16, BN=16, num_warps=2)" in out and "do not broadcast" in out and "wrote 1 entry" in out
    assert json.loads(seed.read_text())["entries"][0]["config"] == {"BM": 16, "BN": 16, "num_warps": 2}
    assert main(["tune", f"{f}:twice", "--shape", "n=x"]) == 2
    assert main(["tune", f"{f}:double", "--shape", "n=32"]) == 2  # no inputs= function


def _softmax_example(name: str) -> Any:
    """examples/autotune_softmax.py imported afresh as module `name` (its own tuner)."""
    import importlib.util

    path = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "autotune_softmax.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_a_launch_constant_keys_the_choice() -> None:
    m = _softmax_example("_autotune_softmax")
    t = m.softmax._tuner
    assert set(t.constants) == {"ROWS"} and t.launch_params == ["x", "out", "cols"]
    assert [t.launch_params[i] for i in t.key_pos] == ["x", "cols"]  # `cols` keys the choice too
    assert t.strip(("a", "b", 256)) == ("a", "b")  # and is baked into the specialisation, not passed


def test_the_docs_example_checks_and_runs(tmp_path: Any) -> None:
    import re
    import subprocess
    import sys
    from pathlib import Path

    from anodize.checker.api import check_source

    root = Path(__file__).resolve().parents[2]
    (block,) = re.findall(r"```python\n(.*?)```", (root / "docs" / "autotune.md").read_text(), re.S)
    assert check_source(block, "autotune_doc.py") == []
    script = tmp_path / "autotune_doc.py"  # kernels are read from their file
    script.write_text(block)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "ANODIZE_CACHE": "off"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "first-valid" in out.stdout and "ROWS=1" in out.stdout


def test_debug_device_runs_the_first_valid_configuration(mod: Any) -> None:
    dev = az.device("debug")
    n = 16
    xh = np.random.default_rng(5).random((n, n), dtype=np.float32)
    x, y = dev.to_device(xh), dev.empty((n, n), az.f32)
    t = az.autotune(configs=[az.Config(BM=16, BN=8), az.Config(BM=8, BN=8, num_warps=1)], key=["n"])(mod.twice.kernel)
    t[_grid(n)](x, y, n)
    report = t.reports[(n, "float32", "float32")]
    assert report.source == "first-valid" and report.winner == az.Config(BM=8, BN=8, num_warps=1)
    assert report.records[0].status == "skipped" and "do not broadcast" in report.records[0].reason
    np.testing.assert_allclose(y.to_host(), 2 * xh)


def test_num_stages_reaches_the_tensor_core_ring() -> None:
    """A configuration's `num_stages` sets the depth of the matmul loop's cp.async ring (the
    compiler's own choice without it): the GPU artifact's ring bytes differ by one stage."""
    import importlib.util
    from pathlib import Path

    from anodize.runtime.compile import compile_for_gpu

    path = Path(__file__).resolve().parents[2] / "examples" / "autotune_gemm.py"
    spec = importlib.util.spec_from_file_location("_autotune_gemm_stages", path)
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    t = m.gemm._tuner
    ring = {}
    for stages in (3, 4):
        v = t.variant(az.Config(BM=128, BN=128, BK=64, num_warps=8, num_stages=stages))
        ring[stages] = compile_for_gpu(v.specialize(T="f16", BM=128, BN=128, BK=64), "sm_90").dynamic_shared_bytes
    assert ring[4] - ring[3] == (128 + 128) * 64 * 2  # one stage of A's 128 x 64 and B's 64 x 128 halves


def test_a_configuration_reads_its_constants_as_plain_attributes_and_stays_immutable() -> None:
    c = az.Config(BM=128, BN=64, num_warps=4)
    assert (c.BM, c.BN, c.num_warps) == (128, 64, 4)
    assert "BM" in vars(c)  # a plain instance lookup in the grid function a launch calls, not __getattr__
    with pytest.raises(AttributeError):
        c.BM = 3  # type: ignore[misc]
    with pytest.raises(AttributeError, match="no constant or option `BK`"):
        _ = c.BK
    shadow = az.Config(to_json=1)  # a constant named like a method keeps the method
    assert shadow.constants == {"to_json": 1} and callable(shadow.to_json)


def test_tuning_keys_name_dtypes_as_strings_every_time(mod: Any) -> None:
    dev = az.device("cpu")
    x, y = dev.to_device(np.zeros((32, 32), np.float32)), dev.empty((32, 32), az.f32)
    t = mod.twice._tuner
    first, again = t.key_of((x, y, 32)), t.key_of((x, y, 32))
    assert first == again == (32, "float32", "float32")  # (the names are memoised per dtype; the key is the same data)
    assert t.key_of((dev.to_device(np.zeros((32, 32), np.float64)), y, 32)) == (32, "float64", "float32")


def test_a_warm_launch_recomputes_the_key_and_calls_the_grid_function_every_time(mod: Any, launched: list[Any]) -> None:
    """The warm path reuses the last launcher only for the same configuration and LaunchConfig
    objects and an equal key: a new shape re-keys (and is tuned), a grid function whose result
    changes under the same key is honoured, and a changed choice for a key is launched."""
    dev = az.device("cpu")
    size, calls = [300], [0]

    def grid(c: az.Config) -> az.LaunchConfig:
        calls[0] += 1
        return az.LaunchConfig.for_num_elems(size[0], block=c.block)

    t = mod.double._tuner
    launch = mod.double[grid]
    assert mod.double[grid] is launch and mod.double[_grid(8)] is not launch  # (one TunedLaunch per grid, its grid's)
    xh = np.arange(600, dtype=np.float32)
    x, out = dev.to_device(xh[:300]), dev.zeros(300, az.f32)
    size[0] = 128  # a grid covering the first 128 elements only (the first valid block is 64)
    launch(x, out)
    first = calls[0]
    launch(x, out)
    assert calls[0] == first + 1  # called on the warm launch too
    np.testing.assert_allclose(out.to_host(), np.r_[2 * xh[:128], np.zeros(172, np.float32)])
    size[0] = 300  # the same key, another LaunchConfig: honoured
    launch(x, out)
    np.testing.assert_allclose(out.to_host(), 2 * xh[:300])
    # a new shape through the same TunedLaunch: a new key, tuned, and launched over its own size
    x2, out2 = dev.to_device(xh), dev.zeros(600, az.f32)
    size[0] = 600
    before = set(mod.double.reports)
    launch(x2, out2)
    assert set(mod.double.reports) - before == {((600,), "float32", "float32")}
    np.testing.assert_allclose(out2.to_host(), 2 * xh)
    # back to the first key, whose choice is changed: the new choice runs, not the last launcher
    key = ((300,), "float32", "float32")
    size[0] = 300
    launch(x, out)  # (the last launcher given out is this key's again)
    t.best[key] = az.Config(block=128)
    launched.clear()
    out.copy_from(dev.zeros(300, az.f32))
    launch(x, out)
    assert launched == [az.Config(block=128)] and t._last is not None and t._last[1] == az.Config(block=128)
    np.testing.assert_allclose(out.to_host(), 2 * xh[:300])
    launched.clear()
    launch(x, out)  # the last launcher, again
    assert launched == [] and t.key_of((x, out)) == key
    with pytest.raises(ArgumentError, match="returned int, not an az.LaunchConfig"):
        mod.double[lambda c: 3](x, out)
    # the same configuration and LaunchConfig objects under another key (the element type): its own launcher
    tri = mod.triple[lambda c: az.LaunchConfig.for_num_elems(64, block=c.block)]
    for dtype, et in ((np.float32, az.f32), (np.float64, az.f64), (np.float32, az.f32)):
        xt, ot = dev.to_device(np.arange(64, dtype=dtype)), dev.zeros(64, et)
        tri(xt, ot)
        np.testing.assert_allclose(ot.to_host(), 3 * np.arange(64, dtype=dtype))
    # another choice under the same key and the same LaunchConfig object: the new choice's launcher
    n = 32
    xs, ys = dev.to_device(np.ones((n, n), np.float32)), dev.zeros((n, n), az.f32)
    tw = mod.twice[_grid(n)]
    tw(xs, ys, n)
    tw(xs, ys, n)
    t2 = mod.twice._tuner
    assert t2._last is not None and t2._last[1] == az.Config(BM=16, BN=16, num_warps=2)
    t2.best[t2.key_of((xs, ys, n))] = az.Config(BM=16, BN=16)  # (4 warps: the same grid)
    launched.clear()
    ys.copy_from(dev.zeros((n, n), az.f32))
    tw(xs, ys, n)
    assert launched == [az.Config(BM=16, BN=16)]
    np.testing.assert_allclose(ys.to_host(), 2.0)


def _count_keys(monkeypatch: pytest.MonkeyPatch, t: Tuner) -> list[int]:
    calls = [0]
    real = Tuner.key_of

    def counting(args: tuple[Any, ...]) -> tuple[Any, ...]:
        calls[0] += 1
        return real(t, args)

    monkeypatch.setattr(t, "key_of", counting)
    return calls


def test_a_warm_launch_with_the_same_objects_skips_the_key_and_a_new_shape_or_dtype_rekeys(
        mod: Any, launched: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path (runtime/tune_launch.py) takes the last launch's key for the very same Buffers
    and scalars; any other object -- a new Buffer of another shape or dtype, another scalar --
    computes its key, so a change of shape, dtype or value is re-keyed."""
    dev = az.device("cpu")
    t = mod.twice._tuner
    keys = _count_keys(monkeypatch, t)
    n = 32
    xs, ys = dev.to_device(np.ones((n, n), np.float32)), dev.zeros((n, n), az.f32)
    tw = mod.twice[_grid(n)]
    tw(xs, ys, n)
    first = keys[0]
    launched.clear()
    for _ in range(3):
        tw(xs, ys, n)
    assert keys[0] == first and launched == []  # the same objects: no key, the last launcher
    mod.twice[_grid(n)](xs, ys, n)  # an inline grid function (a new TunedLaunch): the fast path too
    assert keys[0] == first
    np.testing.assert_allclose(ys.to_host(), 2.0)
    # a new shape (new Buffers, another n): re-keyed
    m = 48
    xm, ym = dev.to_device(np.full((m, m), 2.0, np.float32)), dev.zeros((m, m), az.f32)
    mod.twice[_grid(m)](xm, ym, m)
    assert keys[0] == first + 1 and t.hit is not None and t.hit[1] == (m, "float32", "float32")
    np.testing.assert_allclose(ym.to_host(), 4.0)
    # back to the first Buffers and n, alternating with the others: the launch before the last
    # one is remembered too (double buffers), so neither is re-keyed
    for _ in range(2):
        tw(xs, ys, n)
        mod.twice[_grid(m)](xm, ym, m)
    assert keys[0] == first + 1
    np.testing.assert_allclose(ys.to_host(), 2.0)
    # a third set re-keys and pushes the first out, which re-keys in turn
    xk, yk = dev.to_device(np.ones((n, n), np.float32)), dev.zeros((n, n), az.f32)
    tw(xk, yk, n)
    tw(xs, ys, n)
    assert keys[0] == first + 3
    # the same Buffers with another value of the scalar key: re-keyed (and refused by the contract
    # only if it had to be: the grid covers n x n, the kernel reads its own shapes)
    tw(xs, ys, 1000)
    assert keys[0] == first + 4 and t.hit is not None and t.hit[1] == (1000, "float32", "float32")
    # another dtype through the same TunedLaunch of a generic kernel: new Buffers, re-keyed
    tt = mod.triple._tuner
    tkeys = _count_keys(monkeypatch, tt)
    tri = mod.triple[lambda c: az.LaunchConfig.for_num_elems(64, block=c.block)]
    for dtype, et, calls in ((np.float32, az.f32, 1), (np.float64, az.f64, 2)):
        xt, ot = dev.to_device(np.arange(64, dtype=dtype)), dev.zeros(64, et)
        tri(xt, ot)
        tri(xt, ot)
        assert tkeys[0] == calls
        np.testing.assert_allclose(ot.to_host(), 3 * np.arange(64, dtype=dtype))


def test_arguments_whose_key_can_change_in_place_are_keyed_every_launch(mod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A NumPy array (CPU backend) can change its dtype and shape in place: no identity fast path;
    the same array objects relaunched after `.dtype = ...` get the new dtype's choice and launcher."""
    t = mod.triple._tuner
    keys = _count_keys(monkeypatch, t)
    tri = mod.triple[lambda c: az.LaunchConfig.for_num_elems(64, block=c.block)]
    x, out = np.arange(64, dtype=np.float64), np.zeros(64, np.float64)
    tri(x, out)
    tri(x, out)
    assert keys[0] == 2 and t.hit is None
    np.testing.assert_allclose(out, 3 * np.arange(64))
    x.dtype = np.float32  # the same objects, now 128 f32 elements each
    out.dtype = np.float32
    x[:] = np.arange(128, dtype=np.float32)
    out[:] = 0
    tri(x, out)
    assert keys[0] == 3 and t.key_of((x, out)) == ((128,), "float32", "float32")
    np.testing.assert_allclose(out[:64], 3 * np.arange(64, dtype=np.float32))


def test_a_launch_constant_change_rekeys_on_the_same_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    m = _softmax_example("_autotune_softmax_rekey")
    t = m.softmax._tuner
    keys = _count_keys(monkeypatch, t)
    dev = az.device("cpu")
    xh = np.random.default_rng(0).standard_normal((8, 100), dtype=np.float32)
    x, out = dev.to_device(xh), dev.zeros((8, 100), az.f32)
    want = np.exp(xh - xh.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    for cols, calls in ((128, 1), (128, 1), (256, 2), (256, 2), (128, 3)):
        out.copy_from(dev.zeros((8, 100), az.f32))
        m.softmax[m.grid(8, cols)](x, out, cols)
        assert keys[0] == calls and t.hit is not None and t.hit[1][1] == cols
        np.testing.assert_allclose(out.to_host(), want, rtol=1e-5, atol=1e-6)


def test_the_cushion_outlasts_the_hosts_queueing_of_a_batch() -> None:
    """runtime/tune_timer.py: the memsets queued before a timed batch last 1.5x the host's
    expected time to queue it (so the events time the kernels, not the launch rate), at least
    one, at most 512."""
    from anodize.runtime.tune_timer import cushion_count

    assert cushion_count(64, 0.010, 0.013) == 74  # 64 calls x 10 us of host, 13 us a memset
    assert cushion_count(10, 0.008, 0.013) * 0.013 >= 1.5 * 10 * 0.008
    assert cushion_count(5, 0.0, 0.013) == 1 and cushion_count(0, 0.01, 0.013) == 0
    assert cushion_count(1, 5.0, 0.013) == 512  # (a first launch's load: capped)


def test_the_cpu_timer_is_wall_clock_of_synchronous_launches() -> None:
    import anodize as az
    from anodize.runtime.tune_timer import timer

    calls: list[int] = []
    t = timer(az.device("cpu"))
    ms = t(lambda: calls.append(1) or time.sleep(0.002), 3)  # type: ignore[func-returns-value]
    assert len(calls) == 3 and ms >= 6.0


@pytest.mark.gpu
def test_the_gpu_timer_times_a_batch_behind_its_cushion() -> None:
    """On a GPU: a memset's time is measured (and re-measured from each cushion), the host's time a
    call is kept for the next cushion, and a batch of tiny launches times the kernels (far below
    the host's launch cost: the cushion kept the GPU busy)."""
    import importlib.util

    from anodize.runtime.tune_timer import timer

    dev = az.device()
    spec = importlib.util.spec_from_file_location("_vecadd_t", Path(__file__).resolve().parents[2] / "examples" / "vecadd.py")
    assert spec is not None and spec.loader is not None
    vec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vec)
    a, b, c = (dev.zeros(256, az.f32) for _ in range(3))
    launch = vec.vecadd[az.LaunchConfig.for_num_elems(256)]
    t = timer(dev)
    assert 0 < t.memset_ms < 1.0  # type: ignore[attr-defined]
    for _ in range(3):
        ms = t(lambda: launch(a, b, c), 50)
    assert t.host_ms > 0  # type: ignore[attr-defined]
    assert ms / 50 < 0.8 * t.host_ms, (ms / 50, t.host_ms)  # type: ignore[attr-defined]

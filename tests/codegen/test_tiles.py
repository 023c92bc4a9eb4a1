"""The Tile model: typing (language/typer_tiles.py), the lowering to plain IR
(codegen/tile/plain.py) on both targets, the tensor-core matmuls (codegen/tile/), launches.
The lowering run with real threads: test_tile_threads.py; shared helpers: tile_cases.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_gpu
from anodize.codegen.tile.entry import lower_tiles
from anodize.language import ir
from anodize.language.tile_ir import TileReduce, TileTy

from tile_cases import HEAD, ROOT, TILE_EXAMPLES, _example_kernels, kernel_ir, typed, walk


# ---- typing ------------------------------------------------------------------------------------

REDUCE = """
@az.launch_contract(domain=2)
@az.tile_kernel
def k(x: Slice2D[f16], y: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, pid, (4, 8))
    s = tile.sum(t, axis=1, keepdims=True)
    u = t.T
    tile.store(y, pid, (t - s).astype(f32))
"""


def test_tile_types_have_constant_shapes_and_dtypes() -> None:
    k = kernel_ir(REDUCE, "k")
    local = dict(k.locals)
    assert local["t"].shape == (4, 8) and local["t"].elem.name == "f16"
    assert local["s"].shape == (4, 1) and local["s"].elem.name == "f32"  # a half sum accumulates in f32
    assert local["u"].shape == (8, 4)
    assert k.tile_warps == 4
    assert any(isinstance(s, ir.Assign) and isinstance(s.value, TileReduce) for s in k.body)


@pytest.mark.parametrize(
    "body, key",
    [
        ("tile.store(y, pid, tile.load(x, pid, (4, 8)) + tile.load(x, pid, (8, 4)))", "do not broadcast"),
        ("tile.store(y, pid, tile.sum(tile.load(x, pid, (4, 8)), axis=2))", "out of range"),
        ("tile.store(y, pid, tile.matmul(tile.load(x, pid, (4, 8)), tile.load(x, pid, (4, 8))))", "(M, K) @ (K, N)"),
        ("tile.store(y, pid, tile.load(x, pid, (4, 8), other=1.0)[0])", "other than adding axes"),
        ("tile.store(y, pid, tile.load(x, pid, (4, 8)).foo)", "has no attribute"),
    ],
)
def test_tile_type_errors_are_located(body: str, key: str) -> None:
    src = f"""
@az.launch_contract(domain=2)
@az.tile_kernel
def k(x: Slice2D[f32], y: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    {body}
"""
    t = typed(src, "k")
    assert t.ir is None
    assert any(key in d.message for d in t.diagnostics), [d.message for d in t.diagnostics]
    assert all(d.code != "az-internal" for d in t.diagnostics)


def test_simt_constructs_are_refused_in_a_tile_kernel() -> None:
    src = """
@az.launch_contract(domain=1)
@az.tile_kernel
def k(x: Slice[f32], y: DisjointSlice[f32]) -> None:
    pid = tile.program_id_1d()
    with az.unsafe():
        az.syncthreads()
    tile.store(y, pid, tile.load(x, pid, 64))
"""
    t = typed(src, "k")
    assert [d.code for d in t.diagnostics] == ["az-unsupported"]


def test_constant_shapes_specialise_and_one_shape_per_output_is_checked_per_value() -> None:
    src = """
@az.launch_contract(domain=2)
@az.tile_kernel
def k(x: Slice2D[f32], y: DisjointSlice2D[f32], A: az.Constant[int], B: az.Constant[int]) -> None:
    pid = tile.program_id_2d()
    tile.store(y, pid, tile.load(x, pid, (A, B)))
    tile.store(y, pid, tile.load(x, pid, (B, A)))
"""
    assert typed(src, "k", (("A", 8), ("B", 8))).ir is not None
    bad = typed(src, "k", (("A", 8), ("B", 16)))
    assert bad.ir is None and [d.code for d in bad.diagnostics] == ["az-disjoint-index"]


# ---- the lowering ------------------------------------------------------------------------------


def test_gpu_lowering_stages_tiles_in_shared_memory_with_barriers_cpu_lowering_has_none() -> None:
    for k in _example_kernels():
        gpu = lower_tiles(k, k.tile_warps * 32)
        cpu = lower_tiles(k, 1)
        assert not any(isinstance(s, ir.Barrier) for s in walk(cpu.body)), k.name
        assert all(not isinstance(t, TileTy) for _, t in gpu.locals)
        # the whole body runs under the guard that keeps one writer per tile
        guard = gpu.body[-1]
        assert isinstance(guard, ir.If)
        raw = {(e.reg, e.axis) for e in _exprs(guard.cond) if isinstance(e, ir.RawId)}
        assert {("tid", "x"), ("tid", "y"), ("tid", "z"), ("ctaid", "z")} <= raw


def _exprs(e):  # type: ignore[no-untyped-def]
    from dataclasses import fields, is_dataclass

    yield e
    if is_dataclass(e):
        for f in fields(e):
            v = getattr(e, f.name)
            for x in v if isinstance(v, tuple) else (v,):
                if hasattr(x, "ty") and is_dataclass(x):
                    yield from _exprs(x)


def test_every_tile_example_compiles_for_the_gpu_within_static_shared_memory() -> None:
    from anodize.codegen.toolchain import find_ptxas  # type: ignore[attr-defined]

    for k in _example_kernels():
        art = compile_gpu(k, "sm_90", ptxas=None)
        assert ".entry" in art.ptx, k.name
        # element-wise chains are fused: the add touches no shared memory and needs no barrier
        assert ("bar.sync" in art.ptx) == (k.name != "add"), k.name
        if k.name == "add":
            assert art.static_shared_bytes == 0
        if k.name == "gemm":  # the GEMM form on wgmma (tests/codegen/test_tile_gemm_tc.py), its ring dynamic
            assert art.ptx.count("wgmma.mma_async") == 4 and "cp.async" in art.ptx and art.dynamic_shared_bytes > 48 * 1024
        if k.name in ("softmax", "layer_norm"):  # a row reduced by whole warps: shuffles
            assert "shfl.sync.bfly" in art.ptx
        assert art.static_shared_bytes <= 48 * 1024, (k.name, art.static_shared_bytes)
        if find_ptxas() is not None:
            assert art.resources is not None and art.resources.spill_stores == 0, k.name


def test_the_layout_plan_puts_only_the_gemms_accumulator_in_registers() -> None:
    from anodize.language.tile_plan import plan_tiles

    ks = {k.name: k for k in _example_kernels()}
    plan = plan_tiles(ks["gemm"])
    assert plan.registers == {"acc": (128, 256)} and len(plan.sites) == 1 and len(plan.pipelined) == 1
    (site,) = plan.sites.values()
    assert site.shape == (128, 256, 64) and site.x.load.slice.name == "a" and site.y.load.slice.name == "b"
    for name in ("softmax", "layer_norm"):
        assert not plan_tiles(ks[name]).registers, name


def test_gemm_tile_kernel_compiles_cold_quickly() -> None:
    import time

    ks = {k.name: k for k in _example_kernels()}
    compile_gpu(ks["add"], "sm_90", ptxas=False)  # the codegen's lazy imports and LLVM's start-up
    t = time.thread_time()
    art = compile_gpu(ks["gemm"], "sm_90", ptxas=False)
    cpu = time.thread_time() - t
    # bench/tile_cold.py reports it against the 300 ms target: 0.08-0.16 s of this thread's CPU
    # on the dev VM (the lowering, LLVM and PTX run on it), 0.45 s while every fragment store
    # formed its own address (LLVM's straight-line strength reduction then took ~90% of the
    # PTX emission); CPU time, so the shared machine's load does not move the bound
    assert cpu < 0.35, cpu
    assert art.compile_seconds < 5.0


def test_gemm_fragment_stores_share_one_address_a_fragment_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-element register epilogue (`ANODIZE_TILE_EPILOGUE=direct`) stores each element
    at its fragment row's address plus a constant displacement (codegen/tile/lower.py
    `store_registers`, mma.py `lower_pred_store`): a thread of the 128x256 wgmma tile holds 2
    rows x 64 columns, so 2 address registers, each with the displacements 2 * (8 ni + q % 2)
    bytes of the layout's columns."""
    import re

    from anodize.codegen.tile.layout import choose_layout

    monkeypatch.setenv("ANODIZE_TILE_EPILOGUE", "direct")
    k = next(k for k in _example_kernels() if k.name == "gemm")
    ptx = compile_gpu(k, "sm_90", ptxas=False).ptx
    stores = re.findall(r"@p st\.global\.b16 \[(%rd\d+)(?:\+(\d+))?\]", ptx)
    lay = choose_layout(128, 256, 8, True)
    assert len(stores) == lay.count == 128
    by_base: dict[str, set[int]] = {}
    for base, disp in stores:
        by_base.setdefault(base, set()).add(int(disp or 0))
    cols = {2 * lay.offset(i)[1] for i in range(lay.count)}
    assert len(by_base) == len({lay.offset(i)[0] for i in range(lay.count)}) == 2
    assert all(d == cols for d in by_base.values()), by_base


def test_fragment_stores_test_their_column_against_one_limit_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ANODIZE_TILE_STORE_LIMIT=1` (codegen/tile/mma.py `lower_pred_store`): each fragment row
    forms one limit (the columns left from its first, 0 outside the slice's rows) and each of
    its 64 stores compares its constant column with it; no per-element 64-bit bounds test."""
    import re

    from anodize.codegen.toolchain import CODE_SWITCHES

    assert "ANODIZE_TILE_STORE_LIMIT" in CODE_SWITCHES
    monkeypatch.setenv("ANODIZE_TILE_EPILOGUE", "direct")
    monkeypatch.setenv("ANODIZE_TILE_STORE_LIMIT", "1")
    k = next(k for k in _example_kernels() if k.name == "gemm")
    ptx = compile_gpu(k, "sm_90", ptxas=False).ptx
    stores = re.findall(r"setp\.gt\.s32 p, (%r\d+), (\d+); @p st\.global\.b16 \[%rd\d+(?:\+(\d+))?\]", ptx)
    assert len(stores) == 128 and len({lim for lim, _, _ in stores}) == 2
    assert all(2 * int(col) == int(disp or 0) for _, col, disp in stores)
    assert len(re.findall(r"setp\.lt\.u64", ptx)) == 2  # the two rows' tests (without the switch: 66)


@pytest.mark.parametrize("setting", [None, "staged"])
def test_gemm_epilogue_is_staged_through_shared_memory_with_16_byte_stores(monkeypatch: pytest.MonkeyPatch,
                                                                           setting: str | None) -> None:
    """By default (and with `ANODIZE_TILE_EPILOGUE=staged`) a register tile is stored through
    shared memory (codegen/tile/epilogue.py): the 128x256 wgmma tile's 128 f16 registers a thread
    as 16 `stmatrix.x4` (sm_90), then a loop of coalesced 16-byte `st.global.v4` (element stores
    only at an edge): no per-element predicated store is left, and the kernel's dynamic shared
    buffer holds the staged tile."""
    import re

    if setting is None:
        monkeypatch.delenv("ANODIZE_TILE_EPILOGUE", raising=False)
    else:
        monkeypatch.setenv("ANODIZE_TILE_EPILOGUE", setting)
    k = next(k for k in _example_kernels() if k.name == "gemm")
    art = compile_gpu(k, "sm_90", ptxas=False)
    ptx = art.ptx
    assert ptx.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 16
    assert ptx.count("st.global.v4.b32") == 1 and not re.findall(r"@p st\.global\.b16", ptx)
    # each pair of f32 values rounded to f16 together, one conversion a pair (epilogue.py `_pack`)
    assert ptx.count("cvt.rn.f16x2.f32") == 64 and "cvt.rn.f16.f32" not in ptx
    assert art.dynamic_shared_bytes >= 128 * (256 * 2 + 16) + 1024


@pytest.mark.parametrize("arch,out,insn,count", [("sm_80", "f16", "st.shared.b32", 16), ("sm_90", "f32", "st.shared.v2.f32", 64),
                                                 ("sm_80", "f32", "st.shared.v2.f32", 16)])
def test_staged_epilogue_without_stmatrix_stores_register_pairs(arch: str, out: str, insn: str, count: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Before sm_90 (no stmatrix), and for f32 outputs, each register pair goes to shared memory
    as one 4- or 8-byte store; the copy out is the same 16-byte loop."""
    monkeypatch.delenv("ANODIZE_TILE_EPILOGUE", raising=False)  # (staged: the default)
    from tile_mma_cases import source

    from anodize.language.front import front_for_source

    bm, bn, bk, w = (128, 256, 64, 8) if arch == "sm_90" else (64, 64, 32, 4)
    text = source("canonical" if out == "f16" else "acc_in", bm, bn, bk, w, "f16")
    front = front_for_source(text, f"<staged-{abs(hash(text))}>")
    k = front.typed(next(f for f in front.kernels() if f.name == "k"), ()).ir
    ptx = compile_gpu(k, arch, ptxas=False).ptx
    assert "stmatrix" not in ptx and ptx.count(insn) == count and ptx.count("st.global.v4.b32") == 1


def test_benchmarking_switches_set_the_ring_depth_and_the_program_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ANODIZE_TILE_STAGES` sets the ring's depth where it fits the block's shared memory (3
    stages of 48 KiB at 128x256x64; 5 do not fit in 227 KiB: the default 4 stays) and
    `ANODIZE_TILE_GROUP` the tile rows a group of the program order sweeps (its first row
    `ctaid.y // G * G`); both are in the compile cache's key (codegen/toolchain.py CODE_SWITCHES)."""
    import re

    from anodize.codegen.toolchain import CODE_SWITCHES

    assert {"ANODIZE_TILE_STAGES", "ANODIZE_TILE_GROUP", "ANODIZE_TILE_EPILOGUE"} <= set(CODE_SWITCHES)
    k = next(k for k in _example_kernels() if k.name == "gemm")
    ring = (128 + 256) * 64 * 2
    assert compile_gpu(k, "sm_90", ptxas=False).dynamic_shared_bytes == 4 * ring + 1024
    monkeypatch.setenv("ANODIZE_TILE_STAGES", "3")
    art = compile_gpu(k, "sm_90", ptxas=False)
    assert art.dynamic_shared_bytes == 3 * ring + 1024 and "cp.async.wait_group 0;" in art.ptx
    monkeypatch.setenv("ANODIZE_TILE_STAGES", "5")
    assert compile_gpu(k, "sm_90", ptxas=False).dynamic_shared_bytes == 4 * ring + 1024
    monkeypatch.setenv("ANODIZE_TILE_GROUP", "4")
    ptx = compile_gpu(k, "sm_90", ptxas=False).ptx
    assert re.search(r"and\.b32\s+%r\d+, %r\d+, 65532;", ptx), "the group's first row: ctaid.y // 4 * 4"


# ---- launches ------------------------------------------------------------------------------------

STORE = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=2)
def fill(x: Slice2D[f32], y: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, pid, (8, 8), other=-1.0)
    tile.store(y, pid, t * 2.0 + f32(pid.row * 100 + pid.col))
"""


def _module(tmp_path: Path, src: str):  # type: ignore[no-untyped-def]
    import importlib.util
    import sys

    p = tmp_path / f"tilemod_{abs(hash(src))}.py"
    p.write_text(HEAD + textwrap.dedent(src))
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[p.stem] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _want(x: np.ndarray, tile: int = 8) -> np.ndarray:
    r = np.arange(x.shape[0])[:, None] // tile
    c = np.arange(x.shape[1])[None, :] // tile
    return x * 2 + (r * 100 + c)


def test_stores_write_exactly_the_owned_tiles_even_with_extra_programs(tmp_path: Path) -> None:
    mod = _module(tmp_path, STORE)
    dev = az.device("cpu")
    x = np.random.rand(13, 21).astype(np.float32)
    y = dev.zeros((13, 21), az.f32)
    mod.fill[az.LaunchConfig.for_tiles((13, 21), (8, 8))](dev.to_device(x), y)
    np.testing.assert_allclose(y.to_host(), _want(x))
    y2 = dev.zeros((13, 21), az.f32)
    mod.fill[az.LaunchConfig.for_tiles((40, 40), (8, 8))](dev.to_device(x), y2)  # more programs than tiles
    np.testing.assert_allclose(y2.to_host(), _want(x))


def test_the_runtime_fills_in_the_block_and_checks_unused_dimensions(tmp_path: Path) -> None:
    mod = _module(tmp_path, STORE)
    cfg = mod.fill.tile_config(az.LaunchConfig.for_tiles((13, 21), (8, 8)))
    assert cfg.block == (64, 1, 1) and cfg.grid == (3, 2, 1) and cfg.rank == 2
    dev = az.device("cpu")
    y = dev.zeros((13, 21), az.f32)
    with pytest.raises(az.LaunchError):
        mod.fill[az.LaunchConfig((3, 2, 2), (1, 1, 1))](dev.to_device(np.zeros((13, 21), np.float32)), y)


def test_for_tiles_rejects_bad_shapes() -> None:
    with pytest.raises(az.LaunchError):
        az.LaunchConfig.for_tiles((4, 4), (2,))
    assert az.LaunchConfig.for_tiles((1000,), (256,)).grid == (4, 1, 1)
    assert az.LaunchConfig.for_tiles((10, 100), (4, 32)).grid == (4, 3, 1)


# ---- the GPU twins ---------------------------------------------------------------------------------


@pytest.mark.gpu
def test_tile_kernels_match_the_cpu_backend_on_the_gpu(tmp_path: Path) -> None:
    mod = _module(tmp_path, STORE)
    gpu = az.device()
    x = np.random.rand(130, 210).astype(np.float32)
    y = gpu.zeros((130, 210), az.f32)
    mod.fill[az.LaunchConfig.for_tiles((400, 400), (8, 8))](gpu.to_device(x), y)
    np.testing.assert_allclose(y.to_host(), _want(x))


@pytest.mark.gpu
@pytest.mark.parametrize("name", TILE_EXAMPLES)
def test_tile_examples_on_the_gpu_at_larger_sizes(name: str) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_tile_{name}", ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    sizes = {
        "tile_add": {"n": (1 << 22) + 3},
        "tile_gemm": {"m": 1000, "n": 520, "k": 384},
        "tile_softmax": {"rows": 300, "cols": 4096},
        "tile_layernorm": {"rows": 300, "cols": 4096},
        "tile_attention": {"batch": 2, "heads": 3, "seq": 256, "d": 128},
    }
    mod.main(**sizes[name])

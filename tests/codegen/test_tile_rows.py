"""Row-shaped tile kernels in registers (codegen/tile/rows.py): which kernels take the form, the
layouts, and results against NumPy with real threads (the CPU backend's threaded runner runs the
GPU lowering: real barriers, real warp shuffles), plus GPU twins (16-byte vector accesses)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.codegen.tile.entry import lower_tiles
from anodize.codegen.tile.rows import RowLayout, row_plan
from anodize.language import ir
from anodize.language.front import front_for_source

ROOT = Path(__file__).resolve().parents[2]

HEAD = """
import math
import anodize as az
from anodize import DisjointSlice, DisjointSlice2D, Slice, Slice2D, f32, f64, i32, i64, tile
"""

ROWS = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=W)
def rows(x: Slice2D[f32], w: Slice[f32], y: DisjointSlice2D[f32], s: DisjointSlice2D[f32], n: i64, R: az.Constant[int], C: az.Constant[int]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, pid, (R, C), other=-1.0e30)
    m = tile.max(t, axis=1, keepdims=True)
    e = az.math.exp(t - m)
    k = 0
    while k < n:                      # reductions inside a loop: the scratch is reused
        e = e - tile.min(e, axis=1)[:, None] * 0.25
        k += 1
    tot = tile.sum(e, axis=1)         # (R,): NumPy's keepdims=False, read back as (R, 1) below
    tile.store(s, pid, tot[:, None] + tile.sum(tile.load(x, pid, (R, C)), axis=1, keepdims=True) * 0.0 + tile.max(t))
    tile.store(y, pid, e / tot[:, None] * tile.load(w, 0, C) + tile.load(y, pid, (R, C)))
"""


def _kernel(src: str, name: str, spec: tuple = ()) -> ir.KernelIR:  # type: ignore[type-arg]
    text = HEAD + textwrap.dedent(src)
    front = front_for_source(text, f"<rows-{abs(hash(text))}>")
    fdef = next(f for f in front.kernels() if f.name == name)
    t = front.typed(fdef, spec)
    assert t.ir is not None, [d.message for d in t.diagnostics]
    return t.ir


def _run(k: ir.KernelIR, threads: int, grid: tuple[int, int], args: list, vectors: bool = True) -> None:  # type: ignore[type-arg]
    """The GPU lowering for `threads` threads run by the CPU backend's threaded runner; with
    `vectors`, the vector accesses too (LLVM vector loads and stores on the host)."""
    art = compile_cpu(lower_tiles(k, threads, vectors=vectors))
    flat: list = []  # type: ignore[type-arg]
    for a in args:
        flat.append(a)
        if isinstance(a, np.ndarray):
            flat.extend(a.shape)
    fault = np.zeros(64, np.uint8)
    art.cpu_entry(grid + (1,), (threads, 1, 1), flat, fault.ctypes.data, 2)
    assert not fault.any()


def _rows_ref(x, w, y0, n, R, C):  # type: ignore[no-untyped-def]
    """One column of programs (cols <= C): padding reads -1e30 from x, 0 from w and y."""
    rows, cols = x.shape
    y, s = y0.copy(), np.zeros((rows, 1), np.float32)
    ww = np.zeros(C, np.float32)
    ww[:cols] = w
    for r0 in range(0, rows, R):
        t = np.full((R, C), -1.0e30, np.float32)
        blk = x[r0 : r0 + R]
        t[: blk.shape[0], :cols] = blk
        e = np.exp(t - t.max(1, keepdims=True))
        for _ in range(n):
            e = e - e.min(1, keepdims=True) * np.float32(0.25)
        tot = e.sum(1, keepdims=True)
        res = e / tot * ww
        rr = blk.shape[0]
        y[r0 : r0 + rr] += res[:rr, :cols]
        s[r0 : r0 + rr, 0] = (tot + t.max())[:rr, 0]
    return y, s


# (R, C, warps, threads on the CPU runner): rows spanning the block, several rows per pass
# (G = C / V threads a row: 16 with shuffles only, 64 across warps), one row, masked edges
# (R, C, warps, threads on the CPU runner, columns of the data): rows spanning the block, several
# rows per pass (G = C / V threads a row: 16 with shuffles only, 64 across warps), one row; the
# last row block is partly outside (masked), and rows shorter than the tile: 252 columns (chunks
# inside are vectors, the rest element by element) or 300, 62 (rows not 16-byte aligned: all masked)
# ragged rows (a length neither a multiple nor a divisor of threads * lanes, not padded): 200 over
# 32 threads of 4 lanes (two passes, the second part past the row) and 96 (one pass, 24 threads)
CASES = [(1, 256, 4, 128, 256), (4, 64, 1, 32, 64), (16, 64, 4, 128, 64), (2, 512, 2, 64, 512), (8, 32, 1, 32, 32),
         (1, 256, 4, 128, 252), (4, 64, 1, 32, 62), (2, 512, 2, 64, 300), (1, 200, 1, 32, 200), (2, 96, 1, 32, 90)]


def _row_cases() -> list[object]:
    """Every case with vector accesses and the first two without.  The default run leaves two
    compiles (2-3 s each) to `-m slow`: rows of 8 threads (the 16-thread rows of (4, 64) and
    (16, 64) take the same packed-rows path, with another group width) and (4, 64) without
    vectors ((1, 256) without vectors stays).  The cases that differ only in their data's
    columns share one compile (tests/conftest.py)."""
    slow = {(8, 32, 1, 32, 32, True), (4, 64, 1, 32, 64, False), (2, 96, 1, 32, 90, True)}
    cases = [(*c, True) for c in CASES] + [(*c, False) for c in CASES[:2]]
    return [pytest.param(*c, marks=pytest.mark.slow) if c in slow else c for c in cases]


@pytest.mark.parametrize("R, C, warps, threads, cols, vectors", _row_cases())
def test_row_kernels_match_numpy_with_real_threads(R: int, C: int, warps: int, threads: int, cols: int, vectors: bool) -> None:
    k = _kernel(ROWS.replace("num_warps=W", f"num_warps={warps}"), "rows", (("R", R), ("C", C)))
    layout = row_plan(k, threads)
    assert layout is not None and layout.K * layout.V <= 64
    rng = np.random.default_rng(R * C + cols)
    rows = 2 * R + 1  # the last row block is partly outside: masked
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.standard_normal(cols, dtype=np.float32)
    y = rng.standard_normal((rows, cols), dtype=np.float32)
    s = np.zeros((rows, 1), np.float32)
    want_y, want_s = _rows_ref(x, w, y, 2, R, C)
    _run(k, threads, (1, 3), [x, w, y, s, 2], vectors)
    np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(s, want_s, rtol=1e-4, atol=1e-4)


def test_layouts_spread_rows_over_the_block_or_pack_rows_per_pass() -> None:
    a = RowLayout((1, 4096), 128, 4)
    assert (a.K, a.spans, a.m, a.G) == (8, True, 8, 128)
    b = RowLayout((16, 64), 128, 4)
    assert (b.K, b.spans, b.P, b.G) == (2, False, 8, 16)
    assert RowLayout.fits((1, 4096), 128, 4) and not RowLayout.fits((1, 16384), 128, 4)  # 128 a thread: too many
    assert not a.ragged and a.valid(7) is None


def test_rows_of_any_length_are_not_padded() -> None:
    # softmax / layer norm over rows of 5000 at 8 warps: 5 passes of 1024, the last one 904
    # columns wide (threads 226.. hold no element there), 20 elements a thread (not 32 of 8192)
    L = RowLayout((1, 5000), 256, 4)
    assert (L.ragged, L.spans, L.m, L.K, L.V, L.C) == (True, True, 5, 5, 4, 5000)
    assert [L.valid(i) is None for i in range(5)] == [True, True, True, True, False]
    assert RowLayout((3, 96), 128, 4).ragged  # one pass, 24 of 128 threads a row
    assert not RowLayout.fits((1, 5002), 256, 4) and RowLayout.fits((1, 5002), 256, 2)  # lanes divide the row
    for name, warps in (("softmax", 256), ("layer_norm", 128)):
        k = _examples(5000)[name]
        plan = row_plan(k, warps)
        assert plan is not None and plan.C == 5000 and plan.V == 4 and plan.K * plan.V <= 40, name
    # 4096 keeps its exact layout (no ragged pass, no validity tests)
    assert not row_plan(_examples(4096)["softmax"], 256).ragged  # type: ignore[union-attr]


def test_ragged_rows_on_the_gpu_target_use_vectors_and_no_padding() -> None:
    ks = _examples(5000)
    for name in ("softmax", "layer_norm"):
        art = compile_gpu(ks[name], "sm_90", ptxas=None)
        ptx = art.ptx
        assert "ld.global.nc.v4.b32" in ptx or "ld.global.nc.v4.f32" in ptx, name
        assert "st.global.v4" in ptx, name
        assert ptx.count("bar.sync") == 2, name  # one per cross-warp reduction, as at 4096
        assert art.static_shared_bytes <= 64, name
        if art.resources is not None:
            assert art.resources.spill_stores == 0, name


def _examples(cols: int = 4096) -> dict[str, ir.KernelIR]:
    out = {}
    for name in ("tile_add", "tile_softmax", "tile_layernorm", "tile_gemm", "tile_attention"):
        path = ROOT / "examples" / f"{name}.py"
        front = front_for_source(path.read_text(), str(path))
        for fdef in front.kernels():
            spec: tuple = ()  # type: ignore[type-arg]
            if fdef.name in ("softmax", "layer_norm"):
                spec = (("cols", cols),)
            elif fdef.name == "gemm":
                spec = (("T", "f16"),)
            elif fdef.name == "attention":
                spec = (("BM", 32), ("BN", 32), ("D", 64))
            t = front.typed(fdef, spec)
            assert t.ir is not None
            out[fdef.name] = t.ir
    return out


def test_the_row_examples_take_the_register_form_and_matmuls_do_not() -> None:
    ks = _examples()
    for name in ("add", "softmax", "layer_norm"):
        assert row_plan(ks[name], 128) is not None, name
        assert row_plan(ks[name], 1) is None  # the CPU backend keeps one thread a program
    for name in ("gemm", "attention"):
        assert row_plan(ks[name], 128) is None, name


def test_row_examples_on_the_gpu_target_use_vectors_and_few_barriers() -> None:
    ks = _examples()
    for name, bars in (("add", 0), ("softmax", 2), ("layer_norm", 2)):
        art = compile_gpu(ks[name], "sm_90", ptxas=None)
        ptx = art.ptx
        assert "ld.global.nc.v4.b32" in ptx or "ld.global.nc.v4.f32" in ptx, name
        assert "st.global.v4" in ptx, name
        assert ptx.count("bar.sync") == bars, name  # one per cross-warp reduction
        assert art.static_shared_bytes <= 64, name  # the tiles are in registers
        if art.resources is not None:
            assert art.resources.spill_stores == 0, name


# ---- GPU twins -------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("R, C, warps, threads, cols", CASES)
def test_row_kernels_match_numpy_on_the_gpu(tmp_path: Path, R: int, C: int, warps: int, threads: int, cols: int) -> None:
    import importlib.util

    p = tmp_path / f"rows_{R}_{C}_{warps}.py"
    p.write_text(HEAD + textwrap.dedent(ROWS.replace("num_warps=W", f"num_warps={warps}")))
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    dev = az.device()
    rng = np.random.default_rng(R + C)
    rows = 4 * R + 1
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.standard_normal(cols, dtype=np.float32)
    y0 = rng.standard_normal((rows, cols), dtype=np.float32)
    yd, sd = dev.to_device(y0), dev.zeros((rows, 1), az.f32)
    launch = mod.rows.specialize(R=R, C=C)[az.LaunchConfig.for_tiles((rows, cols), (R, C))]
    launch(dev.to_device(x), dev.to_device(w), yd, sd, 2)
    want_y, want_s = _rows_ref(x, w, y0, 2, R, C)
    np.testing.assert_allclose(yd.to_host(), want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sd.to_host(), want_s, rtol=1e-4, atol=1e-4)


RELOAD = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=1)
def reload(x: Slice2D[f32], y: DisjointSlice2D[f32], n: i64) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, pid, (2, 64))
    k = 0
    while k < n:
        u = tile.load(x, pid, (2, 64), other=0.0)  # x itself, not t as the loop left it
        t = t + u
        k += 1
    tile.store(y, pid, t + tile.load(x, pid, (2, 64)))
"""


def test_a_reassigned_tile_is_not_reused_for_a_later_load_of_the_same_elements() -> None:
    k = _kernel(RELOAD, "reload")
    assert row_plan(k, 32) is not None
    x = np.random.default_rng(9).standard_normal((5, 64), dtype=np.float32)
    y = np.zeros_like(x)
    _run(k, 32, (1, 3), [x, y, 3])
    np.testing.assert_allclose(y, x * 5, rtol=1e-6)


COLS = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=W)
def cols(x: Slice2D[f32], y: DisjointSlice2D[f32], c: DisjointSlice2D[f32], R: az.Constant[int], C: az.Constant[int]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, pid, (R, C))
    cs = tile.sum(t, axis=0, keepdims=True)
    tile.store(y, pid, t - cs * 0.5 + tile.max(t, axis=0))
    tile.store(c, pid, cs)
"""


@pytest.mark.parametrize("R, C, warps, threads", [(4, 64, 1, 32), (16, 64, 4, 128), (2, 512, 2, 64)])
def test_column_reductions_in_registers(R: int, C: int, warps: int, threads: int) -> None:
    k = _kernel(COLS.replace("num_warps=W", f"num_warps={warps}"), "cols", (("R", R), ("C", C)))
    assert row_plan(k, threads) is not None
    rng = np.random.default_rng(R + C)
    rows = 2 * R + 1
    x = rng.standard_normal((rows, C), dtype=np.float32)
    y = np.zeros_like(x)
    c = np.zeros((3, C), np.float32)
    _run(k, threads, (1, 3), [x, y, c])
    want_y, want_c = np.zeros_like(x), np.zeros_like(c)
    for b in range(3):
        t = np.zeros((R, C), np.float32)
        blk = x[b * R : b * R + R]
        t[: len(blk)] = blk
        cs = t.sum(0, keepdims=True)
        want_y[b * R : b * R + len(blk)] = (t - cs * np.float32(0.5) + t.max(0, keepdims=True))[: len(blk)]
        want_c[b] = cs[0]
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c, want_c, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_column_reductions_on_the_gpu(tmp_path: Path) -> None:
    import importlib.util

    p = tmp_path / "cols_mod.py"
    p.write_text(HEAD + textwrap.dedent(COLS.replace("num_warps=W", "num_warps=4")))
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    dev = az.device()
    x = np.random.default_rng(4).standard_normal((33, 64), dtype=np.float32)
    y, c = dev.zeros((33, 64), az.f32), dev.zeros((3, 64), az.f32)
    mod.cols.specialize(R=16, C=64)[az.LaunchConfig.for_tiles((33, 64), (16, 64))](dev.to_device(x), y, c)
    t = np.zeros((48, 64), np.float32)
    t[:33] = x
    t = t.reshape(3, 16, 64)
    cs = t.sum(1, keepdims=True)
    np.testing.assert_allclose(y.to_host(), (t - cs * np.float32(0.5) + t.max(1, keepdims=True)).reshape(48, 64)[:33], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c.to_host(), cs[:, 0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cols, threads", [(256, 128), (200, 32), (252, 64)])
def test_layer_norm_example_with_its_mask_recomputed_matches_numpy(cols: int, threads: int) -> None:
    path = ROOT / "examples" / "tile_layernorm.py"
    front = front_for_source(path.read_text(), str(path))
    t = front.typed(next(iter(front.kernels())), (("cols", 256),))
    assert t.ir is not None and row_plan(t.ir, threads) is not None
    low = lower_tiles(t.ir, threads, vectors=True)
    assert not any("r_inside_" in n for n, _ in low.locals)  # the mask has no registers: recomputed at its use
    assert any("r_t_" in n for n, _ in low.locals)
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((5, cols), dtype=np.float32) * 3 + 1
    w, b = rng.standard_normal(cols, dtype=np.float32), rng.standard_normal(cols, dtype=np.float32)
    y = np.zeros_like(x)
    _run(t.ir, threads, (1, 5), [x, w, b, y, np.float32(1e-5)])
    xd = x.astype(np.float64)
    ref = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)

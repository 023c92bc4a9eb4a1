"""What tile users write (issue 26, deliverable 3): `tile.program_id_3d()` over 3-D slices,
`.reshape` / `tile.expand_dims` / `x[:, None]`, `tile.arange`, reductions with NumPy's
`keepdims=False`, a slice's `.shape` / `len()` as values.  Each construct is typed once
(typer_tiles.py) and run by the generic lowering (codegen/tile/plain.py) on the CPU backend, the debug
device and the GPU lowering in the CPU backend's threaded mode, against NumPy (f32: rtol 1e-5
for element-wise work and reductions, 1e-4 for matmuls)."""

from __future__ import annotations

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.codegen.tile.entry import lower_tiles
from anodize.codegen.tile.rows import row_plan
from anodize.language import ir
from anodize.language.tile_ir import TileArange, TileReduce, TileReshape

from tile_cases import kernel_ir, typed

SRC = """
from anodize import Slice3D, DisjointSlice3D

@az.launch_contract(domain=3)
@az.tile_kernel(num_warps=4)
def bmm(a: Slice3D[f32], b: Slice3D[f32], c: DisjointSlice3D[f32]) -> None:
    pid = tile.program_id_3d()
    acc = tile.zeros((16, 16), f32)
    for k in range(0, a.shape[2], 8):
        x = tile.load(a, (pid.layer, pid.row * 16, k), (1, 16, 8)).reshape((16, 8))
        y = tile.load(b, (pid.layer, k, pid.col * 16), (1, 8, 16)).reshape((8, -1))
        acc = tile.matmul(x, y, acc)
    tile.store(c, pid, tile.expand_dims(acc, 0))

@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=4)
def causal(s: Slice2D[f32], p: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    x = tile.load(s, pid, (8, 32), other=-math.inf)
    rows = pid.row * 8 + tile.arange(8)
    cols = pid.col * 32 + tile.arange(32)
    x = tile.where(rows[:, None] >= cols[None, :], x, -math.inf)
    m = tile.max(x, axis=1)
    e = az.math.exp(x - m[:, None])
    tile.store(p, pid, e / tile.sum(e, axis=1, keepdims=True))

@az.launch_contract(domain=1)
@az.tile_kernel(num_warps=4)
def row_sums(x: Slice2D[f32], out: DisjointSlice[f32]) -> None:
    pid = tile.program_id_1d()
    t = tile.load(x, (pid.get() * 8, 0), (8, 32))
    tile.store(out, pid, tile.sum(t, axis=1) / f32(x.shape[1]) + tile.max(t) * 0.0 + f32(len(out)) * 0.0)

@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=1)
def shapes(x: Slice2D[f32], y: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, pid, (4, 8))
    flipped = t.reshape((8, 4)).reshape(-1)      # a general reshape: the flat order is kept
    col = tile.sum(t, axis=0)                    # (8,)
    tile.store(y, pid, flipped.reshape((4, 8)) + col[None, :] + tile.expand_dims(tile.min(t, axis=1), -1) + tile.sum(t))
"""


def _run_lowered(k: ir.KernelIR, threads: int, grid: tuple[int, ...], args: list) -> None:  # type: ignore[type-arg]
    """The GPU lowering for `threads` threads run by the CPU backend's threaded mode."""
    art = compile_cpu(lower_tiles(k, threads))
    flat: list = []  # type: ignore[type-arg]
    for a in args:
        flat.append(a)
        if isinstance(a, np.ndarray):
            flat.extend(a.shape)
    fault = np.zeros(64, np.uint8)
    art.cpu_entry(tuple(grid) + (1,) * (3 - len(grid)), (threads, 1, 1), flat, fault.ctypes.data, len(grid))
    assert not fault.any()


def _kernels():  # type: ignore[no-untyped-def]
    import importlib.util
    import sys
    import tempfile
    import textwrap
    from pathlib import Path

    from tile_cases import HEAD

    d = Path(tempfile.mkdtemp())
    path = d / "tile_surface_cases.py"
    path.write_text(HEAD + textwrap.dedent(SRC))
    spec = importlib.util.spec_from_file_location("tile_surface_cases", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["tile_surface_cases"] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _causal_ref(s: np.ndarray) -> np.ndarray:
    masked = np.where(np.tril(np.ones(s.shape, bool)), s.astype(np.float64), -np.inf)
    e = np.exp(masked - masked.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _shapes_ref(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for r in range(0, x.shape[0], 4):
        for c in range(0, x.shape[1], 8):
            t = x[r:r + 4, c:c + 8].astype(np.float64)
            out[r:r + 4, c:c + 8] = t + t.sum(0)[None, :] + t.min(1)[:, None] + t.sum()
    return out


def test_the_ir_of_keepdims_reshape_and_arange() -> None:
    k = kernel_ir(SRC, "causal")
    local = dict(k.locals)
    assert local["m"].shape == (8,)  # keepdims=False: NumPy's shape
    assign = next(s for s in k.body if isinstance(s, ir.Assign) and s.name == "m")
    assert isinstance(assign.value, TileReshape) and isinstance(assign.value.value, TileReduce)
    assert assign.value.value.ty.shape == (8, 1)  # the reduction node keeps its axes
    rows = next(s for s in k.body if isinstance(s, ir.Assign) and s.name == "rows")
    assert local["rows"].shape == (8,) and local["rows"].elem.name == "i64"
    assert any(isinstance(e, TileArange) for e in _exprs(rows.value))
    b = dict(kernel_ir(SRC, "bmm").locals)
    assert b["x"].shape == (16, 8) and b["y"].shape == (8, 16)
    assert dict(kernel_ir(SRC, "shapes").locals)["flipped"].shape == (32,)


@pytest.mark.parametrize("device", ["cpu", "debug"])
def test_cpu_backend_and_debug_device_match_numpy(device: str) -> None:
    m = _kernels()
    dev = az.device(device)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 40, 24), dtype=np.float32)
    b = rng.standard_normal((3, 24, 20), dtype=np.float32)
    c = dev.empty((3, 40, 20), az.f32)
    m.bmm[az.LaunchConfig.for_tiles((3, 40, 20), (1, 16, 16))](dev.to_device(a), dev.to_device(b), c)
    np.testing.assert_allclose(c.to_host(), a @ b, rtol=1e-4, atol=1e-4)
    s = rng.standard_normal((24, 32), dtype=np.float32)
    p = dev.empty((24, 32), az.f32)
    m.causal[az.LaunchConfig.for_tiles((24, 32), (8, 32))](dev.to_device(s), p)
    np.testing.assert_allclose(p.to_host(), _causal_ref(s), rtol=1e-5, atol=1e-6)
    x = rng.standard_normal((20, 32), dtype=np.float32)
    out = dev.empty(20, az.f32)
    m.row_sums[az.LaunchConfig.for_tiles(20, 8)](dev.to_device(x), out)
    np.testing.assert_allclose(out.to_host(), x.sum(1) / 32, rtol=1e-5, atol=1e-6)
    y = dev.empty((8, 16), az.f32)
    xs = rng.standard_normal((8, 16), dtype=np.float32)
    m.shapes[az.LaunchConfig.for_tiles((8, 16), (4, 8))](dev.to_device(xs), y)
    np.testing.assert_allclose(y.to_host(), _shapes_ref(xs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [pytest.param(32, marks=pytest.mark.slow), 128])  # 128: the register plan for `causal`
def test_gpu_lowering_with_real_threads_matches_numpy(threads: int) -> None:
    rng = np.random.default_rng(12)
    a = rng.standard_normal((2, 40, 24), dtype=np.float32)
    b = rng.standard_normal((2, 24, 20), dtype=np.float32)
    c = np.zeros((2, 40, 20), np.float32)
    _run_lowered(kernel_ir(SRC, "bmm"), threads, (2, 3, 2), [a, b, c])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    s = rng.standard_normal((24, 32), dtype=np.float32)
    p = np.zeros_like(s)
    _run_lowered(kernel_ir(SRC, "causal"), threads, (1, 3), [s, p])
    np.testing.assert_allclose(p, _causal_ref(s), rtol=1e-5, atol=1e-6)
    x = rng.standard_normal((20, 32), dtype=np.float32)
    out = np.zeros(20, np.float32)
    _run_lowered(kernel_ir(SRC, "row_sums"), threads, (3,), [x, out])
    np.testing.assert_allclose(out, x.sum(1) / 32, rtol=1e-5, atol=1e-6)
    xs = rng.standard_normal((8, 16), dtype=np.float32)
    y = np.zeros_like(xs)
    _run_lowered(kernel_ir(SRC, "shapes"), threads, (2, 2), [xs, y])
    np.testing.assert_allclose(y, _shapes_ref(xs), rtol=1e-5, atol=1e-5)


def test_3d_programs_use_the_z_grid_and_compile_with_ptxas() -> None:
    k = kernel_ir(SRC, "bmm")
    guard = lower_tiles(k, 128).body[-1]
    raw = {(e.reg, e.axis) for e in _exprs(guard.cond) if isinstance(e, ir.RawId)}
    assert ("ctaid", "z") not in raw and ("ctaid", "y") not in raw  # every grid dimension is a tile axis
    guard2 = lower_tiles(kernel_ir(SRC, "causal"), 128).body[-1]
    assert ("ctaid", "z") in {(e.reg, e.axis) for e in _exprs(guard2.cond) if isinstance(e, ir.RawId)}
    for name in ("bmm", "causal", "row_sums", "shapes"):
        art = compile_gpu(kernel_ir(SRC, name), "sm_90", ptxas=None)  # ptxas runs when installed
        assert ".entry" in art.ptx, name
    assert "%ctaid.z" in compile_gpu(k, "sm_90", ptxas=False).ptx


def _exprs(e):  # type: ignore[no-untyped-def]
    """`e` and every node under it."""
    from dataclasses import fields, is_dataclass

    if isinstance(e, tuple):
        for x in e:
            yield from _exprs(x)
        return
    yield e
    if is_dataclass(e) and not isinstance(e, type):
        for f in fields(e):
            yield from _exprs(getattr(e, f.name))


def test_row_plan_reads_through_keepdims_false_and_arange_masks() -> None:
    # `m[:, None]` of a `keepdims=False` reduction and `rows[:, None] >= cols[None, :]` keep the
    # register plan (codegen/tile/rows_form.py folds the unit-axis reshapes)
    assert row_plan(kernel_ir(SRC, "causal"), 128) is not None
    # a 3-D tile, a general reshape and a 1-D row result go to the generic lowering
    for name in ("bmm", "shapes", "row_sums"):
        assert row_plan(kernel_ir(SRC, name), 128) is None, name


@pytest.mark.parametrize(
    "body, key",
    [
        ("tile.store(y, pid, tile.load(x, pid, (4, 8)).reshape((4, 4)))", "cannot be reshaped"),
        ("tile.store(y, pid, tile.load(x, pid, (4, 8))[1:, None])", "other than adding axes"),
        ("tile.store(y, pid, tile.load(x, pid, (4, 8))[:, :, :])", "other than adding axes"),
        ("tile.store(y, pid, tile.sum(tile.load(x, pid, (4, 8)), axis=1, keepdims=n > 0))", "`keepdims=` must be"),
        ("tile.store(y, pid, tile.load(x, pid, (4, 8)) + tile.arange(n))", "tile.arange(n)"),
        ("tile.store(y, pid, tile.expand_dims(tile.load(x, pid, (4, 8)), 3))", "out of range"),
        ("tile.store(y, pid, tile.expand_dims(tile.load(x, pid, (4, 8)), 0)[None])", "at most 3 axes"),
        ("tile.store(y, pid, tile.load(x, pid, (4, 8)).reshape((1, 4, 8)).T)", "`.T` transposes a 2-D tile"),
        ("tile.store(y, pid, tile.sum(tile.load(x, pid, (4, 8)), axis=1))", "is 2-D but the tile is 1-D"),
    ],
)
def test_surface_type_errors_are_located(body: str, key: str) -> None:
    src = f"""
@az.launch_contract(domain=2)
@az.tile_kernel
def k(x: Slice2D[f32], y: DisjointSlice2D[f32], n: i64) -> None:
    pid = tile.program_id_2d()
    {body}
"""
    t = typed(src, "k")
    assert t.ir is None
    assert any(key in d.message for d in t.diagnostics), [d.message for d in t.diagnostics]
    assert all(d.span.line == 10 for d in t.diagnostics)


def test_program_id_3d_needs_a_3d_contract() -> None:
    src = """
@az.launch_contract(domain=2)
@az.tile_kernel
def k(x: Slice2D[f32], y: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_3d()
"""
    t = typed(src, "k")
    assert t.ir is None and any("program_id_3d" in d.message for d in t.diagnostics), [d.message for d in t.diagnostics]


def test_for_tiles_takes_3d_shapes() -> None:
    cfg = az.LaunchConfig.for_tiles((3, 40, 20), (1, 16, 16))
    assert cfg.grid == (2, 3, 3) and cfg.rank == 3
    with pytest.raises(az.LaunchError):
        az.LaunchConfig.for_tiles((3, 40, 20, 2), (1, 16, 16, 1))

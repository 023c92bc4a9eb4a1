"""The Tile model's GPU lowering run with real threads (the CPU backend's threaded mode: one
host thread per GPU thread, real barriers), so a missing barrier shows as a wrong result; mixed
tile programs, loops, every scalar kind and helpers (the typing, lowering and launches:
test_tiles.py)."""

from __future__ import annotations

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.codegen.tile.entry import lower_tiles
from anodize.language import ir

from tile_cases import ROOT, _example_kernels, kernel_ir, typed, walk


# ---- barrier placement, with real threads: the GPU lowering run by the CPU backend's threaded mode
# (one host thread per GPU thread, real barriers), so a missing barrier shows as a wrong result


def _run_lowered(k: ir.KernelIR, threads: int, grid: tuple[int, int], args: list) -> None:  # type: ignore[type-arg]
    plain = lower_tiles(k, threads)
    art = compile_cpu(plain)
    flat: list = []  # type: ignore[type-arg]
    for a in args:
        if isinstance(a, np.ndarray):
            flat.append(a)
            flat.extend(a.shape)
        else:
            flat.append(a)
    fault = np.zeros(64, np.uint8)
    art.cpu_entry(grid + (1,), (threads, 1, 1), flat, fault.ctypes.data, 2)
    assert not fault.any()


# 128 (the examples' num_warps=4) by default; 1, 8 (part of a warp) and 32 under -m slow
@pytest.mark.parametrize("threads", [pytest.param(t, marks=pytest.mark.slow) for t in (1, 8, 32)] + [128])
def test_gpu_lowering_barriers_with_real_threads(threads: int) -> None:
    ks = {k.name: k for k in _example_kernels()}
    rng = np.random.default_rng(5)
    # softmax (cols = 256 specialisation), 3 rows, tile (1, 256)
    x = rng.standard_normal((3, 200), dtype=np.float32)
    out = np.zeros_like(x)
    _run_lowered(ks["softmax"], threads, (1, 3), [x, out])
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    # GEMM (f16, tiles 64 x 64, K step 32): the K loop carries the accumulator
    a = rng.standard_normal((70, 96), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((96, 65), dtype=np.float32).astype(np.float16)
    c = np.zeros((70, 65), np.float16)
    _run_lowered(ks["gemm"], threads, (2, 2), [a, b, c, 96])
    np.testing.assert_allclose(c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=5e-2)
    # attention (BM = BN = 32, D = 64): two heads of 64
    q, kk, v = (rng.standard_normal((128, 64), dtype=np.float32).astype(np.float16) for _ in range(3))
    o = np.zeros((128, 64), np.float16)
    _run_lowered(ks["attention"], threads, (1, 4), [q, kk, v, o, 64, np.float32(64 ** -0.5)])
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("_tile_attention_ref", ROOT / "examples" / "tile_attention.py")
    mod = module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    np.testing.assert_allclose(o.astype(np.float32), mod.reference(q, kk, v, 2, 64, 64), rtol=2e-2, atol=2e-2)


def test_a_block_other_than_the_compiled_one_computes_nothing_and_faults() -> None:
    k = next(k for k in _example_kernels() if k.name == "softmax")
    # the thread-per-GPU-thread runner: it runs the device-side guard with any block (the
    # barrier-region runner refuses a block other than the compiled one before running)
    art = compile_cpu(lower_tiles(k, 8), split_barriers=False)
    x = np.ones((2, 256), np.float32)
    out = np.zeros_like(x)
    fault = np.zeros(64, np.uint8)
    art.cpu_entry((1, 2, 1), (4, 1, 1), [x, 2, 256, out, 2, 256], fault.ctypes.data, 2)
    assert fault.any() and not out.any()
    assert "blocks of exactly 8 threads" in art.fault_sites[-1].kind


def test_specialisations_of_a_tile_kernel_fill_in_their_block() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_tile_gemm_spec", ROOT / "examples" / "tile_gemm.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    k = mod.gemm.specialize(T="f16", BM=64, BN=64, BK=32)
    assert isinstance(k, az.TileKernel) and k.num_warps == 8
    assert k.tile_config(az.LaunchConfig.for_tiles((100, 100), (64, 64))).block == (256, 1, 1)


def test_break_and_continue_settle_pending_accesses_and_ids_of_two_ranks_are_refused() -> None:
    src = """
@az.tile_kernel
def k(x: Slice2D[f32], y: DisjointSlice2D[f32], n: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros((8, 8), f32)
    for j in range(n):
        t = tile.load(x, pid, (8, 8))
        u = t.T
        if j == 2:
            acc = acc * 2.0
            continue
        acc = acc + u
    tile.store(y, pid, acc)
"""
    k = kernel_ir(src, "k")
    gpu = lower_tiles(k, 64)
    loop = next(s for s in walk(gpu.body) if isinstance(s, ir.ForRange) and s.var == "j")
    cont = next(s for s in walk(loop.body) if isinstance(s, ir.If) and any(isinstance(t, ir.Continue) for t in s.body))
    assert isinstance(cont.body[-2], ir.Barrier) and isinstance(cont.body[-1], ir.Continue)
    mixed = """
@az.tile_kernel
def k(x: Slice[f32], y: DisjointSlice[f32]) -> None:
    a = tile.program_id_1d()
    b = tile.program_id_2d()
    tile.store(y, a, tile.load(x, a, 8))
"""
    t = typed(mixed, "k")
    assert t.ir is None and [d.code for d in t.diagnostics] == ["az-index-domain"]


def test_the_debug_device_runs_tile_kernels_one_thread_per_program() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_tile_softmax_dbg", ROOT / "examples" / "tile_softmax.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    dev = az.device("debug")
    x = np.random.default_rng(6).standard_normal((3, 20), dtype=np.float32)
    out = dev.empty((3, 20), az.f32)
    mod.run(dev.to_device(x), out, 3, 20)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out.to_host(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


MIXED = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=1)
def mixed(x: Slice2D[f32], y: Slice[f32], out: DisjointSlice2D[f32], n: i64) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, (pid.row * 8 - 3, pid.col * 8 + 1), (8, 8), other=0.5)
    row = tile.load(y, pid.col * 8, 8)
    t = t - tile.max(t, axis=1, keepdims=True)  # in place with a broadcast of a reduction
    t = t.T                               # in place through a temporary
    t = t + row                           # (8,) broadcast against rows
    for j in range(n):
        t = tile.where(t > 0.0, t * 0.5, t + tile.min(t))
        if j == 1:
            continue
        t = t + tile.sum(t, axis=0) * 0.001
    acc = tile.matmul(t, t.T, tile.full((8, 8), 1.0, f32))
    tile.store(out, pid, acc + tile.load(out, pid, (8, 8)))
"""


def _mixed_ref(x: np.ndarray, y: np.ndarray, out0: np.ndarray, n: int) -> np.ndarray:
    rows, cols = out0.shape
    res = out0.copy()
    for pr in range(-(-rows // 8)):
        for pc in range(-(-cols // 8)):
            t = np.full((8, 8), 0.5, np.float32)
            for i in range(8):
                for j in range(8):
                    r, c = pr * 8 - 3 + i, pc * 8 + 1 + j
                    if 0 <= r < x.shape[0] and 0 <= c < x.shape[1]:
                        t[i, j] = x[r, c]
            row = np.array([y[pc * 8 + j] if pc * 8 + j < len(y) else 0 for j in range(8)], np.float32)
            t = t - t.max(1, keepdims=True)
            t = t.T.copy()
            t = t + row
            for j in range(n):
                t = np.where(t > 0, t * np.float32(0.5), t + t.min())
                if j == 1:
                    continue
                t = t + t.sum(0, keepdims=True) * np.float32(0.001)
            acc = t @ t.T + 1
            for i in range(8):
                for j in range(8):
                    r, c = pr * 8 + i, pc * 8 + j
                    if r < rows and c < cols:
                        res[r, c] = acc[i, j] + out0[r, c]
    return res


@pytest.mark.parametrize("threads", [1, 32])
def test_mixed_tile_program_matches_numpy(threads: int) -> None:
    k = kernel_ir(MIXED, "mixed")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((19, 21), dtype=np.float32)
    y = rng.standard_normal(21, dtype=np.float32)
    out = rng.standard_normal((19, 21), dtype=np.float32)
    want = _mixed_ref(x, y, out, 4)
    _run_lowered(k, threads, (3, 3), [x, y, out, 4])
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


LOOPS = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=8)
def two(a: Slice2D[f32], c: DisjointSlice2D[f32], n: i64) -> None:
    pid = tile.program_id_2d()
    t = tile.load(a, (pid.row * 16, pid.col * 32), (16, 32))
    u = tile.zeros((32, 16), f32)
    k = 0
    while k < n:
        u = u + t.T * 0.5
        k += 1
        if k > 100:
            break
    w = tile.matmul(t, u, allow_tf32=True)
    v = tile.sum(w, axis=0) + tile.max(w, axis=1, keepdims=True) + tile.min(w)
    if pid.row == 0:
        return
    tile.store(c, pid, tile.matmul(v, tile.full((16, 32), 1.0, f32)) / 16.0 + t)
"""


@pytest.mark.parametrize("threads", [1, 64])
def test_while_break_return_and_reductions_of_every_shape(threads: int) -> None:
    k = kernel_ir(LOOPS, "two")
    rng = np.random.default_rng(8)
    a = rng.standard_normal((40, 70), dtype=np.float32)
    c = np.zeros((40, 70), np.float32)
    _run_lowered(k, threads, (3, 3), [a, c, 3])
    want = np.zeros_like(c)
    for pr in range(1, 3):  # programs of row 0 return before storing
        for pc in range(3):
            t = np.zeros((16, 32), np.float32)
            blk = a[pr * 16 : pr * 16 + 16, pc * 32 : pc * 32 + 32]
            t[: blk.shape[0], : blk.shape[1]] = blk
            u = np.zeros((32, 16), np.float32)
            for _ in range(3):
                u = u + t.T * np.float32(0.5)
            w = t @ u
            v = w.sum(0, keepdims=True) + w.max(1, keepdims=True) + w.min()
            res = (v @ np.ones((16, 32), np.float32)) / 16 + t
            r1, c1 = min(40, pr * 16 + 16), min(70, pc * 32 + 32)
            want[pr * 16 : r1, pc * 32 : c1] = res[: r1 - pr * 16, : c1 - pc * 32]
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-3)


MANY_TYPES = """
from anodize import bf16, bool_, f64, i32, u8
@az.launch_contract(domain=1)
@az.tile_kernel(num_warps=2)
def many(a: Slice[i32], b: Slice[f64], m: DisjointSlice[bool_], s: DisjointSlice[i32], d: DisjointSlice[f64], h: Slice[f16], g: DisjointSlice[bf16], q: Slice[u8]) -> None:
    pid = tile.program_id_1d()
    x = tile.load(a, pid, 64, other=-7)
    y = tile.load(b, pid, 64)
    tile.store(m, pid, (x > 3) and not (y < 0.5))
    tot = tile.sum(x > 0)
    mx = tile.max(x)
    mn = tile.min(~x)
    tile.store(s, pid, abs(-x) + (tot + mx + mn).astype(i32) + x % 5 - x // 3 + (x << 2) + (x >> 1) + (x & 3) + (x | 1) + (x ^ 5))
    z = tile.where(x > 0, y, 2.0) + tile.full(64, 1.5, f64) ** 2.0 + math.pi
    tile.store(d, pid, z + math.floor(2.5) + az.math.fma(y, y, y) + min(y, 3.0) + max(y, z) + tile.load(q, pid, 64).astype(f64))
    hh = tile.load(h, pid, 64)
    tile.store(g, pid, (hh * 2.0 + hh.astype(bf16)).astype(bf16))

"""


def test_tiles_of_every_scalar_kind_lower_on_both_targets() -> None:
    """What the tile typer accepts compiles for the GPU (ptxas too, when present) and the CPU."""
    k = kernel_ir(MANY_TYPES, "many")
    art = compile_gpu(k, "sm_90")
    assert ".entry many" in art.ptx
    cpu = compile_cpu(k)
    rng = np.random.default_rng(9)
    import ml_dtypes

    a = rng.integers(-20, 20, 100).astype(np.int32)
    b = rng.random(100)
    m = np.zeros(100, np.bool_)
    s = np.zeros(100, np.int32)
    d = np.zeros(100, np.float64)
    h = rng.standard_normal(100).astype(np.float16)
    g = np.zeros(100, ml_dtypes.bfloat16)
    q = rng.integers(0, 255, 100).astype(np.uint8)
    flat = []
    for v in (a, b, m, s, d, h, g, q):
        flat += [v, len(v)]
    fault = np.zeros(64, np.uint8)
    cpu.cpu_entry((2, 1, 1), (1, 1, 1), flat, fault.ctypes.data, 1)
    assert not fault.any()
    x = np.concatenate([a, np.full(28, -7, np.int32)])  # tiles of 64, padding `other=-7`
    np.testing.assert_array_equal(m, (a > 3) & ~(b < 0.5))
    want_s = np.zeros(100, np.int64)
    for p in range(2):
        t = x[p * 64 : p * 64 + 64].astype(np.int64)
        extra = (t > 0).sum() + t.max() + (~t).min()
        want_s[p * 64 : p * 64 + 64][: len(a[p * 64 : p * 64 + 64])] = (
            abs(-t) + extra + t % 5 - t // 3 + (t << 2) + (t >> 1) + (t & 3) + (t | 1) + (t ^ 5)
        )[: len(a[p * 64 : p * 64 + 64])]
    np.testing.assert_array_equal(s, want_s.astype(np.int32))


def test_helpers_of_a_tile_kernel_are_scalar_code() -> None:
    src = """
@az.func
def scale(v: f32, s: f32) -> f32:
    return v * s

@az.func
def simt(v: f32) -> f32:
    i = az.thread.index_1d()
    return v + f32(i.get())

@az.func
def deeper(v: f32) -> f32:
    return simt(v) * 2.0

@az.func
def put(c: DisjointSlice[f32], v: f32) -> None:
    pass

@az.launch_contract(domain=1)
@az.tile_kernel
def ok(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    pid = tile.program_id_1d()
    tile.store(c, pid, tile.load(a, pid, 32) * scale(a[0], 2.0))

@az.launch_contract(domain=1)
@az.tile_kernel
def bad(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    pid = tile.program_id_1d()
    x = deeper(a[0])
    put(c, 1.0)
    tile.store(c, pid, tile.load(a, pid, 32))
"""
    assert typed(src, "ok").ir is not None
    t = typed(src, "bad")
    assert [d.code for d in t.diagnostics] == ["az-unsupported", "az-unsupported"]
    assert "thread.index_1d" in t.diagnostics[0].message


# ---- a store whose value reads the output's own tile at other elements (red-team finding) -------

INPLACE_T = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=1)
def tr(c: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    tile.store(c, pid, tile.load(c, pid, (8, 8)).T + 1.0)
"""


@pytest.mark.parametrize("threads", [1, 8, 32])
def test_a_store_reading_its_own_tile_transposed_reads_the_whole_tile_first(threads: int) -> None:
    # inline, element (i, j)'s thread would read c[j, i] while (j, i)'s thread stores it (a race
    # between the program's threads; with one thread, an in-place transpose gone wrong)
    k = kernel_ir(INPLACE_T, "tr")
    m = np.arange(16 * 16, dtype=np.float32).reshape(16, 16)
    want = m.reshape(2, 8, 2, 8).transpose(0, 3, 2, 1).reshape(16, 16) + 1.0
    c = m.copy()
    _run_lowered(k, threads, (2, 2), [c])
    np.testing.assert_array_equal(c, want)
    if threads > 1:  # the temporary's fill and the store are apart by a barrier
        body = walk(lower_tiles(k, threads).body)
        assert any(isinstance(s, ir.Barrier) for s in body)


def test_gpu_block_guard_folds_into_reqntid() -> None:
    """On the GPU the guard's block extents are `.reqntid`'s constants (the driver refuses any
    other block), so the tile add reads no `%ntid` or `%tid.y/z` and calls no fault; the grid's
    unused extents are still checked in the kernel (a launch may not widen the grid)."""
    k = next(k for k in _example_kernels() if k.name == "add")
    ptx = compile_gpu(k, ptxas=False).ptx
    entry = ptx.split(".entry add(")[1].split(".func")[0]
    assert ".reqntid 256, 1, 1" in entry
    for reg in ("%ntid", "%tid.y", "%tid.z", "call.uni __az_fault"):
        assert reg not in entry, reg
    assert "%ctaid.y" in entry and "%ctaid.z" in entry

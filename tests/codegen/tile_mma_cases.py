"""Tile programs of the GEMM class, written as a Triton user would (tests/codegen/test_tile_mma.py
and bench/tile_variants_v2.py): each a kernel source, how to launch it and a float64 NumPy
reference.  `{BM}`, `{BN}`, `{BK}`, `{W}` (warps) and `{T}` (f16 / bf16) are filled in."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

_MODULES: dict[str, Any] = {}


def module_of(tmp_path: Path, text: str) -> Any:
    """The program `text` (HEAD and a case, filled in) imported from a file under `tmp_path`
    (a launch reads the kernel's source), once per text in a process."""
    if text not in _MODULES:
        p = tmp_path / f"mma_{abs(hash(text))}.py"
        p.write_text(text)
        spec = importlib.util.spec_from_file_location(p.stem, p)
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[p.stem] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        _MODULES[text] = mod
    return _MODULES[text]


HEAD = """
import anodize as az
from anodize import DisjointSlice2D, DisjointSlice3D, Slice, Slice2D, Slice3D, bf16, f16, f32, i64, tile
"""

CANONICAL = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={W})
def k(a: Slice2D[{T}], b: Slice2D[{T}], c: DisjointSlice2D[{T}], kdim: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros(({BM}, {BN}), f32)
    for kk in range(0, kdim, {BK}):
        acc = tile.matmul(tile.load(a, (pid.row * {BM}, kk), ({BM}, {BK})), tile.load(b, (kk, pid.col * {BN}), ({BK}, {BN})), acc)
    tile.store(c, pid, acc.astype({T}))
"""

EPILOGUE = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={W})
def k(a: Slice2D[{T}], b: Slice2D[{T}], bias: Slice[{T}], c: DisjointSlice2D[{T}], kdim: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros(({BM}, {BN}), f32)
    for kk in range(0, kdim, {BK}):
        acc = tile.matmul(tile.load(a, (pid.row * {BM}, kk), ({BM}, {BK})), tile.load(b, (kk, pid.col * {BN}), ({BK}, {BN})), acc)
    y = acc + tile.load(bias, (pid.col * {BN},), ({BN},)).astype(f32)
    tile.store(c, pid, tile.where(y > 0.0, y, 0.0).astype({T}))
"""

GELU_RESIDUAL = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={W})
def k(a: Slice2D[{T}], b: Slice2D[{T}], res: Slice2D[{T}], c: DisjointSlice2D[f32], kdim: i64, scale: f32) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros(({BM}, {BN}), f32)
    for kk in range(0, kdim, {BK}):
        acc = tile.matmul(tile.load(a, (pid.row * {BM}, kk), ({BM}, {BK})), tile.load(b, (kk, pid.col * {BN}), ({BK}, {BN})), acc)
    x = acc * scale
    g = 0.5 * x * (1.0 + az.math.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    tile.store(c, pid, g + tile.load(res, (pid.row * {BM}, pid.col * {BN}), ({BM}, {BN})).astype(f32))
"""

B_TRANS = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={W})
def k(a: Slice2D[{T}], b: Slice2D[{T}], c: DisjointSlice2D[{T}], kdim: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros(({BM}, {BN}), f32)
    for kk in range(0, kdim, {BK}):
        acc = tile.matmul(tile.load(a, (pid.row * {BM}, kk), ({BM}, {BK})), tile.load(b, (pid.col * {BN}, kk), ({BN}, {BK})).T, acc)
    tile.store(c, pid, acc.astype({T}))
"""

A_TRANS = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={W})
def k(a: Slice2D[{T}], b: Slice2D[{T}], c: DisjointSlice2D[{T}], kdim: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros(({BM}, {BN}), f32)
    for kk in range(0, kdim, {BK}):
        acc = tile.matmul(tile.load(a, (kk, pid.row * {BM}), ({BK}, {BM})).T, tile.load(b, (kk, pid.col * {BN}), ({BK}, {BN})), acc)
    tile.store(c, pid, acc.astype({T}))
"""

K_TILES = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={W})
def k(a: Slice2D[{T}], b: Slice2D[{T}], c: DisjointSlice2D[{T}], kdim: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros(({BM}, {BN}), f32)
    for t in range(kdim // {BK}):
        acc = tile.matmul(tile.load(a, (pid.row * {BM}, t * {BK}), ({BM}, {BK})), tile.load(b, (t * {BK}, pid.col * {BN}), ({BK}, {BN})), acc)
    tile.store(c, pid, acc.astype({T}))
"""

ACC_IN = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={W})
def k(a: Slice2D[{T}], b: Slice2D[{T}], c0: Slice2D[f32], c: DisjointSlice2D[f32], kdim: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.load(c0, (pid.row * {BM}, pid.col * {BN}), ({BM}, {BN})) * 2.0
    for kk in range(0, kdim, {BK}):
        acc = tile.matmul(tile.load(a, (pid.row * {BM}, kk), ({BM}, {BK})), tile.load(b, (kk, pid.col * {BN}), ({BK}, {BN})), acc)
    tile.store(c, pid, acc)
"""

TWO = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={W})
def k(a: Slice2D[{T}], b: Slice2D[{T}], a2: Slice2D[{T}], b2: Slice2D[{T}], c: DisjointSlice2D[{T}], kdim: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros(({BM}, {BN}), f32)
    for kk in range(0, kdim, {BK}):
        acc = tile.matmul(tile.load(a, (pid.row * {BM}, kk), ({BM}, {BK})), tile.load(b, (kk, pid.col * {BN}), ({BK}, {BN})), acc)
        acc = tile.matmul(tile.load(a2, (pid.row * {BM}, kk), ({BM}, {BK})), tile.load(b2, (kk, pid.col * {BN}), ({BK}, {BN})), acc)
    tile.store(c, pid, acc.astype({T}))
"""

ONE_SHOT = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={W})
def k(a: Slice2D[{T}], b: Slice2D[{T}], c: DisjointSlice2D[f32], kdim: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.matmul(tile.load(a, (pid.row * {BM}, 0), ({BM}, {BK})), tile.load(b, (0, pid.col * {BN}), ({BK}, {BN})))
    tile.store(c, pid, acc * 0.5)
"""

# the matmul written inside the store (language/tile_anf.py hoists it): the same instructions as `ONE_SHOT`'s
STORED = """
@az.launch_contract(domain=2)
@az.tile_kernel(num_warps={W})
def k(a: Slice2D[{T}], b: Slice2D[{T}], c: DisjointSlice2D[f32], kdim: i64) -> None:
    pid = tile.program_id_2d()
    tile.store(c, pid, tile.matmul(tile.load(a, (pid.row * {BM}, 0), ({BM}, {BK})), tile.load(b, (0, pid.col * {BN}), ({BK}, {BN}))))
"""


def _rand(rng: Any, shape: tuple[int, ...], dt: Any) -> Any:
    return rng.standard_normal(shape, dtype=np.float32).astype(dt)


def case(name: str, m: int, n: int, k: int, dt: Any, bk: int, seed: int = 0, batch: int = 0) -> tuple[str, list[Any], Any, dict[str, Any]]:
    """(source, host arguments (arrays and scalars; the output last of the arrays), the float64
    reference of the output, {output index, output dtype name}); "batched" (not in NAMES) takes
    `batch` (m, k) @ (k, n) products, launched over (batch, m, n) in (1, BM, BN) tiles."""
    rng = np.random.default_rng(seed)
    f = lambda x: x.astype(np.float64)  # noqa: E731
    if name == "batched":
        a, b = _rand(rng, (batch, m, k), dt), _rand(rng, (batch, k, n), dt)
        return BATCHED, [a, b, np.zeros((batch, m, n), dt), k], f(a) @ f(b), {}
    if name in ("canonical", "k4095", "bf16"):
        a, b = _rand(rng, (m, k), dt), _rand(rng, (k, n), dt)
        return CANONICAL, [a, b, np.zeros((m, n), dt), k], f(a) @ f(b), {}
    if name == "epilogue":
        a, b, bias = _rand(rng, (m, k), dt), _rand(rng, (k, n), dt), _rand(rng, (n,), dt)
        return EPILOGUE, [a, b, bias, np.zeros((m, n), dt), k], np.maximum(f(a) @ f(b) + f(bias), 0.0), {}
    if name == "gelu_residual":
        a, b, res = _rand(rng, (m, k), dt), _rand(rng, (k, n), dt), _rand(rng, (m, n), dt)
        x = (f(a) @ f(b)) * 0.125
        g = 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
        return GELU_RESIDUAL, [a, b, res, np.zeros((m, n), np.float32), k, np.float32(0.125)], g + f(res), {}
    if name == "b_trans":
        a, b = _rand(rng, (m, k), dt), _rand(rng, (n, k), dt)
        return B_TRANS, [a, b, np.zeros((m, n), dt), k], f(a) @ f(b).T, {}
    if name == "a_trans":
        a, b = _rand(rng, (k, m), dt), _rand(rng, (k, n), dt)
        return A_TRANS, [a, b, np.zeros((m, n), dt), k], f(a).T @ f(b), {}
    if name == "k_tiles":
        a, b = _rand(rng, (m, k), dt), _rand(rng, (k, n), dt)
        kk = k // bk * bk
        return K_TILES, [a, b, np.zeros((m, n), dt), k], f(a[:, :kk]) @ f(b[:kk]), {}
    if name == "acc_in":
        a, b, c0 = _rand(rng, (m, k), dt), _rand(rng, (k, n), dt), _rand(rng, (m, n), np.float32)
        return ACC_IN, [a, b, c0, np.zeros((m, n), np.float32), k], 2.0 * f(c0) + f(a) @ f(b), {}
    if name == "two":
        a, b, a2, b2 = _rand(rng, (m, k), dt), _rand(rng, (k, n), dt), _rand(rng, (m, k), dt), _rand(rng, (k, n), dt)
        return TWO, [a, b, a2, b2, np.zeros((m, n), dt), k], f(a) @ f(b) + f(a2) @ f(b2), {}
    if name == "one_shot":
        a, b = _rand(rng, (m, k), dt), _rand(rng, (k, n), dt)
        kk = min(k, bk)
        return ONE_SHOT, [a, b, np.zeros((m, n), np.float32), k], 0.5 * (f(a[:, :kk]) @ f(b[:kk])), {}
    if name == "stored":
        a, b = _rand(rng, (m, k), dt), _rand(rng, (k, n), dt)
        kk = min(k, bk)
        return STORED, [a, b, np.zeros((m, n), np.float32), k], f(a[:, :kk]) @ f(b[:kk]), {}
    raise KeyError(name)


# batched GEMM (issue 26's 16 x 1024^3 row): one program a (layer, row, col) tile of a 3-D slice
BATCHED = """
@az.launch_contract(domain=3)
@az.tile_kernel(num_warps={W})
def k(a: Slice3D[{T}], b: Slice3D[{T}], c: DisjointSlice3D[{T}], kdim: i64) -> None:
    pid = tile.program_id_3d()
    acc = tile.zeros(({BM}, {BN}), f32)
    for kk in range(0, kdim, {BK}):
        x = tile.load(a, (pid.layer, pid.row * {BM}, kk), (1, {BM}, {BK})).reshape(({BM}, {BK}))
        y = tile.load(b, (pid.layer, kk, pid.col * {BN}), (1, {BK}, {BN})).reshape(({BK}, {BN}))
        acc = tile.matmul(x, y, acc)
    tile.store(c, pid, tile.expand_dims(acc.astype({T}), 0))
"""

NAMES = ["canonical", "epilogue", "gelu_residual", "b_trans", "a_trans", "k_tiles", "acc_in", "two", "one_shot", "stored"]


def source(name: str, bm: int, bn: int, bk: int, warps: int, t: str) -> str:
    src = case(name, 16, 16, 16, np.float16, bk)[0]
    return HEAD + src.format(BM=bm, BN=bn, BK=bk, W=warps, T=t)

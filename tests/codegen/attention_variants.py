"""Attention kernels spelled several ways (the by-operations tile compiler must put each on
tensor cores: language/tile_plan.py), their float64 NumPy references, and a loader that makes a
kernel object from a variant's source (the decorators read source, so each variant is a module
of its own).  Used by tests/codegen/test_tile_attention_ops.py and bench/tile_bench_attention.py."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HEAD = '''
import anodize as az
from anodize import DisjointSlice2D, Slice2D, f16, f32, i64, tile


@az.launch_contract(
    domain=2,
    requires=lambda q, k, v, o, seq: k.shape[0] == q.shape[0] and v.shape[0] == q.shape[0] and o.shape[0] == q.shape[0] and seq > 0,
)
@az.tile_kernel(num_warps=WARPS)
def attention(
    q: Slice2D[f16], k: Slice2D[f16], v: Slice2D[f16], o: DisjointSlice2D[f16], seq: i64, scale: f32,
    BM: az.Constant[int], BN: az.Constant[int], D: az.Constant[int],
) -> None:
'''

BODIES = {
    # examples/tile_attention.py's body
    "example": '''
    pid = tile.program_id_2d()
    qt = tile.load(q, pid, (BM, D))
    base = (pid.row * BM // seq) * seq
    m = tile.full((BM, 1), -1.0e30, f32)
    l = tile.zeros((BM, 1), f32)
    acc = tile.zeros((BM, D), f32)
    for j in range(0, seq, BN):
        s = tile.matmul(qt, tile.load(k, (base + j, 0), (BN, D)).T) * scale
        m_new = max(m, tile.max(s, axis=1, keepdims=True))
        p = az.math.exp(s - m_new)
        alpha = az.math.exp(m - m_new)
        l = l * alpha + tile.sum(p, axis=1, keepdims=True)
        acc = tile.matmul(p.astype(f16), tile.load(v, (base + j, 0), (BN, D)), acc * alpha)
        m = m_new
    result = acc / l
    tile.store(o, pid, result.astype(f16))
''',
    # exp2 with the scale (times log2 e) in the exponent, other names and order
    "exp2": '''
    pid = tile.program_id_2d()
    head0 = (pid.row * BM // seq) * seq
    query = tile.load(q, pid, (BM, D))
    c = scale * 1.4426950408889634
    out = tile.zeros((BM, D), f32)
    row_max = tile.full((BM, 1), -1.0e30, f32)
    denom = tile.zeros((BM, 1), f32)
    for start in range(0, seq, BN):
        scores = tile.matmul(query, tile.load(k, (head0 + start, 0), (BN, D)).T)
        mx = max(row_max, tile.max(scores, axis=1, keepdims=True) * c)
        corr = az.math.exp2(row_max - mx)
        probs = az.math.exp2(scores * c - mx)
        denom = denom * corr + tile.sum(probs, axis=1, keepdims=True)
        out = tile.matmul(probs.astype(f16), tile.load(v, (head0 + start, 0), (BN, D)), out * corr)
        row_max = mx
    tile.store(o, pid, (out / denom).astype(f16))
''',
    # causal: keys after the query masked with tile.arange (no position arrays)
    "causal": '''
    pid = tile.program_id_2d()
    qt = tile.load(q, pid, (BM, D))
    base = (pid.row * BM // seq) * seq
    row0 = pid.row * BM - base
    m = tile.full((BM, 1), -1.0e30, f32)
    l = tile.zeros((BM, 1), f32)
    acc = tile.zeros((BM, D), f32)
    for j in range(0, seq, BN):
        s = tile.matmul(qt, tile.load(k, (base + j, 0), (BN, D)).T) * scale
        s = tile.where(tile.arange(BM)[:, None] + row0 >= tile.arange(BN)[None, :] + j, s, -1.0e30)
        m_new = max(m, tile.max(s, axis=1, keepdims=True))
        p = az.math.exp(s - m_new)
        alpha = az.math.exp(m - m_new)
        l = l * alpha + tile.sum(p, axis=1, keepdims=True)
        acc = tile.matmul(p.astype(f16), tile.load(v, (base + j, 0), (BN, D)), acc * alpha)
        m = m_new
    tile.store(o, pid, (acc / l).astype(f16))
''',
    # one head of any length: keys past `seq` masked (seq need not be a multiple of BN or BM)
    "ragged": '''
    pid = tile.program_id_2d()
    qt = tile.load(q, pid, (BM, D))
    m = tile.full((BM, 1), -1.0e30, f32)
    l = tile.zeros((BM, 1), f32)
    acc = tile.zeros((BM, D), f32)
    for j in range(0, seq, BN):
        s = tile.matmul(qt, tile.load(k, (j, 0), (BN, D)).T) * scale
        s = tile.where(tile.arange(BN)[None, :] + j < seq, s, -1.0e30)
        m_new = max(m, tile.max(s, axis=1, keepdims=True))
        p = az.math.exp(s - m_new)
        alpha = az.math.exp(m - m_new)
        l = l * alpha + tile.sum(p, axis=1, keepdims=True)
        acc = tile.matmul(p.astype(f16), tile.load(v, (j, 0), (BN, D)), acc * alpha)
        m = m_new
    tile.store(o, pid, (acc / l).astype(f16))
''',
}

# causal with the loop ending at the diagonal (keys past the block's last query never read: the work
# SDPA's is_causal does); the tiles the diagonal cuts are masked as in "causal"
BODIES["causal_diag"] = BODIES["causal"].replace("for j in range(0, seq, BN):", "for j in range(0, row0 + BM, BN):")
assert BODIES["causal_diag"] != BODIES["causal"]

VARIANTS = tuple(BODIES)
_LOADED: dict[tuple[str, int, str], Any] = {}


def source(variant: str, warps: int = 4) -> str:
    """The module source of `variant` with `num_warps=warps`."""
    return HEAD.replace("WARPS", str(warps)) + BODIES[variant]


def kernel(variant: str, warps: int = 4, tag: str = "") -> Any:
    """The kernel object of `variant` (its source written to a module of its own; `tag`: another
    object of the same source, e.g. to compile under another switch)."""
    key = (variant, warps, tag)
    if key not in _LOADED:
        path = Path(tempfile.mkdtemp()) / f"attn_{variant}_w{warps}{tag}.py"
        path.write_text(source(variant, warps))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[path.stem] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        _LOADED[key] = mod.attention
    return _LOADED[key]


def reference(variant: str, q: np.ndarray, k: np.ndarray, v: np.ndarray, bh: int, seq: int, scale: float) -> np.ndarray:
    """Float64 attention of (bh * seq, d) heads (causal for "causal" and "causal_diag")."""
    d = q.shape[1]
    qf, kf, vf = (x.astype(np.float64).reshape(bh, seq, d) for x in (q, k, v))
    s = qf @ kf.transpose(0, 2, 1) * scale
    if variant.startswith("causal"):
        s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    out = (p / p.sum(-1, keepdims=True)) @ vf
    return np.asarray(out.reshape(bh * seq, d))

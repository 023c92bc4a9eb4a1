"""autotune_attention: the fused attention forward of examples/tile_attention.py, autotuned over 8
configurations of its query tile (`BM`), key tile (`BN`) and warps per program.

Each configuration binds `BM` and `BN` (the kernel's `az.Constant`s) and `num_warps`; the head
dimension `D` stays the launch's argument (no configuration binds it), so each head dimension,
with the inputs' shapes and `seq`, keys its own choice.  On a GPU with tensor cores the
attention form runs on mma.sync when its tiles split into 16 or 32 query rows a warp
(docs/tiles.md, "The attention form"); a configuration the target cannot take is skipped with
its reason, never run.  On the CPU backend and the debug device the first valid configuration
runs, untimed.  docs/autotune.md.

    python examples/autotune_attention.py
    anodize tune examples/autotune_attention.py:attention --shape bh=16 --shape seq=4096 --shape d=64
"""

from typing import Any

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f16, f32, i64, tile

# (BM, BN, warps): 16 or 32 query rows a warp, key tiles of 32 to 128 rows
CONFIGS = [
    az.Config(BM=bm, BN=bn, num_warps=w)
    for bm, bn, w in ((128, 64, 4), (64, 64, 4), (128, 32, 4), (64, 128, 4), (256, 32, 8), (128, 64, 8), (256, 64, 8), (64, 64, 2))
]
SEQ_MULTIPLE = 256  # every configuration's BM and BN divide it


def inputs(dev: Any, bh: int, seq: int, d: int) -> tuple[Any, tuple[Any, ...]]:
    """What `anodize tune` launches for a shape: (grid, arguments)."""
    rng = np.random.default_rng(0)
    q, k, v = (dev.to_device(rng.standard_normal((bh * seq, d), dtype=np.float32).astype(np.float16)) for _ in range(3))
    return grid(bh * seq, d), (q, k, v, dev.empty((bh * seq, d), az.f16), seq, d ** -0.5, d)


@az.autotune(configs=CONFIGS, key=["q", "seq"], inputs=inputs)
@az.launch_contract(
    domain=2,
    requires=lambda q, k, v, o, seq: k.shape[0] == q.shape[0] and v.shape[0] == q.shape[0] and o.shape[0] == q.shape[0] and seq > 0,
)
@az.tile_kernel(num_warps=4)
def attention(
    q: Slice2D[f16], k: Slice2D[f16], v: Slice2D[f16], o: DisjointSlice2D[f16], seq: i64, scale: f32,
    D: az.Constant[int], BM: az.Constant[int], BN: az.Constant[int],
) -> None:
    pid = tile.program_id_2d()
    qt = tile.load(q, pid, (BM, D))
    base = (pid.row * BM // seq) * seq  # the first row of this program's head
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


def grid(rows: int, d: int) -> Any:
    """The launch grid of a configuration: one program per BM query rows (the whole head dim)."""
    return lambda cfg: az.LaunchConfig.for_tiles((rows, d), (cfg.BM, d))


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, bh: int, seq: int, d: int) -> np.ndarray:
    qf, kf, vf = (x.astype(np.float32).reshape(bh, seq, d) for x in (q, k, v))
    s = qf @ kf.transpose(0, 2, 1) * d ** -0.5
    p = np.exp(s - s.max(-1, keepdims=True))
    weights = p / p.sum(-1, keepdims=True)
    out = weights @ vf
    return np.asarray(out.reshape(bh * seq, d))


def main(batch: int = 1, heads: int = 2, seq: int = 256, d: int = 32) -> np.ndarray:
    assert seq % SEQ_MULTIPLE == 0, f"seq must be a multiple of {SEQ_MULTIPLE} (every configuration's tiles)"
    dev = az.device()
    rng = np.random.default_rng(4)
    bh = batch * heads
    q_h, k_h, v_h = (rng.standard_normal((bh * seq, d), dtype=np.float32).astype(np.float16) for _ in range(3))
    o = dev.empty((bh * seq, d), az.f16)
    attention[grid(bh * seq, d)](dev.to_device(q_h), dev.to_device(k_h), dev.to_device(v_h), o, seq, d ** -0.5, d)
    res = o.to_host().astype(np.float32)
    np.testing.assert_allclose(res, reference(q_h, k_h, v_h, bh, seq, d), rtol=2e-2, atol=2e-2)
    report = next(iter(attention.reports.values()))
    print(f"autotune_attention on {dev.describe()}: batch {batch}, heads {heads}, seq {seq}, head dim {d}, "
          f"chose {report.winner} ({report.source}), matches NumPy")
    return res


if __name__ == "__main__":
    main()

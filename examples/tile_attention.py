"""tile_attention: fused attention forward (flash-attention style), f16 in, f32 accumulate.

Q, K, V and O are (batch * heads * seq, head_dim) matrices, each head's rows contiguous.
One program per BM rows of queries: it streams over the head's keys and values in BN-row
tiles, keeping a running row maximum `m`, a running normaliser `l` and the f32 output
accumulator (the online softmax), so the seq x seq score matrix never exists.  `seq` must be a
multiple of BM and BN (main() checks it); the tile sizes and head_dim are compile-time.

On a GPU with tensor cores (sm_80+) this exact form is recognised and lowered to a
flash-attention kernel on mma.sync (docs/tiles.md, "The attention form"): 128 queries a
program over 4 warps, 32 of them a warp, the scores kept in registers (how Q, K and V are
staged is the compiler's choice, from the tile and the head dimension).  Elsewhere the
generic tile lowering runs it with smaller tiles (every tile in shared memory).

    python examples/tile_attention.py
"""

from typing import Any

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f16, f32, i64, tile


@az.launch_contract(
    domain=2,
    requires=lambda q, k, v, o, seq: k.shape[0] == q.shape[0] and v.shape[0] == q.shape[0] and o.shape[0] == q.shape[0] and seq > 0,
)
@az.tile_kernel(num_warps=4)
def attention(
    q: Slice2D[f16], k: Slice2D[f16], v: Slice2D[f16], o: DisjointSlice2D[f16], seq: i64, scale: f32,
    BM: az.Constant[int], BN: az.Constant[int], D: az.Constant[int],
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


def tiles_for(d: int, tensor_cores: bool = False) -> tuple[int, int]:
    """(BM, BN) for a head dimension: on tensor cores 32 queries a warp (16 past d 128 or with
    more than 4 warps) by 64 keys; else small enough for the generic lowering, which keeps
    every tile in shared memory."""
    if tensor_cores:
        rows = 32 if d <= 128 and attention.num_warps <= 4 else 16
        return (rows * attention.num_warps, 64)
    return (32, 32) if d <= 64 else (16, 32)


def has_tensor_cores(dev: Any) -> bool:
    return getattr(dev, "kind", "") == "cuda" and getattr(dev, "compute_capability", (0, 0)) >= (8, 0)


def run(q: Any, k: Any, v: Any, o: Any, bh: int, seq: int, d: int, tensor_cores: bool = False) -> None:
    bm, bn = tiles_for(d, tensor_cores)
    attention[az.LaunchConfig.for_tiles((bh * seq, d), (bm, d))](q, k, v, o, seq, d ** -0.5, bm, bn, d)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, bh: int, seq: int, d: int) -> np.ndarray:
    qf, kf, vf = (x.astype(np.float32).reshape(bh, seq, d) for x in (q, k, v))
    s = qf @ kf.transpose(0, 2, 1) * d ** -0.5
    p = np.exp(s - s.max(-1, keepdims=True))
    weights = p / p.sum(-1, keepdims=True)
    out = weights @ vf
    return np.asarray(out.reshape(bh * seq, d))


def main(batch: int = 1, heads: int = 2, seq: int = 64, d: int = 32) -> np.ndarray:
    dev = az.device()
    tc = has_tensor_cores(dev) and seq % max(tiles_for(d, True)) == 0  # (else the generic tiles)
    bm, bn = tiles_for(d, tc)
    assert seq % bm == 0 and seq % bn == 0, "seq must be a multiple of the tile sizes"
    rng = np.random.default_rng(4)
    bh = batch * heads
    q_h, k_h, v_h = (rng.standard_normal((bh * seq, d), dtype=np.float32).astype(np.float16) for _ in range(3))
    o = dev.empty((bh * seq, d), az.f16)
    run(dev.to_device(q_h), dev.to_device(k_h), dev.to_device(v_h), o, bh, seq, d, tc)
    res = o.to_host().astype(np.float32)
    np.testing.assert_allclose(res, reference(q_h, k_h, v_h, bh, seq, d), rtol=2e-2, atol=2e-2)
    print(f"tile_attention on {dev.describe()}: batch {batch}, heads {heads}, seq {seq}, head dim {d}, matches NumPy")
    return np.asarray(res)


if __name__ == "__main__":
    main()

"""tile_gemm: C = A @ B as a tile kernel, f16 or bf16 in, f32 accumulate, f16 out.

One program per (BM, BN) tile of C; the K loop carries the f32 accumulator tile.  This is
an ordinary program: the layout plan (language/tile_plan.py) puts its accumulator in registers and
its matmul on tensor cores (docs/tiles.md, "The layout plan"): on an H200 (sm_90) it runs on wgmma, on other GPUs from sm_80 on mma.sync (docs/tiles.md "On tensor cores"), on the
CPU backend on the generic lowering; one generic kernel serves both input types.  The tile
shape is a constant of the kernel: 128 x 256 (BK 64) on a GPU, the tensor cores' tile for 8
warps (two warpgroups of 64 x 256); 64 x 64 (BK 32) on the CPU backend, whose generic lowering keeps every tile in 48 KiB
of block-shared memory.

    python examples/tile_gemm.py
"""

from typing import Any, TypeVar

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, bf16, f16, f32, i64, tile

T = TypeVar("T", f16, bf16)


@az.launch_contract(domain=2, requires=lambda a, b, c, k: a.shape[1] == k and b.shape[0] == k)
@az.tile_kernel(num_warps=8)
def gemm(a: Slice2D[T], b: Slice2D[T], c: DisjointSlice2D[f16], k: i64,
         BM: az.Constant[int], BN: az.Constant[int], BK: az.Constant[int]) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros((BM, BN), f32)
    for kk in range(0, k, BK):
        acc = tile.matmul(tile.load(a, (pid.row * BM, kk), (BM, BK)), tile.load(b, (kk, pid.col * BN), (BK, BN)), acc)
    tile.store(c, pid, acc.astype(f16))


def tiles_for(dev: Any) -> tuple[int, int, int]:
    """(BM, BN, BK) for a device: the tensor cores' tile on a GPU, a small one on the CPU."""
    return (128, 256, 64) if dev.kind == "cuda" else (64, 64, 32)


def run(a: Any, b: Any, c: Any, m: int, n: int, k: int, dev: Any = None) -> None:
    bm, bn, bk = tiles_for(dev or az.device())
    gemm[az.LaunchConfig.for_tiles((m, n), (bm, bn))](a, b, c, k, bm, bn, bk)


def main(m: int = 256, n: int = 192, k: int = 160) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(1)
    out = None
    for name in ("f16", "bf16"):
        if name == "f16":
            dtype: Any = np.float16
        else:
            import ml_dtypes  # NumPy has no bfloat16

            dtype = ml_dtypes.bfloat16
        a_h = rng.standard_normal((m, k), dtype=np.float32).astype(dtype)
        b_h = rng.standard_normal((k, n), dtype=np.float32).astype(dtype)
        c = dev.empty((m, n), az.f16)
        run(dev.to_device(a_h), dev.to_device(b_h), c, m, n, k, dev)
        ref = a_h.astype(np.float32) @ b_h.astype(np.float32)
        res = c.to_host().astype(np.float32)
        np.testing.assert_allclose(res, ref, rtol=1e-2, atol=1e-2 * np.sqrt(k))
        out = res
    print(f"tile_gemm on {dev.describe()}: {m}x{k} @ {k}x{n}, f16 and bf16 in, f32 accumulate, matches NumPy")
    return out  # type: ignore[return-value]


if __name__ == "__main__":
    main()

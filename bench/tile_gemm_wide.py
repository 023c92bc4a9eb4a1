"""The tile GEMM of examples/tile_gemm.py with a 128x256x64 tile over 8 warps (bench/tile_bench.py's
`gemm-wide` row): the same kernel source, the other wgmma shape (two warpgroups of 64 x 256,
128 f32 accumulators a thread, against the example's four of 64 x 128).
"""

from typing import TypeVar

import anodize as az
from anodize import DisjointSlice2D, Slice2D, bf16, f16, f32, i64, tile

T = TypeVar("T", f16, bf16)
BM = 128
BN = 256
BK = 64


@az.launch_contract(domain=2, requires=lambda a, b, c, k: a.shape[1] == k and b.shape[0] == k)
@az.tile_kernel(num_warps=8)
def gemm(a: Slice2D[T], b: Slice2D[T], c: DisjointSlice2D[f16], k: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros((BM, BN), f32)
    for kk in range(0, k, BK):
        acc = tile.matmul(tile.load(a, (pid.row * BM, kk), (BM, BK)), tile.load(b, (kk, pid.col * BN), (BK, BN)), acc)
    tile.store(c, pid, acc.astype(f16))



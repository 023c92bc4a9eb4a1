"""The tile GEMM of examples/tile_gemm.py with a 256x128x64 tile over 16 warps (bench/tile_bench.py's
`gemm-wide` row): the same kernel source, the other wgmma shape (four warpgroups of 64 x 128,
64 f32 accumulators a thread, against the example's two of 64 x 256 with 128: ptxas takes about
half the time on it).
"""

from typing import TypeVar

import anodize as az
from anodize import DisjointSlice2D, Slice2D, bf16, f16, f32, i64, tile

T = TypeVar("T", f16, bf16)
BM = 256
BN = 128
BK = 64


@az.launch_contract(domain=2, requires=lambda a, b, c, k: a.shape[1] == k and b.shape[0] == k)
@az.tile_kernel(num_warps=16)
def gemm(a: Slice2D[T], b: Slice2D[T], c: DisjointSlice2D[f16], k: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros((BM, BN), f32)
    for kk in range(0, k, BK):
        acc = tile.matmul(tile.load(a, (pid.row * BM, kk), (BM, BK)), tile.load(b, (kk, pid.col * BN), (BK, BN)), acc)
    tile.store(c, pid, acc.astype(f16))



"""tile_gemm: C = A @ B as a tile kernel, f16 or bf16 in, f32 accumulate, f16 out.

One program per (BM, BN) tile of C; the K loop carries the f32 accumulator tile.  This is
the canonical GEMM form the compiler recognises (codegen/tile_gemm.py): on a GPU (sm_80 and
later) it runs on tensor cores (mma.sync, ldmatrix, cp.async; docs/tiles.md "On tensor cores"),
on the CPU backend on the generic lowering; one generic kernel serves both input types.

    python examples/tile_gemm.py
"""

from typing import Any, TypeVar

import numpy as np

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


def run(a: Any, b: Any, c: Any, m: int, n: int, k: int) -> None:
    gemm[az.LaunchConfig.for_tiles((m, n), (BM, BN))](a, b, c, k)


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
        run(dev.to_device(a_h), dev.to_device(b_h), c, m, n, k)
        ref = a_h.astype(np.float32) @ b_h.astype(np.float32)
        res = c.to_host().astype(np.float32)
        np.testing.assert_allclose(res, ref, rtol=1e-2, atol=1e-2 * np.sqrt(k))
        out = res
    print(f"tile_gemm on {dev.describe()}: {m}x{k} @ {k}x{n}, f16 and bf16 in, f32 accumulate, matches NumPy")
    return out  # type: ignore[return-value]


if __name__ == "__main__":
    main()

"""autotune_gemm: the tile GEMM of examples/tile_gemm.py, autotuned over 8 configurations.

Each `az.Config` binds the tile shape (the kernel's `az.Constant`s BM, BN, BK) and the compile
options `num_warps` (the block: num_warps * 32 threads) and `num_stages` (the pipelining depth of
the K loop).  On the first launch for a new pair of operand shapes every configuration is checked
(one the checker refuses -- an accumulator past the register budget, say -- is skipped with its
reason and never runs), the rest compile in parallel and are timed on the GPU, and the fastest is
kept (in memory and in the persistent cache).  On the CPU backend the first valid configuration
runs, untimed.  docs/autotune.md.

    python examples/autotune_gemm.py
    anodize tune examples/autotune_gemm.py:gemm --shape m=4096 --shape n=4096 --shape k=4096
"""

from typing import Any, TypeVar

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, bf16, f16, f32, i64, tile

T = TypeVar("T", f16, bf16)

CONFIGS = [
    az.Config(BM=128, BN=256, BK=64, num_warps=8, num_stages=3),
    az.Config(BM=128, BN=256, BK=64, num_warps=8, num_stages=4),
    az.Config(BM=256, BN=128, BK=64, num_warps=16, num_stages=3),
    az.Config(BM=128, BN=128, BK=64, num_warps=8, num_stages=4),
    az.Config(BM=128, BN=128, BK=64, num_warps=4, num_stages=4),
    az.Config(BM=64, BN=128, BK=64, num_warps=4, num_stages=4),
    az.Config(BM=128, BN=64, BK=64, num_warps=4, num_stages=4),
    az.Config(BM=64, BN=64, BK=64, num_warps=4, num_stages=4),
]


def inputs(dev: Any, m: int, n: int, k: int) -> tuple[Any, tuple[Any, ...]]:
    """What `anodize tune` launches for a shape: (grid, arguments)."""
    rng = np.random.default_rng(0)
    a = dev.to_device(rng.standard_normal((m, k), dtype=np.float32).astype(np.float16))
    b = dev.to_device(rng.standard_normal((k, n), dtype=np.float32).astype(np.float16))
    return grid(m, n), (a, b, dev.empty((m, n), az.f16), k)


@az.autotune(configs=CONFIGS, key=["a", "b"], inputs=inputs)
@az.launch_contract(domain=2, requires=lambda a, b, c, k: a.shape[1] == k and b.shape[0] == k)
@az.tile_kernel(num_warps=8)
def gemm(a: Slice2D[T], b: Slice2D[T], c: DisjointSlice2D[f16], k: i64,
         BM: az.Constant[int], BN: az.Constant[int], BK: az.Constant[int]) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros((BM, BN), f32)
    for kk in range(0, k, BK):
        acc = tile.matmul(tile.load(a, (pid.row * BM, kk), (BM, BK)), tile.load(b, (kk, pid.col * BN), (BK, BN)), acc)
    tile.store(c, pid, acc.astype(f16))


def grid(m: int, n: int) -> Any:
    """The launch grid of a configuration: one program per (BM, BN) tile of C."""
    return lambda cfg: az.LaunchConfig.for_tiles((m, n), (cfg.BM, cfg.BN))


def main(m: int = 192, n: int = 160, k: int = 96) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(1)
    a_h = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
    b_h = rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)
    c = dev.empty((m, n), az.f16)
    gemm[grid(m, n)](dev.to_device(a_h), dev.to_device(b_h), c, k)
    res = c.to_host().astype(np.float32)
    np.testing.assert_allclose(res, a_h.astype(np.float32) @ b_h.astype(np.float32), rtol=1e-2, atol=1e-2 * np.sqrt(k))
    report = next(iter(gemm.reports.values()))
    print(f"autotune_gemm on {dev.describe()}: {m}x{k} @ {k}x{n}, chose {report.winner} ({report.source}), matches NumPy")
    return res


if __name__ == "__main__":
    main()

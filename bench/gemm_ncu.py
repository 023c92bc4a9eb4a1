"""One launch each of our canonical tile GEMM and Triton's same program, for Nsight Compute.

    ncu --profile-from-start off --section SpeedOfLight --section WarpStateStats ... \
        python3 bench/gemm_ncu.py [--size 4096] [--tile 128x256x64x8] [--variant canonical]

Both run (and Triton autotunes) before the profiler starts; between cudaProfilerStart and
cudaProfilerStop each kernel launches once, so `--profile-from-start off` profiles exactly the
two kernels (ours is named `k`, Triton's `mm`).  Outputs are checked against torch first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tile_variants_v2 as V  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--tile", default="128x256x64x8")
    ap.add_argument("--variant", default="canonical")
    args = ap.parse_args()
    import torch

    import anodize as az

    s = args.size
    bm, bn, bk, w = (int(v) for v in args.tile.split("x"))
    a = torch.randn(s, s, device="cuda", dtype=torch.float16)
    b = torch.randn(s, s, device="cuda", dtype=torch.float16)
    c = torch.empty(s, s, device="cuda", dtype=torch.float16)
    c3 = torch.empty_like(c)
    mod = V._module(f"ncu_{args.variant}", V.C.source(args.variant, bm, bn, bk, w, "f16"))
    launch = mod.k[az.LaunchConfig.for_tiles((s, s), (bm, bn))]
    tri = V.triton_kernel()
    for _ in range(3):
        launch(a, b, c, s)
        tri(a, b, c3)
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    for out in (c, c3):
        torch.testing.assert_close(out.float(), ref, rtol=3e-2, atol=0.5 + 1e-3 * s ** 0.5)
    torch.cuda.cudart().cudaProfilerStart()
    launch(a, b, c, s)
    tri(a, b, c3)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("profiled: ours `k`", args.tile, "and Triton `mm` at its pick", getattr(tri, "best_config", "?"))


if __name__ == "__main__":
    main()

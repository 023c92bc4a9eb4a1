"""Warp counts and one rewrite of the row-shaped tile examples beside torch (one run, short).

    python3 bench/tile_row_variants.py [--cols 5000] [--no-add]

softmax and layer norm 4096 x cols f32 (default 4096; 5000: a ragged last pass) at 4, 8 and 16
warps, and layer norm with `w` and `b` loaded at the top of the kernel (issued with the row, not
after the two reductions); then the tile add's block sizes (unless --no-add)."""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from tile_variants import variant  # noqa: E402


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--no-add", action="store_true")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F  # noqa: N812

    import anodize as az
    from suite import time_events

    dev = az.device(0)
    src = {n: (ROOT / "examples" / f"{n}.py").read_text() for n in ("tile_add", "tile_softmax", "tile_layernorm")}
    med = statistics.median
    r, s = 4096, args.cols
    x = torch.randn(r, s, device="cuda")
    w, bb = torch.randn(s, device="cuda"), torch.randn(s, device="cuda")
    y = torch.empty_like(x)
    p_sm = med(time_events(lambda: torch.softmax(x, dim=1), 20, "torch"))
    p_ln = med(time_events(lambda: F.layer_norm(x, (s,), w, bb, 1e-5), 20, "torch"))
    eps = np.float32(1e-5)
    early = src["tile_layernorm"].replace(
        "    t = tile.load(x, pid, (ROWS, cols))\n",
        "    wt = tile.load(w, 0, cols)\n    bt = tile.load(b, 0, cols)\n    t = tile.load(x, pid, (ROWS, cols))\n",
    ).replace("* tile.load(w, 0, cols) + tile.load(b, 0, cols))", "* wt + bt)")
    for warps in (4, 8, 16):
        m = variant(f"sm_{warps}", re.sub(r"num_warps=\d+", f"num_warps={warps}", src["tile_softmax"]))
        launch = m.softmax.specialize(cols=s)[az.LaunchConfig.for_tiles((r, s), (1, s))]
        launch(x, y)
        torch.testing.assert_close(y, torch.softmax(x, dim=1))
        ours = med(time_events(lambda: launch(x, y), 20, "anodize", dev.stream))
        print(f"softmax {r}x{s} num_warps={warps}: {ours:.4f} ms, torch {p_sm:.4f} ms, ratio {p_sm / ours:.3f}", flush=True)
        for tag, text in (("", src["tile_layernorm"]), (" w,b first", early)):
            m = variant(f"ln_{warps}_{len(tag)}", re.sub(r"num_warps=\d+", f"num_warps={warps}", text))
            launch2 = m.layer_norm.specialize(cols=s)[az.LaunchConfig.for_tiles((r, s), (1, s))]
            launch2(x, w, bb, y, eps)
            torch.testing.assert_close(y, F.layer_norm(x, (s,), w, bb, 1e-5), rtol=1e-4, atol=1e-4)
            ours = med(time_events(lambda: launch2(x, w, bb, y, eps), 20, "anodize", dev.stream))
            print(f"layer_norm{tag} {r}x{s} num_warps={warps}: {ours:.4f} ms, torch {p_ln:.4f} ms, ratio {p_ln / ours:.3f}", flush=True)
    if args.no_add:
        return
    n = 1 << 28
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    c, c2 = torch.empty_like(a), torch.empty_like(a)
    peer = med(time_events(lambda: torch.add(a, b, out=c2), 10, "torch"))
    for block, warps in ((1024, 4), (1024, 8), (2048, 8)):
        t = src["tile_add"].replace("BLOCK = 1024", f"BLOCK = {block}")
        t = re.sub(r"num_warps=\d+", f"num_warps={warps}", t)
        m = variant(f"add_{block}_{warps}", t)
        launch3 = m.add[az.LaunchConfig.for_tiles((n,), (block,))]
        launch3(a, b, c)
        ours = med(time_events(lambda: launch3(a, b, c), 10, "anodize", dev.stream))
        print(f"add BLOCK={block} num_warps={warps}: {ours:.4f} ms, torch {peer:.4f} ms, ratio {peer / ours:.3f}", flush=True)


if __name__ == "__main__":
    main()

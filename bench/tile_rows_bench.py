"""Row-shaped tile kernels beside torch (issue 26: rows whose length is not a power of two).

    python bench/tile_rows_bench.py [--rounds 15] [--quick]

Softmax (examples/tile_softmax.py) and layer norm (examples/tile_layernorm.py) over 4096 x 5000
and 4096 x 4096 f32, each beside its torch peer (`torch.softmax`, `F.layer_norm`) in one run:
medians of interleaved rounds of 10 calls (bench/tile_bench.py's timing), every output checked
against torch.  At 5000 columns the tile is the row itself (a ragged register layout, no
padding); the row "padded" is the same kernel with the tile padded to 8192 (the old way) for
the before/after in one process.  Targets: >= 1.2x torch at 5000, 4096 no slower than before
(1.52x / 1.36x in the reference run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from tile_bench import time_batched  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="1024 rows (a smoke run)")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F  # noqa: N812
    from cuda.core import EventOptions

    import anodize as az
    import tile_layernorm
    import tile_softmax

    dev = az.device(0)
    opts = EventOptions(timing_enabled=True)

    def ours(fn, batches: int = 1):  # noqa: ANN001, ANN202
        return time_batched(fn, lambda: dev.stream.record(options=opts), lambda e0, e1: (e1.sync(), e1 - e0)[1], dev.stream.sync, batches)

    def theirs(fn, batches: int = 1):  # noqa: ANN001, ANN202
        def record():  # noqa: ANN202
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e

        return time_batched(fn, record, lambda e0, e1: (e1.synchronize(), e0.elapsed_time(e1))[1], torch.cuda.synchronize, batches)

    def paired(fns: list, timers: list) -> list[list[float]]:  # type: ignore[type-arg]
        out: list[list[float]] = [[] for _ in fns]
        for r in range(args.rounds):
            for i in list(range(len(fns)))[:: -1 if r % 2 else 1]:
                out[i] += timers[i](fns[i])
        return out

    rows = 1024 if args.quick else 4096
    print("| kernel | shape | tile | anodize ms | torch ms | ratio |", flush=True)
    print("|---|---|---|---|---|---|", flush=True)
    for cols in (5000, 4096):
        x = torch.randn(rows, cols, device="cuda")
        w = torch.randn(cols, device="cuda")
        b = torch.randn(cols, device="cuda")
        eps = np.float32(1e-5)
        widths = [cols] + ([8192] if cols == 5000 else [])
        for width in widths:
            y = torch.empty_like(x)
            sm = tile_softmax.softmax.specialize(cols=width)[az.LaunchConfig.for_tiles((rows, width), (tile_softmax.ROWS, width))]
            sm(x, y)
            torch.cuda.synchronize()
            torch.testing.assert_close(y, torch.softmax(x, dim=1))
            t = paired([lambda: sm(x, y), lambda: torch.softmax(x, dim=1)], [ours, theirs])
            _row("softmax", rows, cols, width, t)
            ln = tile_layernorm.layer_norm.specialize(cols=width)[az.LaunchConfig.for_tiles((rows, width), (tile_layernorm.ROWS, width))]
            ln(x, w, b, y, eps)
            torch.cuda.synchronize()
            torch.testing.assert_close(y, F.layer_norm(x, (cols,), w, b, 1e-5), rtol=1e-4, atol=1e-4)
            t = paired([lambda: ln(x, w, b, y, eps), lambda: F.layer_norm(x, (cols,), w, b, 1e-5)], [ours, theirs])
            _row("layer norm", rows, cols, width, t)


def _row(name: str, rows: int, cols: int, width: int, t: list[list[float]]) -> None:
    mo, mp = statistics.median(t[0]), statistics.median(t[1])
    tile = f"(1, {width})" + (" padded" if width != cols else "")
    print(f"| {name} | {rows}x{cols} f32 | {tile} | {mo:.4f} | {mp:.4f} | {mp / mo:.3f}x |", flush=True)


if __name__ == "__main__":
    main()

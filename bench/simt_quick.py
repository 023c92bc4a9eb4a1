"""Issue 16's two SIMT targets on the GPU in one short run (device windows): sgemm 4096^3 f32
beside cuBLAS f32 (`torch.matmul`, TF32 off) and softmax 4096x4096 f32 beside `torch.softmax`,
each example beside the variants named on the command line.

    python3 bench/simt_quick.py [--reps 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import anodize as az  # noqa: E402
from thread_tiles_quick import sgemm_once, softmax_once  # noqa: E402


def variant(path: str, tag: str, edits: list[tuple[str, str]]):  # type: ignore[no-untyped-def]
    """A module file (examples/x.py, bench/x.py) with source edits, imported from its own file."""
    import importlib.util
    import tempfile

    src = (ROOT / path).read_text()
    for old, new in edits:
        assert old in src, old
        src = src.replace(old, new)
    p = Path(tempfile.mkdtemp()) / f"{Path(path).stem}_{tag}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(p.stem, p)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[p.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def softmax_warp_once(W, dev, rng, reps: int, label: str) -> None:  # type: ignore[no-untyped-def]
    """bench/softmax_warp.py's kernel (two constants: per, groups) beside torch.softmax."""
    cfg, per = W.config(4096), W.per_thread(4096)
    softmax_any(lambda x, out: W.softmax[cfg](x, out, per, per // W.CHUNK), dev, rng, reps, label)


def softmax_any(launch, dev, rng, reps: int, label: str) -> None:  # type: ignore[no-untyped-def]
    """`launch(x, out)` on 4096x4096 f32 beside torch.softmax."""
    import statistics

    import torch

    from suite import time_events

    rows = cols = 4096
    x_h = rng.standard_normal((rows, cols), dtype=np.float32)
    x, out = dev.to_device(x_h), dev.empty((rows, cols), az.f32)
    launch(x, out)
    tx = torch.from_numpy(x_h).cuda()
    np.testing.assert_allclose(out.to_host(), torch.softmax(tx, dim=1).cpu().numpy(), rtol=1e-4, atol=1e-7)
    ours = statistics.median(time_events(lambda: launch(x, out), reps, "anodize", dev.stream))
    peer = statistics.median(time_events(lambda: torch.softmax(tx, dim=1), reps, "torch"))
    gbs = 2 * rows * cols * 4 / (ours * 1e-3) / 1e9
    print(f"softmax{label} {rows}x{cols}: anodize {ours:.4f} ms ({gbs:.0f} GB/s), torch {peer:.4f} ms, speed {peer / ours:.3f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=70.0, help="seconds; variants past it are skipped")
    args = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import sgemm as G
    import softmax as S

    t0 = time.perf_counter()
    dev = az.device(0)
    rng = np.random.default_rng(0)
    G.main(m=300, k=200, n=260)  # correctness at odd sizes first
    S.main(rows=64, cols=5000)
    sgemm_once(G, dev, rng, args.reps, " (the example)")
    softmax_once(S, dev, rng, args.reps, " (the example)")
    W = "bench/softmax_warp.py"

    def warp_vec() -> None:
        m = variant("bench/softmax_warp_vec.py", "wv", [])
        p = m.warp_per(4096)
        softmax_any(lambda x, out: m.softmax_warp[m.warp_config(4096)](x, out, p, p // m.CHUNK), dev, rng, args.reps,
                    " (a warp a row, t.load/t.store)")

    S_ = "examples/softmax.py"
    tries = [
        ("softmax warp per row, t.load", warp_vec),
        ("sgemm, no min_blocks_per_sm", lambda: sgemm_once(variant("examples/sgemm.py", "nohint", [("    min_blocks_per_sm=2,\n", "")]), dev, rng, args.reps, " (no min_blocks_per_sm)")),
        ("sgemm previous", lambda: sgemm_once(__import__("sgemm_prev"), dev, rng, args.reps, " (previous example)")),
        ("softmax previous", lambda: softmax_once(__import__("softmax_prev"), dev, rng, args.reps, " (previous example)")),
        ("softmax BLOCK=256", lambda: softmax_once(variant(S_, "b256", [("BLOCK = 512", "BLOCK = 256")]), dev, rng, args.reps, " (BLOCK=256)")),
        ("softmax BLOCK=1024", lambda: softmax_once(variant(S_, "b1024", [("BLOCK = 512", "BLOCK = 1024")]), dev, rng, args.reps, " (BLOCK=1024)")),
        ("softmax warp per row", lambda: softmax_warp_once(variant(W, "r4", []), dev, rng, args.reps, " (a warp a row, scalar, 4 rows a block)")),
    ]
    for what, fn in tries:  # a failure here is only reported
        if time.perf_counter() - t0 > args.budget:
            print(f"{what}: skipped (time budget)")
            continue
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            print(f"{what}: {type(e).__name__}: {e}")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()

"""A short H200 timing of the two per-thread-tile examples beside their peers (issue 16):
softmax 4096x4096 f32 against `torch.softmax`, sgemm 4096^3 f32 against cuBLAS f32
(`torch.matmul` with TF32 off).  Median of event-timed reps; bench/examples_bench.py is the
full table, bench/simt_quick.py the session-5 variants (it reuses `sgemm_once`/`softmax_once`)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import anodize as az  # noqa: E402
from suite import time_events  # noqa: E402


def variant(name: str, tag: str, edits: list[tuple[str, str]]):  # type: ignore[no-untyped-def]
    """examples/<name>.py with source edits, imported from its own file (kernels are read from source)."""
    import importlib.util
    import tempfile

    src = (ROOT / "examples" / f"{name}.py").read_text()
    for old, new in edits:
        assert old in src, old
        src = src.replace(old, new)
    path = Path(tempfile.mkdtemp()) / f"{name}_{tag}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def main(reps: int = 20) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import sgemm as G
    import softmax as S

    dev = az.device(0)
    rng = np.random.default_rng(0)
    sgemm_once(G, dev, rng, reps, " (the example)")
    softmax_once(S, dev, rng, reps, " (BLOCK=512, the example)")
    tries = [
        ("sgemm double-buffered", lambda: sgemm_once(__import__("sgemm_double_buffer"), dev, rng, reps, " (double-buffered shared)")),
        ("softmax BLOCK=1024", lambda: softmax_once(variant("softmax", "b1024", [("BLOCK = 512", "BLOCK = 1024")]), dev, rng, reps, " (BLOCK=1024)")),
        ("softmax BLOCK=256", lambda: softmax_once(variant("softmax", "b256", [("BLOCK = 512", "BLOCK = 256")]), dev, rng, reps, " (BLOCK=256)")),
    ]
    for what, fn in tries:  # variants beside the examples; a failure here is only reported
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            print(f"{what}: {type(e).__name__}: {e}")


def softmax_once(S, dev, rng, reps: int, label: str) -> None:  # type: ignore[no-untyped-def]
    import torch

    rows = cols = 4096
    x_h = rng.standard_normal((rows, cols), dtype=np.float32)
    x, out = dev.to_device(x_h), dev.empty((rows, cols), az.f32)
    cfg, per = S.config(rows), S.per_thread(cols)
    S.softmax[cfg](x, out, per)
    tx = torch.from_numpy(x_h).cuda()
    ref = torch.softmax(tx, dim=1).cpu().numpy()
    np.testing.assert_allclose(out.to_host(), ref, rtol=1e-4, atol=1e-7)
    ours = statistics.median(time_events(lambda: S.softmax[cfg](x, out, per), reps, "anodize", dev.stream))
    peer = statistics.median(time_events(lambda: torch.softmax(tx, dim=1), reps, "torch"))
    gbs = 2 * rows * cols * 4 / (ours * 1e-3) / 1e9
    print(f"softmax{label} {rows}x{cols}: anodize {ours:.4f} ms ({gbs:.0f} GB/s), torch {peer:.4f} ms, speed {peer / ours:.3f}x")


def sgemm_once(G, dev, rng, reps: int, label: str) -> None:  # type: ignore[no-untyped-def]
    import torch

    s = 4096
    a_h, b_h = rng.standard_normal((s, s), dtype=np.float32), rng.standard_normal((s, s), dtype=np.float32)
    a, b, c = dev.to_device(a_h), dev.to_device(b_h), dev.empty((s, s), az.f32)
    gcfg = G.config(s, s)
    G.sgemm[gcfg](a, b, c)
    ta, tb = torch.from_numpy(a_h).cuda(), torch.from_numpy(b_h).cuda()
    ref64 = (ta.double() @ tb.double()).cpu().numpy()
    err = np.linalg.norm(c.to_host() - ref64) / np.linalg.norm(ref64)
    assert err < 1e-5, err
    ours = statistics.median(time_events(lambda: G.sgemm[gcfg](a, b, c), reps, "anodize", dev.stream))
    peer = statistics.median(time_events(lambda: torch.matmul(ta, tb), reps, "torch"))
    tf = 2 * s**3 / (ours * 1e-3) / 1e12
    print(f"sgemm{label} {s}^3: anodize {ours:.3f} ms ({tf:.1f} TFLOP/s, rel err {err:.1e}), cuBLAS f32 {peer:.3f} ms "
          f"({2 * s**3 / (peer * 1e-3) / 1e12:.1f} TFLOP/s), speed {peer / ours:.3f}x")


if __name__ == "__main__":
    main()

"""Tile-size and warp-count variants of the memory-bound tile examples, beside torch (one run).

    python3 bench/tile_variants.py

Each variant is the example's kernel with other module constants / `num_warps`, written to a
temporary module (the front end reads kernels from source) and event-timed like
bench/tile_bench.py.  Used to pick the examples' defaults."""

from __future__ import annotations

import importlib.util
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def variant(name: str, text: str):  # noqa: ANN201
    d = Path(tempfile.mkdtemp())
    p = d / f"{name}.py"
    p.write_text(text)
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def main() -> None:
    import torch
    import torch.nn.functional as F  # noqa: N812

    import anodize as az
    from suite import time_events

    dev = az.device(0)
    src = {n: (ROOT / "examples" / f"{n}.py").read_text() for n in ("tile_add", "tile_softmax", "tile_layernorm")}

    def med(ms: list[float]) -> float:
        return statistics.median(ms)

    n = 1 << 28
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    c, c2 = torch.empty_like(a), torch.empty_like(a)
    peer = med(time_events(lambda: torch.add(a, b, out=c2), 10, "torch"))
    for block in (1024, 2048, 4096, 8192):
        for warps in (4, 8):
            t = src["tile_add"].replace("BLOCK = 1024", f"BLOCK = {block}").replace("num_warps=8", f"num_warps={warps}")
            m = variant(f"add_{block}_{warps}", t)
            launch = m.add[az.LaunchConfig.for_tiles((n,), (block,))]
            launch(a, b, c)
            ours = med(time_events(lambda: launch(a, b, c), 10, "anodize", dev.stream))
            print(f"add BLOCK={block} num_warps={warps}: {ours:.4f} ms, torch {peer:.4f} ms, ratio {peer / ours:.3f}", flush=True)
    del a, b, c, c2
    s = 4096
    x = torch.randn(s, s, device="cuda")
    w, bb = torch.randn(s, device="cuda"), torch.randn(s, device="cuda")
    y = torch.empty_like(x)
    p_sm = med(time_events(lambda: torch.softmax(x, dim=1), 10, "torch"))
    p_ln = med(time_events(lambda: F.layer_norm(x, (s,), w, bb, 1e-5), 10, "torch"))
    for rows in (1, 2):
        for warps in (4, 8, 16):
            t = src["tile_softmax"].replace("ROWS = 1", f"ROWS = {rows}").replace("num_warps=8", f"num_warps={warps}")
            m = variant(f"sm_{rows}_{warps}", t)
            launch = m.softmax.specialize(cols=s)[az.LaunchConfig.for_tiles((s, s), (rows, s))]
            launch(x, y)
            ours = med(time_events(lambda: launch(x, y), 10, "anodize", dev.stream))
            torch.testing.assert_close(y, torch.softmax(x, dim=1))
            print(f"softmax ROWS={rows} num_warps={warps}: {ours:.4f} ms, torch {p_sm:.4f} ms, ratio {p_sm / ours:.3f}", flush=True)
            t = src["tile_layernorm"].replace("ROWS = 1", f"ROWS = {rows}").replace("num_warps=8", f"num_warps={warps}")
            m = variant(f"ln_{rows}_{warps}", t)
            launch2 = m.layer_norm.specialize(cols=s)[az.LaunchConfig.for_tiles((s, s), (rows, s))]
            eps = __import__("numpy").float32(1e-5)
            launch2(x, w, bb, y, eps)
            ours = med(time_events(lambda: launch2(x, w, bb, y, eps), 10, "anodize", dev.stream))
            print(f"layer_norm ROWS={rows} num_warps={warps}: {ours:.4f} ms, torch {p_ln:.4f} ms, ratio {p_ln / ours:.3f}", flush=True)


if __name__ == "__main__":
    main()

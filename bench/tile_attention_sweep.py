"""Tile attention on tensor cores: time a few (BM, BN, num_warps) choices of examples/tile_attention.py's
kernel against torch SDPA (H200, batch 4, 16 heads, seq 4096, f16).  Device-window helper.

    python3 bench/tile_attention_sweep.py [d64:128x64x8,d128:128x64x8 ...]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

# d:BMxBNxWARPS[:sSTAGES][:bMINBLOCKS][:l] (ANODIZE_ATTN_STAGES / _MINB / _LAZY, read at compile)
DEFAULT = ["128:64x32x4", "128:64x64x4", "64:128x64x8", "64:64x64x4", "64:128x64x4", "128:64x32x4:l",
           "128:64x64x4:l", "64:128x64x8:l", "128:128x64x8", "128:64x32x4:s1", "128:64x16x4", "128:128x64x8:l",
           "64:64x64x4:l", "64:128x64x8:s1:b1", "128:128x32x8", "64:128x128x8"]


_MODS: dict = {}  # type: ignore[type-arg]


def with_warps(w: int, tag: str = ""):  # type: ignore[no-untyped-def]  # the example with num_warps=w (read from source)
    import importlib.util
    import tempfile

    # a module (a kernel object, a compile) per knob setting: the knobs are read at compile time
    if (w, tag) not in _MODS:
        text = (ROOT / "examples" / "tile_attention.py").read_text()
        text = text.replace("@az.tile_kernel(num_warps=8)", f"@az.tile_kernel(num_warps={w})")
        path = Path(tempfile.mkdtemp()) / f"tile_attention_w{w}_{abs(hash(tag))}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[path.stem] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        _MODS[(w, tag)] = mod
    return _MODS[(w, tag)]


def main() -> None:
    import numpy as np
    import torch
    import torch.nn.functional as F  # noqa: N812

    import anodize as az
    from suite import time_events

    dev = az.device(0)
    bsz, heads, seq = 4, 16, 4096
    qkv: dict = {}
    for item in sys.argv[1:] or DEFAULT:
        d_s, cfg, *knobs = item.split(":")
        d = int(d_s)
        os.environ["ANODIZE_ATTN_STAGES"] = next((x[1:] for x in knobs if x.startswith("s")), "")
        os.environ["ANODIZE_ATTN_MINB"] = next((x[1:] for x in knobs if x.startswith("b")), "0")
        os.environ["ANODIZE_ATTN_LAZY"] = "1" if "l" in knobs else ""
        bm, bn, w = (int(x) for x in cfg.split("x"))
        if d not in qkv:
            torch.manual_seed(d)
            qkv[d] = [torch.randn(bsz, heads, seq, d, device="cuda", dtype=torch.float16) for _ in range(3)]
        q, k, v = qkv[d]
        o = torch.empty(bsz * heads * seq, d, device="cuda", dtype=torch.float16)
        flat = [t.reshape(bsz * heads * seq, d) for t in (q, k, v)]
        kern = with_warps(w, ":".join(knobs)).attention
        t0 = time.perf_counter()
        try:
            launch = kern.specialize(BM=bm, BN=bn, D=d)[az.LaunchConfig.for_tiles((bsz * heads * seq, d), (bm, d))]
            scale = np.float32(d ** -0.5)
            launch(*flat, o, seq, scale)
            torch.cuda.synchronize()
            ref = F.scaled_dot_product_attention(q, k, v)
            err = (o.view(bsz, heads, seq, d).float() - ref.float()).abs().max().item()
            ok = err < 2e-2
            t_ours = sorted(time_events(lambda: launch(*flat, o, seq, scale), 5, "anodize", dev.stream))[2]
            t_peer = sorted(time_events(lambda: F.scaled_dot_product_attention(q, k, v), 5, "torch"))[2]
        except Exception as e:  # noqa: BLE001
            print(f"{item}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        fl = 4.0 * bsz * heads * seq * seq * d
        print(f"{item}: maxerr {err:.2e} {'ok' if ok else 'WRONG'} | ours {t_ours:.3f} ms "
              f"{fl / t_ours / 1e9:.1f} TFLOP/s | sdpa {t_peer:.3f} ms {fl / t_peer / 1e9:.1f} TFLOP/s | "
              f"ratio {t_peer / t_ours:.3f} | {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()

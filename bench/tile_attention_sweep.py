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

# d:BMxBNxWARPS[:sSTAGES][:bMINBLOCKS][:qQREGS][:gGROUPS][:y0][:l0|:l1] (ANODIZE_ATTN_STAGES / _MINB / _QREGS /
# _GROUPS / _DYNAMIC=0 / _LAZY, read at compile; without them the compiler's choice)
DEFAULT = ["128:128x64x4", "128:128x64x4:l0", "128:128x64x4:s1", "128:128x32x4", "128:128x64x8", "128:128x64x8:y0:l0",
           "64:128x64x4", "64:128x64x4:l0", "64:128x64x8:l0", "64:256x64x8"]


_MODS: dict = {}  # type: ignore[type-arg]


def with_warps(w: int, tag: str = ""):  # type: ignore[no-untyped-def]  # the example with num_warps=w (read from source)
    import importlib.util
    import tempfile

    # a module (a kernel object, a compile) per knob setting: the knobs are read at compile time
    if (w, tag) not in _MODS:
        text = (ROOT / "examples" / "tile_attention.py").read_text()
        text = text.replace("@az.tile_kernel(num_warps=4)", f"@az.tile_kernel(num_warps={w})")
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
    sdpa: dict = {}
    knobs_env = {"s": "ANODIZE_ATTN_STAGES", "b": "ANODIZE_ATTN_MINB", "q": "ANODIZE_ATTN_QREGS", "y": "ANODIZE_ATTN_DYNAMIC",
                 "g": "ANODIZE_ATTN_GROUPS"}
    for item in sys.argv[1:] or DEFAULT:
        d_s, cfg, *knobs = item.split(":")
        d = int(d_s)
        for key, var in knobs_env.items():
            os.environ[var] = next((x[1:] for x in knobs if x.startswith(key)), "0" if key == "b" else "")
        os.environ["ANODIZE_ATTN_LAZY"] = next(((x[1:] or "1") for x in knobs if x.startswith("l")), "")
        bm, bn, w = (int(x) for x in cfg.split("x"))
        fl = 4.0 * bsz * heads * seq * seq * d
        if d not in qkv:
            torch.manual_seed(d)
            qkv[d] = [torch.randn(bsz, heads, seq, d, device="cuda", dtype=torch.float16) for _ in range(3)]
            q, k, v = qkv[d]
            t_peer = sorted(time_events(lambda: F.scaled_dot_product_attention(q, k, v), 7, "torch"))[3]
            sdpa[d] = (F.scaled_dot_product_attention(q, k, v), t_peer)
            print(f"d{d} sdpa {t_peer:.4f} ms {fl / t_peer / 1e9:.1f} TFLOP/s", flush=True)
        q, k, v = qkv[d]
        ref, t_peer = sdpa[d]
        o = torch.empty(bsz * heads * seq, d, device="cuda", dtype=torch.float16)
        flat = [t.reshape(bsz * heads * seq, d) for t in (q, k, v)]
        kern = with_warps(w, ":".join(knobs)).attention
        t0 = time.perf_counter()
        try:
            spec = kern.specialize(BM=bm, BN=bn, D=d)
            launch = spec[az.LaunchConfig.for_tiles((bsz * heads * seq, d), (bm, d))]
            scale = np.float32(d ** -0.5)
            launch(*flat, o, seq, scale)
            torch.cuda.synchronize()
            err = (o.view(bsz, heads, seq, d).float() - ref.float()).abs().max().item()
            ok = err < 2e-2
            t_ours = sorted(time_events(lambda: launch(*flat, o, seq, scale), 7, "anodize", dev.stream))[3]
        except Exception as e:  # noqa: BLE001
            print(f"{item}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        print(f"{item}: maxerr {err:.2e} {'ok' if ok else 'WRONG'} | ours {t_ours:.4f} ms "
              f"{fl / t_ours / 1e9:.1f} TFLOP/s | ratio {t_peer / t_ours:.3f} | {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()

"""Attention compiled by operations (the layout plan's row mode: no recognised form) beside the
recognised form and torch SDPA, H200, batch 4, 16 heads, seq 4096, f16, each output checked
against SDPA: examples/tile_attention.py's kernel with the form on, then with it off
(`ANODIZE_ATTN_FORM=off`), and the variants of tests/codegen/attention_variants.py (exp2 with
the scale in the exponent, causal through `tile.arange`, causal_diag with the loop ending at the
diagonal), d64 and d128, 4 and 8 warps; `NAME:FLAGS`
turns on the by-ops switches that are off by default (letters below); the third argument picks
the warp counts.  `ANODIZE_TILE_ATTN_WGMMA` (wgmma for the by-ops matmuls on sm_90, on by default;
`=0` the mma.sync loop) is read from the environment as set.  Exits 1 when any row failed or was wrong (so a batch run checks itself).

    python3 bench/tile_attention_ops.py [form,example,exp2:phf,causal:prf] [64,128] [4,8]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "codegen"))


def main() -> None:
    import numpy as np
    import torch
    import torch.nn.functional as F  # noqa: N812

    import anodize as az
    import attention_variants as AV
    import tile_attention as EX
    from suite import time_events

    dev = az.device(0)
    # NAME[:p0]: ":p0" compiles with ANODIZE_TILE_PREFETCH=0 (each tile staged at its matmul);
    # NAME[:FLAGS], FLAGS letters of tools/ptx_mix.py's modes: p prefetch, h Q held in registers
    # (tile_plan.A_HELD_LIMIT 64), f f16x2 packing, r Q resident in shared memory, v aligned loop version,
    # e fast exponentials (ANODIZE_FAST_EXP), g one wait an iteration (ANODIZE_TILE_ONE_WAIT), x ldmatrix
    # at a lane base plus an immediate (ANODIZE_TILE_LDSM_XOR), m affine mask skipped where whole (ANODIZE_TILE_MASK_SKIP),
    # l lazy rescale (ANODIZE_TILE_LAZY_RESCALE), w whole-tile copies (ANODIZE_TILE_WHOLE_TILE),
    # c next tiles copied before the first mma (ANODIZE_TILE_COPY_FIRST)
    from anodize.language import tile_plan

    sys.path.insert(0, str(ROOT / "tools"))
    from ptx_mix import MODE_SWITCHES

    variants = (sys.argv[1] if len(sys.argv) > 1 else "form,example,exp2,causal,example:p0").split(",")
    dims = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "64,128").split(",")]
    warp_counts = [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "4,8").split(",")]
    bsz, heads, seq = 4, 16, 4096
    bad = 0
    for d in dims:
        torch.manual_seed(d)
        q, k, v = (torch.randn(bsz, heads, seq, d, device="cuda", dtype=torch.float16) for _ in range(3))
        flat = [t.reshape(bsz * heads * seq, d) for t in (q, k, v)]
        peers = {}
        for causal in (False, True):
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            t = sorted(time_events(lambda c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c), 7, "torch"))[3]
            peers[causal] = (ref, t)
            print(f"d{d} sdpa{' causal' if causal else ''} {t:.4f} ms", flush=True)
        for item in variants:
            name, _, knob = item.partition(":")
            for flag, switch in MODE_SWITCHES.items():
                os.environ[switch] = "1" if knob != "p0" and flag in knob else "0"
            if knob == "p0":
                os.environ["ANODIZE_TILE_PREFETCH"] = "0"
            tile_plan.A_HELD_LIMIT = 64 if knob != "p0" and "h" in knob else 0
            for warps, bm in ((w, 128) for w in warp_counts):
                causal = name.startswith("causal")
                fl = 4.0 * bsz * heads * seq * seq * d / (2 if causal else 1)
                os.environ["ANODIZE_ATTN_FORM"] = "" if name == "form" else "off"
                kern = EX.attention if name == "form" else AV.kernel(name, warps, knob)
                if name == "form" and warps != EX.attention.num_warps:
                    continue
                o = torch.empty(bsz * heads * seq, d, device="cuda", dtype=torch.float16)
                t0 = time.perf_counter()
                try:
                    launch = kern.specialize(BM=bm, BN=64, D=d)[az.LaunchConfig.for_tiles((bsz * heads * seq, d), (bm, d))]
                    scale = np.float32(d ** -0.5)
                    launch(*flat, o, seq, scale)
                    torch.cuda.synchronize()
                    ref, t_peer = peers[causal]
                    err = (o.view(bsz, heads, seq, d).float() - ref.float()).abs().max().item()
                    t_ours = sorted(time_events(lambda: launch(*flat, o, seq, scale), 7, "anodize", dev.stream))[3]
                except Exception as e:  # noqa: BLE001
                    print(f"d{d} {item} w{warps}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
                    bad += 1
                    continue
                bad += not err < 2e-2  # (NaN counts as wrong)
                print(f"d{d} {item:10s} w{warps} bm{bm}: maxerr {err:.2e} {'ok' if err < 2e-2 else 'WRONG'} | ours {t_ours:.4f} ms "
                      f"{fl / t_ours / 1e9:.1f} TFLOP/s | vs sdpa{' causal' if causal else ''} {t_peer / t_ours:.3f}x | "
                      f"{time.perf_counter() - t0:.1f} s", flush=True)

    if bad:
        print(f"{bad} row(s) FAILED or WRONG", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()

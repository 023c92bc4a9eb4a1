#!/usr/bin/env bash
# attn128 device window: tile attention variants at d 64 / d 128 against SDPA (bench/tile_attention_sweep.py)
export ANODIZE_CACHE=off
mkdir -p "$OUTDIR"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader > "$OUTDIR/gpu.txt" 2>&1
timeout 62 python3 bench/tile_attention_sweep.py ${ATTN_SWEEP:-128:128x64x4 128:256x64x8 128:128x64x4:l 128:256x32x8 128:128x32x4 128:128x64x8 128:128x64x8:y0 64:128x64x8 64:128x64x4 64:256x64x8 128:256x64x8:l 128:128x64x4:s1} 2>&1 | tee "$OUTDIR/sweep.txt"
echo "rc ${PIPESTATUS[0]}"
# correctness of the new variants (Q from shared, 32 rows a warp at d 128, dynamic shared; the 2-byte path)
timeout 24 python3 -m pytest -v -m gpu tests/codegen/test_tile_attention_tc.py -k "256-64-128 or 128-64-128-4-2 or 100-124 or 128-64-64-8-1" -p no:cacheprovider > "$OUTDIR/tests.txt" 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed" "$OUTDIR/tests.txt" | sed 's/.*:://' | cut -c1-120

#!/usr/bin/env bash
# attn128 device window: tile attention variants at d 64 / d 128 against SDPA (bench/tile_attention_sweep.py),
# then GPU twins of the new paths (2-byte copies with Q from shared; two warp groups; ragged sizes)
export ANODIZE_CACHE=off
mkdir -p "$OUTDIR"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader > "$OUTDIR/gpu.txt" 2>&1
timeout 64 python3 bench/tile_attention_sweep.py ${ATTN_SWEEP:-128:128x64x4 128:128x64x8:g2 128:256x64x8 128:128x64x8:y0 64:128x64x8 64:128x64x4 64:128x64x8:g2 128:128x32x4 128:128x64x4:l 128:128x64x8:g2:l 128:128x32x8:g2 128:128x64x8 128:256x32x8 64:256x64x8} 2>&1 | tee "$OUTDIR/sweep.txt"
echo "rc ${PIPESTATUS[0]}"
timeout 21 python3 -m pytest -v -m gpu tests/codegen/test_tile_attention_tc.py -p no:cacheprovider \
  -k "100-124-128-64-128-4-2 or two_warp_groups and (200-124 or 64-128-128 or 320-128)" > "$OUTDIR/tests.txt" 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed" "$OUTDIR/tests.txt" | sed 's/.*:://' | cut -c1-120

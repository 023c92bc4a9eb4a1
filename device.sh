#!/usr/bin/env bash
# attn128 device window w2: the bench rows with the compiler's choice (examples/tile_attention.py: 128x64 over
# 4 warps, Q from shared at d 128, lazy rescaling), beside the old and eager variants, then GPU twins
export ANODIZE_CACHE=off
mkdir -p "$OUTDIR"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader > "$OUTDIR/gpu.txt" 2>&1
timeout 40 python3 bench/tile_bench.py --only attention64,attention128 2>&1 | tee "$OUTDIR/bench.txt"
timeout 28 python3 bench/tile_attention_sweep.py ${ATTN_SWEEP:-128:128x64x4:l0 128:128x64x8:y0:l0 64:128x64x4:l0 64:128x64x8:l0 128:128x64x4:s1} 2>&1 | tee "$OUTDIR/sweep.txt"
timeout 18 python3 -m pytest -v -m gpu tests/codegen/test_tile_attention_tc.py -p no:cacheprovider \
  -k "sdpa and (128-64-128-4-2 or 128-64-128-4-0 or 128-64-64-4-0) or ragged and (100-124 or 300-128 or 96-60-128-64-64-8-2)" > "$OUTDIR/tests.txt" 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed" "$OUTDIR/tests.txt" | sed 's/.*:://' | cut -c1-120

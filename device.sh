#!/usr/bin/env bash
# attn device window: the GPU twins (correctness), then the attention sweep (timings + correctness vs SDPA).
OUTDIR=${OUTDIR:-/tmp/attn_out}
mkdir -p "$OUTDIR"
export ANODIZE_CACHE=off
T0=$(date +%s)
timeout 38 python3 -m pytest -v -m gpu tests/codegen/test_tile_attention_tc.py -p no:cacheprovider > "$OUTDIR/pytest_full.txt" 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed|^E " "$OUTDIR/pytest_full.txt" | cut -c1-160 | head -30
LEFT=$(( 86 - ($(date +%s) - T0) ))
echo "-- sweep (${LEFT}s left)"
timeout $LEFT python3 bench/tile_attention_sweep.py 2>&1 | tee "$OUTDIR/sweep.txt" | grep -v Warning
echo "-- total $(( $(date +%s) - T0 ))s"

#!/usr/bin/env bash
# attn device window: the attention sweep (timings + correctness vs SDPA), then the GPU twins.
OUTDIR=${OUTDIR:-/tmp/attn_out}
mkdir -p "$OUTDIR"
T0=$(date +%s)
timeout 50 python3 bench/tile_attention_sweep.py 2>&1 | tee "$OUTDIR/sweep.txt" | grep -v Warning
LEFT=$(( 85 - ($(date +%s) - T0) ))
echo "-- pytest (${LEFT}s left)"
timeout $LEFT python3 -m pytest -q -x -m gpu tests/codegen/test_tile_attention_tc.py -p no:cacheprovider 2>&1 | tail -25 | tee "$OUTDIR/pytest.txt"
echo "-- total $(( $(date +%s) - T0 ))s"

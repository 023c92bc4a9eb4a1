#!/usr/bin/env bash
# attn device window: the tile bench's attention rows (the example as committed: 8 warps; then the
# same example with num_warps=4), the GPU twins, then a sweep of tile choices (timings + maxerr vs SDPA).
OUTDIR=${OUTDIR:-/tmp/attn_out}
mkdir -p "$OUTDIR"
export ANODIZE_CACHE=off
T0=$(date +%s)
echo "-- tile_bench, example as committed (num_warps=8)"
timeout 15 python3 bench/tile_bench.py --only attention64,attention128 2>&1 | grep -v Warning | tee "$OUTDIR/bench_w8.txt"
sed -i 's/@az.tile_kernel(num_warps=8)/@az.tile_kernel(num_warps=4)/' examples/tile_attention.py
echo "-- tile_bench, the example with num_warps=4"
timeout 15 python3 bench/tile_bench.py --only attention64,attention128 2>&1 | grep -v Warning | tee "$OUTDIR/bench_w4.txt"
sed -i 's/@az.tile_kernel(num_warps=4)/@az.tile_kernel(num_warps=8)/' examples/tile_attention.py
echo "-- pytest ($(( $(date +%s) - T0 ))s)"
timeout 28 python3 -m pytest -v -m gpu tests/codegen/test_tile_attention_tc.py -p no:cacheprovider > "$OUTDIR/pytest_full.txt" 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed|^E " "$OUTDIR/pytest_full.txt" | cut -c1-160 | head -30
LEFT=$(( 87 - ($(date +%s) - T0) ))
echo "-- sweep (${LEFT}s left)"
timeout $LEFT python3 bench/tile_attention_sweep.py 2>&1 | tee "$OUTDIR/sweep.txt" | grep -v Warning
echo "-- total $(( $(date +%s) - T0 ))s"

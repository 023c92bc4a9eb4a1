#!/bin/bash
# simtperf's device window: the SIMT sgemm/softmax examples on the GPU (correctness at odd
# sizes, then 4096 timings beside torch, variants after), then the GPU twins of the tile
# tests, under 90 s.  Writes $OUTDIR/simt_quick.txt and $OUTDIR/pytest.txt.
OUTDIR=${OUTDIR:-/tmp/simtperf_out}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
timeout 60 python3 bench/simt_quick.py --reps 20 --budget 48 > "$OUTDIR/simt_quick.txt" 2>&1
echo "simt_quick rc=$?"
grep -E "speed|Error|error|skipped|total" "$OUTDIR/simt_quick.txt" | cut -c1-200
timeout 24 python3 -m pytest -q -x -m gpu tests/codegen/test_thread_tiles.py tests/codegen/test_tile_io.py tests/codegen/test_collectives.py > "$OUTDIR/pytest.txt" 2>&1
echo "pytest rc=$?"; tail -3 "$OUTDIR/pytest.txt"

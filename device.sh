#!/bin/bash
# simtperf's device window: the SIMT sgemm/softmax examples on the GPU (correctness at odd
# sizes, then 4096 timings beside torch), under 90 s.  Writes $OUTDIR/simt_quick.txt.
OUTDIR=${OUTDIR:-/tmp/simtperf_out}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
timeout 85 python3 bench/simt_quick.py --reps 20 --budget 60 2>&1 | tee "$OUTDIR/simt_quick.txt" | grep -v "^\s*$" | tail -20

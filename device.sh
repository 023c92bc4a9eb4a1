#!/bin/bash
# simtperf's device window: the SIMT sgemm/softmax examples on the GPU (correctness at odd
# sizes, then 4096 timings beside torch, variants after), then the GPU twins of the tile
# tests, under 90 s.  Writes $OUTDIR/simt_quick.txt and $OUTDIR/pytest.txt; prints a short
# summary (label, ours/peer ms, peer/ours).
OUTDIR=${OUTDIR:-/tmp/simtperf_out}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
timeout 60 python3 bench/simt_quick.py --reps 20 --budget 48 > "$OUTDIR/simt_quick.txt" 2>&1
echo "simt_quick rc=$?"
timeout 24 python3 -m pytest -q -x -m gpu tests/codegen/test_thread_tiles.py tests/codegen/test_tile_io.py tests/codegen/test_collectives.py > "$OUTDIR/pytest.txt" 2>&1
echo "pytest rc=$? $(tail -1 "$OUTDIR/pytest.txt" | cut -c1-100)"
python3 - "$OUTDIR/simt_quick.txt" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    m = re.match(r"(sgemm|softmax)(.*?) 4096\S*: anodize ([\d.]+) ms.*?(?:torch|cuBLAS f32) ([\d.]+) ms.*speed ([\d.]+)x", line)
    if m:
        print(f"{m[1][:2]}{m[2][:40]} {m[3]}/{m[4]} {m[5]}x")
    elif "Error" in line or "skipped" in line or "total" in line or "Traceback" in line:
        print(line.strip()[:110])
PY

#!/bin/bash
# simtperf's device window (w2): issue 16's SIMT targets on the H200, under 90 s.
# 1. bench/examples_bench.py --only sgemm,softmax (the examples beside cuBLAS via CuPy and
#    torch.softmax); 2. bench/simt_quick.py (the examples beside torch.matmul with TF32 off
#    and torch.softmax, then variants); 3. the GPU twins of the tests this branch touches.
# Full outputs under $OUTDIR; a short summary on stdout (label, ours/peer ms, peer/ours).
OUTDIR=${OUTDIR:-/tmp/simtperf_out}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
timeout 34 python3 bench/examples_bench.py --only sgemm,softmax --reps 20 > "$OUTDIR/examples_bench.txt" 2>&1
echo "examples_bench rc=$?"
grep -E "^\| (sgemm|softmax)" "$OUTDIR/examples_bench.txt" | sed -E "s/ \\([0-9.]+-[0-9.]+\\)//g" | cut -c1-150
timeout 36 python3 bench/simt_quick.py --reps 20 --budget 26 > "$OUTDIR/simt_quick.txt" 2>&1
echo "simt_quick rc=$?"
timeout 18 python3 -m pytest -q -x -m gpu tests/codegen/test_thread_tiles.py tests/codegen/test_tile_io.py tests/codegen/test_collectives.py tests/codegen/test_ptx_tables.py > "$OUTDIR/pytest.txt" 2>&1
echo "pytest rc=$? $(tail -1 "$OUTDIR/pytest.txt" | cut -c1-80)"
python3 - "$OUTDIR/simt_quick.txt" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    m = re.match(r"(sgemm|softmax)(.*?) 4096\S*: anodize ([\d.]+) ms.*?(?:torch|cuBLAS f32) ([\d.]+) ms.*speed ([\d.]+)x", line)
    if m:
        print(f"{m[1][:2]}{m[2][:40]} {m[3]}/{m[4]} {m[5]}x")
    elif "Error" in line or "skipped" in line or "Traceback" in line:
        print(line.strip()[:110])
PY

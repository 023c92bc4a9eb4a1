#!/usr/bin/env bash
# The lead's device window runs this on the H200 (after tools/device_setup.sh), within 90 s:
# the tile GEMM's GPU tests, the GEMM bench (anodize vs cuBLAS vs Triton, cold compile), and a
# sweep of wgmma tile variants.  Everything lands in $OUTDIR; a summary goes to stdout.
cd "$(dirname "$0")"
OUTDIR=${OUTDIR:-/tmp/wgmma-out}
mkdir -p "$OUTDIR"
start=$(date +%s)
left() { echo $(( 88 - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUTDIR/gpu.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUTDIR/gpu.txt" 2>&1
cat "$OUTDIR/gpu.txt"
timeout 18 python3 bench/wgmma_sweep.py > "$OUTDIR/sweep.txt" 2>&1
echo "== sweep rc=$?"; cat "$OUTDIR/sweep.txt" | cut -c1-200 | tail -14
timeout 40 python3 -m pytest -m gpu tests/codegen/test_tile_gemm_tc.py -q -p no:cacheprovider > "$OUTDIR/pytest.txt" 2>&1
echo "== pytest rc=$?"; grep -E "passed|failed|Error|error" "$OUTDIR/pytest.txt" | tail -8
timeout $(left) python3 bench/tile_bench.py --only gemm > "$OUTDIR/bench.txt" 2>&1
echo "== bench rc=$?"; grep -E "^\||^  \(|FAILED|Error" "$OUTDIR/bench.txt" | cut -c1-260
echo "== wall $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# The lead's device window runs this on the H200 (after tools/device_setup.sh), within 90 s:
# the tile GEMM's GPU tests, the GEMM bench (anodize vs cuBLAS vs Triton, and the cold compile),
# the cold compile by stage, and a few standalone wgmma variants.  Everything lands in $OUTDIR.
cd "$(dirname "$0")"
OUTDIR=${OUTDIR:-/tmp/wgmma-out}
mkdir -p "$OUTDIR"
start=$(date +%s)
left() { echo $(( 88 - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUTDIR/gpu.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUTDIR/gpu.txt" 2>&1
cat "$OUTDIR/gpu.txt"
timeout 35 python3 -m pytest -m gpu tests/codegen/test_tile_gemm_tc.py -x -q -p no:cacheprovider > "$OUTDIR/pytest.txt" 2>&1
echo "== pytest rc=$? ($(( $(date +%s) - start )) s)"; grep -E "passed|failed|Error|error" "$OUTDIR/pytest.txt" | tail -8
timeout 25 python3 bench/tile_bench.py --only gemm,gemm-wide > "$OUTDIR/bench.txt" 2>&1
echo "== bench rc=$? ($(( $(date +%s) - start )) s)"; grep -E "^\||^  \(|FAILED|Error" "$OUTDIR/bench.txt" | cut -c1-260
timeout 16 python3 bench/cold_gemm.py --runs 2 --ptxas-options > "$OUTDIR/cold.txt" 2>&1
echo "== cold rc=$? ($(( $(date +%s) - start )) s)"; cut -c1-260 "$OUTDIR/cold.txt"
timeout $(left) python3 bench/wgmma_sweep.py --only "128x256 S4,256x128 S4" > "$OUTDIR/sweep.txt" 2>&1
echo "== sweep rc=$? ($(( $(date +%s) - start )) s)"; cut -c1-220 "$OUTDIR/sweep.txt" | tail -10
echo "== wall $(( $(date +%s) - start )) s"

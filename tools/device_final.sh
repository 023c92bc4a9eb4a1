#!/usr/bin/env bash
# One batched GPU session on the lent H200 (see docs/performance.md): the GPU tests, then the
# benchmarks whose figures README.md and bench/RESULTS.md quote, each log under $OUT.
# Usage there:  bash tools/device_final.sh tests|bench|all   (needs .whl/ carried: tools/fetch_device_wheels.sh)
set -u
export PYTHONUNBUFFERED=1 ANODIZE_CACHE=off
source tools/device_setup.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
what=${1:-all}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
if [ "$what" = tests ] || [ "$what" = all ]; then
  timeout 420 python3 -m pytest -q -n 0 -m "gpu and not slow" --ignore=tests/mypy -p no:cacheprovider tests \
    > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc=$?" >> "$OUT/summary.txt"
  tail -5 "$OUT/gpu_tests.log" >> "$OUT/summary.txt"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  timeout 300 python3 bench/tile_variants_v2.py > "$OUT/tile_variants.log" 2>&1; echo "tile variants rc=$?" >> "$OUT/summary.txt"
  timeout 240 python3 bench/tile_bench.py > "$OUT/tile_bench.log" 2>&1; echo "tile bench rc=$?" >> "$OUT/summary.txt"
  timeout 200 python3 bench/autotune_bench.py > "$OUT/autotune.log" 2>&1; echo "autotune rc=$?" >> "$OUT/summary.txt"
fi
cat "$OUT/summary.txt"

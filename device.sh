#!/usr/bin/env bash
# tilerow's device window: the tile GPU tests, then the element-wise / row rows of the tile bench,
# the host cost of a launch beside torch's, then the tile-size / warp variants (each step
# time-boxed so that the whole stays under 90 s).
OUTDIR=${OUTDIR:-/tmp/tilerow_out}
mkdir -p "$OUTDIR"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUTDIR/gpu.txt" 2>&1
t0=$(date +%s)
timeout 40 python3 -m pytest -m gpu tests/codegen/test_tiles.py tests/codegen/test_tile_rows.py tests/runtime/test_quick_tensors.py tests/runtime/test_launch_fastpath.py -q -p no:cacheprovider > "$OUTDIR/pytest.txt" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - t0 )) s)"; tail -3 "$OUTDIR/pytest.txt"
t1=$(date +%s)
timeout 22 python3 bench/tile_bench.py --only add,softmax,layer_norm --reps 20 > "$OUTDIR/bench.txt" 2>&1
echo "bench rc=$? ($(( $(date +%s) - t1 )) s)"; grep "^|" "$OUTDIR/bench.txt"; grep -A3 FAILED "$OUTDIR/bench.txt" | head -20
timeout 10 python3 - > "$OUTDIR/host.txt" 2>&1 <<'PY'
import sys, time
sys.path.insert(0, "examples")
import torch, anodize as az, tile_softmax
x = torch.randn(16, 4096, device="cuda"); y = torch.empty_like(x)
launch = tile_softmax.softmax.specialize(cols=4096)[az.LaunchConfig.for_tiles((16, 4096), (1, 4096))]
launch(x, y); torch.cuda.synchronize()
for name, fn in (("anodize softmax launch", lambda: launch(x, y)), ("torch.softmax", lambda: torch.softmax(x, dim=1))):
    for _ in range(50): fn()
    torch.cuda.synchronize(); az.device(0).synchronize()
    t = time.perf_counter()
    for _ in range(500): fn()
    dt = (time.perf_counter() - t) / 500 * 1e6
    torch.cuda.synchronize(); az.device(0).synchronize()
    print(f"host us per call, {name}: {dt:.2f}", flush=True)
PY
cat "$OUTDIR/host.txt" | tail -3
t2=$(date +%s)
left=$(( 86 - (t2 - t0) ))
if [ "$left" -gt 8 ]; then
  timeout "$left" python3 bench/tile_row_variants.py > "$OUTDIR/variants.txt" 2>&1
  echo "variants rc=$? ($(( $(date +%s) - t2 )) s)"; cat "$OUTDIR/variants.txt" | tail -25
fi

#!/usr/bin/env bash
# The tile GEMM's speed switches on the GPU, one device call (bench/RESULTS.md, session 11):
# the staged epilogue against the per-element stores, the ring's depth, the program order's
# group, and 128x128 over 4 warps on wgmma (stacked layout) against mma.sync; 4096^3 f16 beside
# Triton (and cuBLAS on the canonical row).  Every row checks its output against torch first.
#
#     bash bench/tile_gemm_sweep.sh [ROUNDS]
set -u
cd "$(dirname "$0")/.."
R=${1:-5}
V="python3 bench/tile_variants_v2.py --rounds $R"
B=128x256x64x8
F=128x128x64x4
run() { echo "== $*"; env "$@"; }
run ANODIZE_TILE_EPILOGUE=staged $V --tiles $B --only canonical,epilogue,gelu_residual,acc_in
run ANODIZE_TILE_EPILOGUE=direct $V --tiles $B --only canonical,epilogue
for s in 3; do run ANODIZE_TILE_STAGES=$s $V --tiles $B --only canonical; done
for g in 1 4 16; do run ANODIZE_TILE_GROUP=$g $V --tiles $B --only canonical; done
run ANODIZE_TILE_WGMMA_STACK=0 $V --tiles $F --only canonical,epilogue
for s in 3 4 5; do run ANODIZE_TILE_WGMMA_STACK=1 ANODIZE_TILE_STAGES=$s $V --tiles $F --only canonical,epilogue,acc_in; done
run ANODIZE_TILE_EPILOGUE=staged python3 bench/tile_bench.py --only gemm,cold

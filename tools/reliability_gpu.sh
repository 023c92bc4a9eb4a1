#!/usr/bin/env bash
# Issue 9's GPU half in one command (at most 7.8 minutes on one H200: every step has a hard time limit):
#   bash tools/reliability_gpu.sh
# Runs, each under its own time limit:
#   1. tools/difftest.py on the GPU (GPU vs CPU backend vs reference interpreter)
#   2. tools/mutate.py (regenerates the barrier mutants the checker cannot reject)
#   3. tools/sanitize.py: memcheck --padding, racecheck (line_info + opt=0), synccheck over
#      every accepted fixture and example, then racecheck over the barrier mutants
#   4. the GPU fault-injection and GPU reliability tests (pytest -m gpu tests/reliability)
# Writes at most 8 files under $OUT (default ./reliability-out):
#   summary.txt difftest.md difftest.json mutate.json sanitize.md sanitize.json
#   sanitize_logs.tar.gz gpu_tests.log
# Needs: a CUDA GPU, compute-sanitizer and ptxas (the compile
# path runs the checker).  PYTHON selects the interpreter (default: python3).
set -u
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${OUT:-$PWD/reliability-out}"
mkdir -p "$OUT"
SCRATCH="$(mktemp -d)"
SUMMARY="$OUT/summary.txt"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$SUMMARY"; }
: > "$SUMMARY"
stamp "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
stamp "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo missing)"

# 1. differential testing (<= 80 s)
timeout 80 "$PY" tools/difftest.py --programs 400 --seed 20000 --time-limit 60 --require-gpu --out "$SCRATCH/difftest" > "$SCRATCH/difftest.out" 2>&1
stamp "difftest rc=$?"
cp "$SCRATCH/difftest/difftest.md" "$SCRATCH/difftest/difftest.json" "$OUT/" 2>/dev/null
grep -E '"(mode|compared_programs|gpu-vs-cpu:ok|gpu-vs-cpu:mismatch|gpu-vs-reference:ok|gpu-vs-reference:mismatch|cpu-vs-reference:ok|cpu-vs-reference:mismatch|errors)"' "$SCRATCH/difftest.out" | tee -a "$SUMMARY"

# 2. barrier mutants from the current checker (~15 s)
timeout 40 "$PY" tools/mutate.py --mutants-dir "$SCRATCH/mutants" --json "$OUT/mutate.json" > "$SCRATCH/mutate.out" 2>&1
stamp "mutate rc=$? $(grep -E '^(write-index|barrier)' "$SCRATCH/mutate.out" | tr '\n' ' ')"

# 3. compute-sanitizer (4 runs of at most 60 s each)
timeout 260 "$PY" tools/sanitize.py --timeout 60 --out "$SCRATCH/sanitize" --mutants "$SCRATCH/mutants" > "$SCRATCH/sanitize.out" 2>&1
stamp "sanitize rc=$?"
cp "$SCRATCH/sanitize/sanitize.md" "$SCRATCH/sanitize/sanitize.json" "$OUT/" 2>/dev/null
sed -n '/^| run |/,/^$/p' "$SCRATCH/sanitize/sanitize.md" | tee -a "$SUMMARY"
tar -czf "$OUT/sanitize_logs.tar.gz" -C "$SCRATCH" sanitize mutants sanitize.out difftest.out mutate.out 2>/dev/null

# 4. GPU fault injection and the GPU twins (<= 90 s)
timeout 90 "$PY" -m pytest -q -m gpu tests/reliability/test_fault_injection.py tests/reliability/test_difftest.py tests/reliability/test_sanitize.py -p no:cacheprovider > "$OUT/gpu_tests.log" 2>&1
stamp "gpu tests rc=$? $(tail -1 "$OUT/gpu_tests.log")"
stamp "done"
rm -rf "$SCRATCH"

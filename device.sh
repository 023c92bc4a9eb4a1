#!/usr/bin/env bash
# Device window (dispatch): the launch forms side by side on the GPU, this branch and the base
# (93a0526, a source copy in .base/ added to the scratch copy), then the GPU twins of
# tests/runtime/test_dispatch_cache.py.  Everything lands in $OUTDIR.
set -u
O=${OUTDIR:-/tmp/dispatch_out}
mkdir -p "$O"
nvidia-smi -L > "$O/gpu.txt" 2>&1
echo "== after (this branch) $(date +%T)"
timeout 35 python3 bench/dispatch_overhead.py --rounds 13 --json "$O/after.json" > "$O/after.txt" 2>&1; echo "rc=$?"
cat "$O/after.txt"
if [ -d .base/anodize ]; then
  echo "== before (93a0526) $(date +%T)"
  PYTHONPATH="$PWD/.base${PYTHONPATH:+:$PYTHONPATH}" timeout 35 python3 bench/dispatch_overhead.py --rounds 13 --json "$O/before.json" > "$O/before.txt" 2>&1; echo "rc=$?"
  cat "$O/before.txt"
fi
echo "== GPU tests $(date +%T)"
timeout 20 python3 -m pytest -q -p no:cacheprovider tests/runtime/test_dispatch_cache.py > "$O/tests.txt" 2>&1; echo "rc=$?"
tail -4 "$O/tests.txt"; echo "end $(date +%T)"

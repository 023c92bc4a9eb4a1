#!/usr/bin/env bash
# One device call, many steps: bash tools/device_batch.sh STEPFILE, each line "NAME TIMEOUT COMMAND..." (see docs/performance.md).
# Installs the carried wheels (.whl; .whlnp: NumPy 2.2 for numba into /tmp/site_numpy), byte-compiles, then runs each step
# under its timeout; $OUT/summary.txt gets each tail, $OUT/all_$TAG.txt every log (the device returns at most 8 files).
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
t0=$(date +%s)
source tools/device_setup.sh > $OUT/setup.log 2>&1
if ls .whlnp/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_numpy .whlnp/*.whl >> $OUT/setup.log 2>&1; fi
python3 -m compileall -q anodize checker codegen runtime examples bench tests >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >> $OUT/setup.log
echo "setup $(( $(date +%s) - t0 ))s" >> $OUT/summary.txt
while IFS= read -r line; do
  [ -z "$line" ] && continue; case "$line" in \#*) continue;; esac
  name=${line%% *}; rest=${line#* }; to=${rest%% *}; cmd=${rest#* }
  s=$(date +%s)
  mkdir -p /tmp/azlogs; timeout $to bash -c "$cmd" > /tmp/azlogs/$name.log 2>&1; rc=$?
  echo "== $name rc=$rc $(( $(date +%s) - s ))s" >> $OUT/summary.txt
  tail -${TAILN:-6} /tmp/azlogs/$name.log >> $OUT/summary.txt; { echo "#### $name rc=$rc"; cat /tmp/azlogs/$name.log; } >> $OUT/all_${TAG:-x}.txt
done < "$1"
cat $OUT/summary.txt

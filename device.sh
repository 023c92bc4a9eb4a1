#!/usr/bin/env bash
# Device window (tooling): compute-sanitizer over the kernels whose launches the runner now
# derives (generic, az.Constant, shared_mem and 3-D contracts), all three tools at once.
set -u
cd "$(dirname "$0")"
OUTDIR=${OUTDIR:-/tmp/tooling-out}
mkdir -p "$OUTDIR"
t0=$(date +%s)
mods="fixtures/accept/generic_kernels.py fixtures/accept/local_values.py fixtures/accept/shared_mem_contract.py
fixtures/accept/three_d.py fixtures/accept/race_dynamic_safe.py fixtures/accept/module_tables.py
fixtures/accept/safe_shared.py examples/softmax.py examples/stencil3d.py examples/generic_saxpy.py"
timeout 80 python3 tools/sanitize.py --timeout 70 --out "$OUTDIR/san" $mods > "$OUTDIR/sanitize.out" 2>&1
rc=$?
echo "tooling: sanitize subset rc=$rc in $(( $(date +%s) - t0 )) s"
sed -n 5,9p "$OUTDIR/san/sanitize.md" 2>/dev/null
grep -h "@@AZ-END" "$OUTDIR"/san/*.log 2>/dev/null | grep -v " ok$" | sort | uniq -c | head -20
grep -h "@@AZ-END" "$OUTDIR"/san/*.log 2>/dev/null | grep -c " ok$"

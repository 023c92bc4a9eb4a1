#!/usr/bin/env bash
# Device window w2 (tooling): the whole tools/sanitize.py (every accepted fixture and example,
# memcheck + racecheck + synccheck at once, the new derived launches included), timed.
set -u
cd "$(dirname "$0")"
OUTDIR=${OUTDIR:-/tmp/tooling-out}
mkdir -p "$OUTDIR"
t0=$(date +%s)
timeout 86 python3 tools/sanitize.py --timeout 80 --out "$OUTDIR/san" > "$OUTDIR/sanitize.out" 2>&1
rc=$?
echo "tooling: sanitize (all modules) rc=$rc in $(( $(date +%s) - t0 )) s"
sed -n 5,9p "$OUTDIR/san/sanitize.md" 2>/dev/null
grep -h "@@AZ-END" "$OUTDIR"/san/*.log 2>/dev/null | grep -v " ok$" | sed 's/ (.*//' | sort | uniq -c | head -30
echo "ok launches: $(grep -h '@@AZ-END' "$OUTDIR"/san/*.log 2>/dev/null | grep -c ' ok$')"
tail -3 "$OUTDIR/sanitize.out"

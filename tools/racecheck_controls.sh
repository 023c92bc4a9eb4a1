#!/usr/bin/env bash
# Positive controls for racecheck: every barrier-removed fixture (which the checker rejects)
# is compiled with the checker bypassed (--unchecked), built like -G (line info, opt=0) and run
# under `compute-sanitizer --tool racecheck`.  A control that shows 0 hazards means racecheck
# could not have caught that race either.  Needs a GPU.
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
SAN="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
printf '| fixture | racecheck summary |\n|---|---|\n'
for f in fixtures/reject/*_no_barrier*.py; do
  out=$(timeout 120 "$SAN" --tool racecheck --print-limit 1 "$PY" tools/sanitize_runner.py --debug-build --unchecked --no-main "$f" 2>&1)
  summary=$(echo "$out" | grep -E "RACECHECK SUMMARY|ERROR SUMMARY" | tail -1 | sed 's/========= //')
  launched=$(echo "$out" | grep -o "@@AZ-SUMMARY.*" | tail -1)
  echo "| $(basename "$f") | ${summary:-no summary} ($launched) |"
done

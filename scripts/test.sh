#!/usr/bin/env bash
# Runs the whole tap suite once per shard count (RINGCAST_TEST_WORKERS), then prints
# one plain summary line: "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
modes="${TEST_WORKER_MODES:-1 4}"
files=("$@")
[ ${#files[@]} -eq 0 ] && mapfile -t files < <(find dist/test -name '*.test.js' | sort)
pass=0; fail=0; status=0
for w in $modes; do
  echo "== tests with workers: $w"
  log=$(mktemp)
  RINGCAST_TEST_WORKERS=$w npx tap --reporter=tap "${files[@]}" 2>&1 | tee "$log" | grep -v '^npm warn' | grep -E '^(not ok|ok|# )' || true
  code=${PIPESTATUS[0]}
  summary=$(grep -E '^# \{ total: ' "$log" | tail -1)
  p=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary"); f=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary")
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0}))
  if [ "$code" -ne 0 ]; then
    status=1
    echo "-- failures (workers: $w):"
    grep -B2 -A30 '^ *not ok' "$log" | head -300
  fi
  rm -f "$log"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || status=1
exit $status

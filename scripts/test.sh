#!/usr/bin/env bash
# `make test`: lint (ESLint) and the import-boundary check, then the whole tap suite once
# per shard count (RINGCAST_TEST_WORKERS), with V8 coverage in one of the runs and a floor
# on the lines of src/ it covers. Every step runs even when an earlier one failed; each
# check counts as one test in the closing line, "N passed, N failed, N skipped".
#
#   TEST_WORKER_MODES     shard counts to run the suite with (default "1 4")
#   TEST_COVERAGE_WORKERS the run(s) that collect coverage and enforce the floor, and run the
#                         files that give the same run whatever the shard count (default 1:
#                         its servers have one shard thread each, so collecting coverage
#                         costs least there; the files with fixed 2- and 4-shard servers and
#                         the cluster suites reach the cross-shard paths in it)
#   TEST_COVERAGE_FLOOR   percent of the lines of src/ (default 95)
#   TEST_CHECKS           0 skips lint and the import-boundary check (make test-1 / test-4)
#   TEST_JOBS             test files run at once (default 4 with workers 1, 3 with workers 4:
#                         on 2 cores, most files wait on timers and sockets part of the time;
#                         workers 1 went from 315 s to 258 s with 3)
#   TEST_ONCE             0 runs every file in every run; otherwise scripts/test-plan.mjs
#                         says which run each file belongs to: a file that gives the same run
#                         whatever the shard count runs once, in the coverage run (no path to
#                         test/helpers/server, or a `// test-modes: once (why)` header), a
#                         file headed `// test-modes: workers N (why)` in the N-shard run only
#   TEST_TIMEOUT          seconds a test file may take before tap ends it (default 300: the
#                         cluster suites take up to two minutes alone, more beside three
#                         other files on 2 cores; package.json's 120 s is for a file run alone)
# Arguments, if any, are the test files to run instead of all of dist/test.
set -uo pipefail
cd "$(dirname "$0")/.."
modes="${TEST_WORKER_MODES:-1 4}"
coverage_modes=" ${TEST_COVERAGE_WORKERS:-1} "
floor="${TEST_COVERAGE_FLOOR:-95}"
files=("$@")
[ ${#files[@]} -eq 0 ] && mapfile -t files < <(find dist/test -name '*.test.js' | sort)
pass=0; fail=0; skip=0; status=0; failed_checks=()
started=$SECONDS

# One non-tap check: its output as it runs, one pass or fail in the tally.
check() {
  local name=$1; shift
  echo "== $name"
  local t0=$SECONDS
  if "$@"; then
    pass=$((pass + 1)); echo "-- $name: ok ($((SECONDS - t0)) s)"
  else
    fail=$((fail + 1)); status=1; failed_checks+=("$name"); echo "-- $name: FAILED ($((SECONDS - t0)) s)"
  fi
}

if [ "${TEST_CHECKS:-1}" != 0 ]; then
  check "lint" node_modules/.bin/eslint src test bench examples
  check "import boundaries" node scripts/check-boundaries.mjs
fi

for w in $modes; do
  echo "== tests with workers: $w"
  t0=$SECONDS
  log=$(mktemp)
  run=("${files[@]}")
  if [ "${TEST_ONCE:-1}" != 0 ]; then
    mapfile -t run < <(node scripts/test-plan.mjs "$w" "${TEST_COVERAGE_WORKERS:-1}" "$modes" "${files[@]}")
    echo "-- ${#run[@]} of ${#files[@]} files (the others run with another shard count: scripts/test-plan.mjs)"
  fi
  if [ ${#run[@]} -eq 0 ]; then rm -f "$log"; echo "-- nothing to run with workers: $w"; continue; fi
  cov=()
  if [[ "$coverage_modes" == *" $w "* ]]; then
    # Every process and worker thread of the run writes its coverage here when it exits.
    covdir="$PWD/dist/coverage/workers-$w"
    rm -rf "$covdir"; mkdir -p "$covdir"
    cov=(env "NODE_V8_COVERAGE=$covdir")
  fi
  # (no `|| true` here: it would replace PIPESTATUS and hide tap's exit code)
  "${cov[@]}" env RINGCAST_TEST_WORKERS="$w" node_modules/.bin/tap --reporter=tap --timeout="${TEST_TIMEOUT:-300}" --jobs="${TEST_JOBS:-$([ "$w" = 1 ] && echo 4 || echo 3)}" "${run[@]}" 2>&1 | tee "$log" | grep -v '^npm warn' | grep -E "^(not ok|ok|# )"
  code=${PIPESTATUS[0]}
  summary=$(grep -E '^# \{ total: ' "$log" | tail -1)
  p=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary"); f=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary")
  k=$(sed -nE 's/.*skip: ([0-9]+).*/\1/p' <<<"$summary"); td=$(sed -nE 's/.*todo: ([0-9]+).*/\1/p' <<<"$summary")
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0})); skip=$((skip + ${k:-0} + ${td:-0}))
  echo "-- tests with workers: $w took $((SECONDS - t0)) s"
  if [ "$code" -ne 0 ]; then
    status=1
    echo "-- failures (workers: $w):"
    grep -B2 -A30 '^ *not ok' "$log" | head -300
  fi
  rm -f "$log"
  if [ ${#cov[@]} -gt 0 ]; then
    # c8 holds every process's coverage at once: more heap than node's default 4 GB
    check "coverage floor (workers: $w)" node --max-old-space-size=12288 scripts/coverage.mjs "$covdir" --floor "$floor" --label "workers: $w"
    # the raw V8 files run to gigabytes; the report stays in $covdir/report
    find "$covdir" -maxdepth 1 -name 'coverage-*.json' -delete
  fi
done

[ ${#failed_checks[@]} -eq 0 ] || echo "failed checks: ${failed_checks[*]}"
echo "checks and suites took $((SECONDS - started)) s"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] || status=1
exit $status

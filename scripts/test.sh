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
#   TEST_TOGETHER         1 runs the suite runs at once; 0 (default) one after the other
#   TEST_JOBS             test files run at once in each run (default: 3 with workers 1 and 2
#                         with workers 4 when the runs go at once, 4 and 3 when they do not;
#                         on 2 cores, most files wait on timers and sockets part of the time;
#                         workers 1 alone went from 315 s to 258 s with 3)
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
  check "option effects" node scripts/check-options.mjs
fi

# One suite run (RINGCAST_TEST_WORKERS=$1), its output prefixed "[wN] " when the runs go
# at once; its tally goes to $2 as "pass fail skip failed-check-names…".
suite_run() {
  local w=$1 tally=$2 t0=$SECONDS log run cov=() code summary p f k td
  local rp=0 rf=0 rk=0 names=()
  log=$(mktemp)
  run=("${files[@]}")
  if [ "${TEST_ONCE:-1}" != 0 ]; then
    mapfile -t run < <(node scripts/test-plan.mjs "$w" "${TEST_COVERAGE_WORKERS:-1}" "$modes" "${files[@]}")
    echo "-- ${#run[@]} of ${#files[@]} files (the others run with another shard count: scripts/test-plan.mjs)"
  fi
  if [ ${#run[@]} -eq 0 ]; then rm -f "$log"; echo "-- nothing to run with workers: $w"; echo "0 0 0" >"$tally"; return; fi
  if [[ "$coverage_modes" == *" $w "* ]]; then
    # Every process and worker thread of the run writes its coverage here when it exits.
    covdir="$PWD/dist/coverage/workers-$w"
    rm -rf "$covdir"; mkdir -p "$covdir"
    cov=(env "NODE_V8_COVERAGE=$covdir")
  fi
  local jobs=${TEST_JOBS:-}
  if [ -z "$jobs" ]; then
    if [ "$together" = 1 ]; then jobs=$([ "$w" = 1 ] && echo 3 || echo 2); else jobs=$([ "$w" = 1 ] && echo 4 || echo 3); fi
  fi
  # (no `|| true` here: it would replace PIPESTATUS and hide tap's exit code)
  "${cov[@]}" env RINGCAST_TEST_WORKERS="$w" node_modules/.bin/tap --reporter=tap --timeout="${TEST_TIMEOUT:-300}" --jobs="$jobs" "${run[@]}" 2>&1 | tee "$log" | grep --line-buffered -v '^npm warn' | grep --line-buffered -E "^(not ok|ok|# )"
  code=${PIPESTATUS[0]}
  summary=$(grep -E '^# \{ total: ' "$log" | tail -1)
  p=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary"); f=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary")
  k=$(sed -nE 's/.*skip: ([0-9]+).*/\1/p' <<<"$summary"); td=$(sed -nE 's/.*todo: ([0-9]+).*/\1/p' <<<"$summary")
  rp=${p:-0}; rf=${f:-0}; rk=$((${k:-0} + ${td:-0}))
  echo "-- tests with workers: $w took $((SECONDS - t0)) s ($jobs files at once)"
  if [ "$code" -ne 0 ]; then
    # tap failed without a failing test (a file that crashed before its plan): count it
    [ "$rf" -eq 0 ] && rf=1
    echo "-- failures (workers: $w):"
    grep -B2 -A30 '^ *not ok' "$log" | head -300
  fi
  rm -f "$log"
  if [ ${#cov[@]} -gt 0 ]; then
    echo "== coverage floor (workers: $w)"
    local c0=$SECONDS
    # c8 holds every process's coverage at once: more heap than node's default 4 GB
    if node --max-old-space-size=12288 scripts/coverage.mjs "$covdir" --floor "$floor" --label "workers: $w"; then
      rp=$((rp + 1)); echo "-- coverage floor (workers: $w): ok ($((SECONDS - c0)) s)"
    else
      rf=$((rf + 1)); names+=("coverage-floor-workers-$w"); echo "-- coverage floor (workers: $w): FAILED ($((SECONDS - c0)) s)"
    fi
    # the raw V8 files run to gigabytes; the report stays in $covdir/report
    find "$covdir" -maxdepth 1 -name 'coverage-*.json' -delete
  fi
  echo "$rp $rf $rk ${names[*]}" >"$tally"
}

# TEST_TOGETHER=1 runs the suite runs at once (default 0, one after the other): faster while
# the cores have room, but the suite is CPU-bound on 2 cores, and its timing-sensitive
# fault tests fail at the load that makes (docs/testing.md).
read -ra mode_list <<<"$modes"
together=${TEST_TOGETHER:-0}
tallies=()
pids=()
for w in "${mode_list[@]}"; do
  tally=$(mktemp); tallies+=("$tally")
  if [ "$together" = 1 ]; then
    echo "== tests with workers: $w (at once with the other runs; lines prefixed [w$w])"
    # ($! is sed's: it ends once the run's output is closed, so waiting for it waits for the run)
    suite_run "$w" "$tally" 2>&1 | sed -u "s/^/[w$w] /" &
    pids+=($!)
  else
    echo "== tests with workers: $w"
    suite_run "$w" "$tally"
  fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
for tally in "${tallies[@]}"; do
  read -r rp rf rk names <"$tally" || true
  pass=$((pass + ${rp:-0})); fail=$((fail + ${rf:-0})); skip=$((skip + ${rk:-0}))
  [ -n "${names:-}" ] && failed_checks+=($names)
  [ "${rf:-0}" -eq 0 ] || status=1
  rm -f "$tally"
done
[ ${#failed_checks[@]} -eq 0 ] || echo "failed checks: ${failed_checks[*]}"
echo "checks and suites took $((SECONDS - started)) s"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] || status=1
exit $status

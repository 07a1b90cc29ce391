#!/usr/bin/env bash
# `make test`: the checks (ESLint, the import boundaries, the option effects), the tap
# suite once per shard count, and the coverage floor, from one pool of processes:
# scripts/run-suite.mjs (its header lists the TEST_* settings). Arguments, if any, are
# the test files to run instead of all of dist/test.
set -uo pipefail
cd "$(dirname "$0")/.."
exec node scripts/run-suite.mjs "$@"

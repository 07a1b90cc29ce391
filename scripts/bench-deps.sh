#!/usr/bin/env bash
# Installs what `make bench` needs beyond Node: wrk, the C load generator of the API-only
# and many-channels scenarios (Debian package `wrk`), only when it is missing: with wrk
# present it does nothing (no apt-get update, no network). `make test` does not need it.
set -euo pipefail

if [ -n "${RINGCAST_BENCH_WRK:-}" ]; then
  [ -x "$RINGCAST_BENCH_WRK" ] && exit 0
  echo "bench-deps.sh: RINGCAST_BENCH_WRK=$RINGCAST_BENCH_WRK is not an executable" >&2
  exit 1
fi
command -v wrk >/dev/null 2>&1 && exit 0

echo "bench-deps.sh: installing wrk" >&2
SUDO=''
[ "$(id -u)" -ne 0 ] && SUDO='sudo'
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends wrk

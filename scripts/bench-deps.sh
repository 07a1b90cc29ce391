#!/usr/bin/env bash
# Installs what the benchmarks need beyond Node, only what is missing (with everything
# present it does nothing: no apt-get update, no network). `make test` needs none of it.
#  - wrk: the C load generator of `make bench`'s API-only and many-channels scenarios
#    (Debian package `wrk`; RINGCAST_BENCH_WRK names a binary not on PATH);
#  - gcc: compiles bench/harness/wsrecv.c, the C subscriber generator of
#    `make bench-cluster` (Debian package `gcc`).
set -euo pipefail

pkgs=()
if [ -n "${RINGCAST_BENCH_WRK:-}" ]; then
  if [ ! -x "$RINGCAST_BENCH_WRK" ]; then
    echo "bench-deps.sh: RINGCAST_BENCH_WRK=$RINGCAST_BENCH_WRK is not an executable" >&2
    exit 1
  fi
elif ! command -v wrk >/dev/null 2>&1; then
  pkgs+=(wrk)
fi
command -v gcc >/dev/null 2>&1 || pkgs+=(gcc libc6-dev)
[ "${#pkgs[@]}" -eq 0 ] && exit 0

echo "bench-deps.sh: installing ${pkgs[*]}" >&2
SUDO=''
[ "$(id -u)" -ne 0 ] && SUDO='sudo'
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${pkgs[@]}"

#!/usr/bin/env bash
# Installs the Debian packages of every binary a test runs: the backends the suite starts
# itself (redis-server, redis-sentinel, nats-server), the browser of the browser tests
# (chromium), systemd-analyze (test/ops/service.test.ts), wrk (test/bench/wrk-pool.test.ts),
# xdelta3 (test/delta/vcdiff.test.ts), openssl (the TLS tests' certificates), postgresql
# and mariadb-server (the app store tests, test/apps/store-*.test.ts), nginx and haproxy
# (test/ops/load-balancers.test.ts), only
# when one of their binaries is missing: with everything present it does nothing (no
# apt-get update, no network). A test whose binary is missing fails naming it, never
# skips; test/ops/deps.test.ts checks that every binary a test runs is listed here.
set -euo pipefail

declare -A pkg_of=(
  [redis-server]=redis-server
  [redis-cli]=redis-server   # redis-cli ships in redis-tools, pulled in by redis-server
  [redis-sentinel]=redis-sentinel
  [nats-server]=nats-server
  [chromium]=chromium
  [systemd-analyze]=systemd
  [wrk]=wrk
  [xdelta3]=xdelta3
  [openssl]=openssl
  [mariadbd]=mariadb-server
  [mariadb-install-db]=mariadb-server
  [nginx]=nginx
  [haproxy]=haproxy
)

missing=()
for bin in "${!pkg_of[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("${pkg_of[$bin]}")
done
# PostgreSQL's server binaries are not on PATH: /usr/lib/postgresql/<version>/bin (test/helpers/postgres.ts)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0

# unique package names
mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "deps.sh: installing ${pkgs[*]}" >&2
SUDO=''
[ "$(id -u)" -ne 0 ] && SUDO='sudo'
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${pkgs[@]}"

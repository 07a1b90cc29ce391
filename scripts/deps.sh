#!/usr/bin/env bash
# Installs the Debian packages of the backends the test suite starts itself
# (redis-server, redis-sentinel, nats-server) and the browser the live console's test
# drives (chromium, test/ops/console.test.ts), only when one of their binaries is
# missing: with everything present it does nothing (no apt-get update, no network).
set -euo pipefail

declare -A pkg_of=(
  [redis-server]=redis-server
  [redis-cli]=redis-server   # redis-cli ships in redis-tools, pulled in by redis-server
  [redis-sentinel]=redis-sentinel
  [nats-server]=nats-server
  [chromium]=chromium
)

missing=()
for bin in "${!pkg_of[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("${pkg_of[$bin]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

# unique package names
mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "deps.sh: installing ${pkgs[*]}" >&2
SUDO=''
[ "$(id -u)" -ne 0 ] && SUDO='sudo'
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${pkgs[@]}"

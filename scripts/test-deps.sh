#!/usr/bin/env bash
# Installs what the test suite needs and this machine lacks, from Debian's packages. Servers are
# not started here: the tests' helpers start their own on free loopback ports in temp dirs.
set -euo pipefail

# command  package: the race detector builds with cgo, so go test -race needs a C compiler.
needs=(
  "gcc gcc"
)

missing=()
for n in "${needs[@]}"; do
  read -r cmd pkg <<<"$n"
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
command -v go >/dev/null 2>&1 || { echo "test-deps: go is not on PATH (Go 1.26 is required)" >&2; exit 1; }
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "test-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "test-deps: need root to apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

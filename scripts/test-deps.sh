#!/usr/bin/env bash
# Installs what the test suite needs and this machine lacks, from Debian's packages. Servers are
# not started here: the tests' helpers start their own on free loopback ports in temp dirs.
set -euo pipefail

# "program package": the race detector builds with cgo (gcc); the store and gate tests run on
# real MariaDB, PostgreSQL and Redis servers (redis-cli creates the test cluster); the pages'
# tests drive Chromium, headless, and its screenshots need a font; promtool (Debian's prometheus
# package) checks the shipped alerting rules and the /metrics text.
needs=(
  "gcc gcc"
  "/usr/bin/chromium chromium"
  "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf fonts-dejavu-core"
  "redis-server redis-server"
  "redis-cli redis-tools"
  "mariadbd mariadb-server"
  "mariadb-install-db mariadb-server"
  "/usr/lib/postgresql/*/bin/initdb postgresql"
  "promtool prometheus"
)

found() {
  case "$1" in
    /*) compgen -G "$1" >/dev/null ;;
    *) command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] ;;
  esac
}

command -v go >/dev/null 2>&1 || { echo "test-deps: go is not on PATH (Go 1.26 is required)" >&2; exit 1; }

# Stripe's API mock, for the Stripe payments' tests (internal/servers.StartStripeMock finds it in
# PATH or in GOPATH's bin): from the Go module proxy, not Debian.
gobin="$(go env GOPATH | cut -d: -f1)/bin"
if ! command -v stripe-mock >/dev/null 2>&1 && [ ! -x "$gobin/stripe-mock" ]; then
  echo "test-deps: installing stripe-mock"
  go install github.com/stripe/stripe-mock@v0.203.0
fi
missing=()
for n in "${needs[@]}"; do
  read -r prog pkg <<<"$n"
  found "$prog" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "test-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "test-deps: need root to apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Regenerates the seckill bench figures of docs/BENCHMARKS.md on this machine: the flash and
# all-win profiles in embedded and Redis modes, a ramp, unpaid orders restocked, and the fault
# scenarios. bench starts the servers itself (--redis spawn: redis-server with appendfsync
# always; --db spawn:mariadb), on loopback, in temporary directories.
#
#   scripts/bench/run.sh            # every scenario
#   scripts/bench/run.sh fault-db   # only those whose name contains the argument
#
# Each run appends its JSON result to docs/bench/results.jsonl and draws docs/bench/NAME.svg.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/bench
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/seckill" ./cmd/seckill
only=${1:-}

run() { # name args...
  local name=$1
  shift
  [[ -z "$only" || "$name" == *"$only"* ]] || return 0
  echo "== $name: seckill bench $*"
  "$tmp/seckill" bench --json --plot "$out/$name.svg" --history "$tmp/$name.jsonl" "$@" |
    tail -1 | sed "s/^{/{\"scenario\":\"$name\",\"machine\":\"$(nproc) cores\",/" | tee -a "$out/results.jsonl"
}

redis=(--redis spawn --db spawn:mariadb)
run embedded-flash  --users 20000 --stock 500 --dup 1 --concurrency 64
run embedded-allwin --users 20000 --stock 20000 --dup 0 --concurrency 64
run embedded-ramp   --users 20000 --stock 500 --dup 1 --concurrency 64 --arrival ramp:10s
run redis-flash     "${redis[@]}" --users 20000 --stock 500 --dup 1 --concurrency 64
run redis-allwin    "${redis[@]}" --users 20000 --stock 20000 --dup 0 --concurrency 64
run unpaid          --users 20000 --stock 500 --dup 0 --concurrency 64 --unpaid 0.2 --pay-window 5s
run fault-api       "${redis[@]}" --spawn 2 --binary "$tmp/seckill" --kill api --users 20000 --stock 10000 --dup 0 --concurrency 64
run fault-worker    "${redis[@]}" --spawn 1 --binary "$tmp/seckill" --kill worker --users 20000 --stock 10000 --dup 0 --concurrency 64
run fault-redis     "${redis[@]}" --kill redis --users 20000 --stock 10000 --dup 0 --concurrency 64
run fault-db        "${redis[@]}" --db-outage 30s --at 25% --users 20000 --stock 10000 --dup 0 --concurrency 64 --arrival ramp:40s

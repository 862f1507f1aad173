#!/usr/bin/env bash
# Regenerates the seckill bench figures of docs/BENCHMARKS.md on this machine: the flash and
# all-win profiles in embedded and Redis modes, a ramp, unpaid orders restocked, and the fault
# scenarios. bench starts the servers itself (--redis spawn: redis-server with appendfsync
# always; --db spawn:mariadb), on loopback, in temporary directories.
#
#   scripts/bench/run.sh            # every scenario
#   scripts/bench/run.sh fault-db   # only those whose name contains the argument
#   scripts/bench/run.sh fault-     # the fault matrix: kills, failovers, a moved slot, bad networks
#   scripts/bench/run.sh capacity-  # the costs seckill plan sizes a deployment from
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

# The costs seckill plan sizes a deployment from (docs/CAPACITY.md): an API node and a worker node
# apart (--spawn 1 --workers 1), so that bench's CPU figures say what each role spends; a flash
# for the cost of a losing grab, an all-win for that of a winning grab, a Redis grab and an order.
# The -r1 pair is measured with a replica holding every grab before it is acknowledged.
capacity=(--db spawn:mariadb --spawn 1 --workers 1 --binary "$tmp/seckill" --concurrency 64)
run capacity-flash     --redis spawn "${capacity[@]}" --users 20000 --stock 500 --dup 1
run capacity-allwin    --redis spawn "${capacity[@]}" --users 20000 --stock 20000 --dup 0
run capacity-flash-r1  --redis spawn:cluster --min-replicas 1 "${capacity[@]}" --users 20000 --stock 500 --dup 1
run capacity-allwin-r1 --redis spawn:cluster --min-replicas 1 "${capacity[@]}" --users 20000 --stock 20000 --dup 0

# The faults of a Redis deployment: a crowd spread over 20 s, every user winning, so that the
# sale's outage shows as the gap in the 202s; the fault at 40 %.
deploy=(--db spawn:mariadb --users 40000 --stock 40000 --dup 0 --concurrency 64 --arrival ramp:20s --at 40%)
run fault-redis-failover    --redis spawn:cluster  --fault redis-failover "${deploy[@]}"
run fault-redis-failover-r1 --redis spawn:cluster  --fault redis-failover --min-replicas 1 "${deploy[@]}"
run fault-sentinel-failover    --redis spawn:sentinel --fault sentinel-failover "${deploy[@]}"
run fault-sentinel-failover-r1 --redis spawn:sentinel --fault sentinel-failover --min-replicas 1 "${deploy[@]}"
run fault-reshard           --redis spawn:cluster  --fault reshard "${deploy[@]}"
run fault-netem-redis-latency  --redis spawn --fault netem --netem latency --fault-for 3s "${deploy[@]}"
run fault-netem-redis-reset    --redis spawn --fault netem --netem reset --fault-for 3s "${deploy[@]}"
run fault-netem-redis-halfopen --redis spawn --fault netem --netem halfopen --fault-for 3s "${deploy[@]}"
run fault-netem-db-halfopen    --redis spawn --fault netem --netem-link db --netem halfopen --fault-for 3s "${deploy[@]}"

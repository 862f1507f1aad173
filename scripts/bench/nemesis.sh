#!/usr/bin/env bash
# Runs nemesis schedules (docs/BENCHMARKS.md, "The nemesis"; docs/testing.md) and tallies them:
# each seed from FIRST on draws its own schedule of strikes and its own crowd, on a deployment bench
# starts for it (3 API nodes and a worker of the binary, on a Redis Cluster of 3 masters with 2
# replicas each and SECKILL_REDIS_MIN_REPLICAS=1, or on Redis Sentinel; MariaDB and PostgreSQL
# alternating by seed), the buyers paying at bench's simulated provider (--payments: notices on
# time, late, twice and forged; the webhook receiver checks every order's events).
#
#   scripts/bench/nemesis.sh cluster 100 2m      # 100 schedules of 2 minutes on a Cluster
#   scripts/bench/nemesis.sh sentinel 100 2m 1   # the same on Sentinel, seeds from 1
#
# Each run's JSON result goes to docs/bench/nemesis-TOPOLOGY.jsonl, a line a seed; a failing
# seed's history, the nodes' logs (.log) and the servers' (-servers/) are kept under $TMPDIR and
# its replay command printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
topology=${1:?cluster or sentinel}
runs=${2:-10}
duration=${3:-2m}
first=${4:-1}
case "$topology" in
cluster) redis=(--redis spawn:cluster --min-replicas 1) ;;
sentinel) redis=(--redis spawn:sentinel --min-replicas 1) ;;
*) echo "nemesis.sh: topology $topology: want cluster or sentinel" >&2; exit 2 ;;
esac
out=docs/bench/nemesis-$topology.jsonl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/seckill" ./cmd/seckill
ok=0 failed=0
for seed in $(seq "$first" $((first + runs - 1))); do
  db=spawn:mariadb
  ((seed % 2 == 0)) && db=spawn:postgres
  history=${TMPDIR:-/tmp}/seckill-nemesis-$topology-$seed.jsonl
  if "$tmp/seckill" bench --nemesis "$seed" --duration "$duration" --spawn 3 --workers 1 "${redis[@]}" --db "$db" \
    --payments --json --history "$history" 2>"$tmp/stderr" | tail -1 >>"$out"; then
    ok=$((ok + 1))
    rm -f "$history"
  else
    failed=$((failed + 1))
    cp "$tmp/stderr" "${history%.jsonl}.log" # the nodes' and the servers' logs
    echo "seed $seed failed (history $history, logs ${history%.jsonl}.log):" >&2
    grep -v 'level=' "$tmp/stderr" | tail -3 >&2
  fi
done
echo "$topology: $ok of $runs schedules of $duration passed, $failed failed"

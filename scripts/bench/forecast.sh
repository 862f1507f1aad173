#!/usr/bin/env bash
# Measures the reservation sales' crowd forecast on the bench's own crowds (docs/BENCHMARKS.md,
# "The crowd forecast"): one node (embedded, SQLite, SECKILL_ARCHIVE_AFTER=1s) takes SALES
# reservation sales one after the other, each a different crowd drawn from its number (600 to
# 1,199 reservers, 2 to 4 waves 4 s apart, 70 to 90 % of them coming, each wave's clicks spread
# over 1 or 2 s, 300 strangers). bench asks the node's forecast once the reservations are in,
# and holds it to the crowd it then sends; each sale is archived before the next, so that its
# crowd is in the history the next forecasts fit from (from the fourth sale on).
#
#   scripts/bench/forecast.sh        # 10 sales
#   scripts/bench/forecast.sh 20
#
# Each sale's bench result goes to docs/bench/forecast.jsonl, a line a sale.
set -euo pipefail
cd "$(dirname "$0")/../.."
sales=${1:-10}
out=docs/bench/forecast.jsonl
tmp=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/seckill" ./cmd/seckill
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
admin=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=$((20000 + RANDOM % 20000))
SECKILL_ADDR=127.0.0.1:$port SECKILL_METRICS_ADDR=127.0.0.1:0 SECKILL_DB=sqlite:$tmp/db SECKILL_JWT_SECRET=$secret \
  SECKILL_ADMIN_TOKEN=$admin SECKILL_ARCHIVE_AFTER=1s SECKILL_LOG_LEVEL=warn SECKILL_DEMO=0 \
  "$tmp/seckill" serve >"$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
: >"$out"
for i in $(seq "$sales"); do
  reserved=$((600 + i * 137 % 600))
  waves=$((2 + i % 3))
  show=0.$((7 + i * 7 % 3))
  ramp=$((1 + i % 2))s
  pay=$(((waves - 1) * 4 + 31))s
  echo "== sale $i: $reserved reserved, $waves waves, $show come, each wave over $ramp"
  "$tmp/seckill" bench --url "http://127.0.0.1:$port" --admin-token "$admin" --jwt-secret "$secret" --json \
    --admission reservation --users $((reserved + 300)) --reserved "$reserved" --stock 200 --waves "$waves" \
    --wave-interval 4s --show "$show" --arrival "ramp:$ramp" --pay-window "$pay" --seed "$i" --history "$tmp/$i.jsonl" |
    tail -1 | tee -a "$out" | sed 's/.*"forecast":\({[^}]*}\).*/\1/'
  sleep $(((waves - 1) * 4 + 31 + 6)) # the orders expire and the sale is archived: its crowd joins the history
done

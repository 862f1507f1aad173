#!/usr/bin/env bash
# Measures the grab endpoint with wrk against a trivial net/http handler in the same run on the
# same machine, for the "flash" profile (stock 2,000, the rest sold out) and "all-win" (a stock
# no crowd exhausts). Every request is a distinct user. Needs wrk (apt-get install wrk).
#
#   scripts/wrk/run.sh [duration] [connections]
#   MODE=redis scripts/wrk/run.sh ...   # the Redis gate (redis-server, appendfsync always, started here)
set -euo pipefail
cd "$(dirname "$0")/../.."
dur=${1:-10s}
conns=${2:-64}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

secret=wrk-secret-0123456789abcdef0123456789
admin=wrk-admin
go build -o "$tmp/seckill" ./cmd/seckill
go build -o "$tmp/trivial" scripts/wrk/trivial.go
go run scripts/wrk/mint.go -secret "$secret" -n 600000 > "$tmp/tokens.txt"

"$tmp/trivial" -addr 127.0.0.1:18081 &
redis=
if [ "${MODE:-embedded}" = redis ]; then
  redis-server --port 18379 --bind 127.0.0.1 --save "" --appendonly yes --appendfsync ${FSYNC:-always} \
    --dir "$tmp" --daemonize no --logfile "$tmp/redis.log" &
  for _ in $(seq 50); do redis-cli -p 18379 ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis=redis://127.0.0.1:18379/0
fi
SECKILL_REDIS=$redis SECKILL_ADDR=127.0.0.1:18080 SECKILL_DB="sqlite:$tmp/db/seckill.db" SECKILL_JWT_SECRET=$secret \
  SECKILL_ADMIN_TOKEN=$admin SECKILL_LOG_LEVEL=warn "$tmp/seckill" > "$tmp/seckill.out" &
for _ in $(seq 100); do curl -sf 127.0.0.1:18080/healthz >/dev/null && curl -sf 127.0.0.1:18081/ >/dev/null 2>&1 && break; sleep 0.1; done

create() {
  local start end
  start=$(date -u -d '-1 min' +%Y-%m-%dT%H:%M:%SZ)
  end=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
  curl -sf -X POST -H "Authorization: Bearer $admin" 127.0.0.1:18080/api/admin/activities \
    -d "{\"name\":\"wrk $1\",\"stock\":$1,\"price_cents\":100,\"start_at\":\"$start\",\"end_at\":\"$end\"}" |
    sed 's/.*"id":"\([^"]*\)".*/\1/'
}

rps() { awk '/Requests\/sec/ {print $2}' "$1"; }

measure() { # name url activity
  TOKENS="$tmp/tokens.txt" ACTIVITY=$3 wrk -t2 -c"$conns" -d"$dur" --latency -s scripts/wrk/grab.lua "$2" -- 2 > "$tmp/$1.txt"
  echo "== $1"; grep -E 'Requests/sec|Latency|50%|99%|status' "$tmp/$1.txt"
}

echo "machine: $(nproc) cores, $(uname -m); wrk -t2 -c$conns -d$dur on the same machine; mode ${MODE:-embedded}"
flash=$(create 2000)
measure trivial-flash http://127.0.0.1:18081 x
measure seckill-flash http://127.0.0.1:18080 "$flash"
allwin=$(create 50000000)
measure trivial-allwin http://127.0.0.1:18081 x
measure seckill-allwin http://127.0.0.1:18080 "$allwin"
curl -sf -H "Authorization: Bearer $admin" "127.0.0.1:18080/api/admin/activities/$flash/stats"; echo
curl -sf -H "Authorization: Bearer $admin" "127.0.0.1:18080/api/admin/activities/$allwin/stats"; echo
awk -v s="$(rps "$tmp/seckill-flash.txt")" -v t="$(rps "$tmp/trivial-flash.txt")" 'BEGIN {printf "flash ratio:   %.2f\n", s/t}'
awk -v s="$(rps "$tmp/seckill-allwin.txt")" -v t="$(rps "$tmp/trivial-allwin.txt")" 'BEGIN {printf "all-win ratio: %.2f\n", s/t}'

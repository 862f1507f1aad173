#!/usr/bin/env bash
# Measures the grab endpoint with wrk against a trivial net/http handler in the same run on the
# same machine, for the "flash" profile (stock 2,000, the rest sold out), "all-win" (a stock
# no crowd exhausts) and "limited" (one user hammering: after the first unit every request is
# turned away by the per-user rate limit, 429). In flash and all-win every request is a distinct
# user. Needs wrk (apt-get install wrk).
#
#   scripts/wrk/run.sh [duration] [connections]
#   ROUNDS=5 PROFILES="flash allwin limited" scripts/wrk/run.sh ...   # rounds per profile (3), which profiles
#   MODE=redis scripts/wrk/run.sh ...   # the Redis gate (redis-server, appendfsync always, started here)
#   MODE=redis REPLICA=1 MIN_REPLICAS=1 scripts/wrk/run.sh ...   # with a replica, and WAIT for it
#   PPROF=/tmp/prof scripts/wrk/run.sh ...   # also a 5 s CPU profile of seckill in each of its runs: /tmp/prof-NAME.prof
#   SERVER_GOMAXPROCS=3 scripts/wrk/run.sh ...   # GOMAXPROCS for seckill alone (the trivial handler keeps its own;
#                                                 # not SECKILL_*: seckill refuses a SECKILL_* variable it does not read)
#   SECKILL_ROLE=api MODE=redis scripts/wrk/run.sh ...   # an API node; after the rounds a worker places its all-win grabs, timed
#
# Each run also prints the CPU each process used (wrk, the server, redis-server), sampled over
# 5 s in the middle of the run (so the duration should be 8 s or more), and in Redis mode the time
# redis-server spent per command: on two cores the processes compete, and this says for what.
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
go run scripts/wrk/mint.go -secret "$secret" -n 1 -prefix hammer > "$tmp/one-token.txt"

"$tmp/trivial" -addr 127.0.0.1:18081 &
trivial_pid=$!
redis= redis_pid= replica_pid=
if [ "${MODE:-embedded}" = redis ]; then
  redis-server --port 18379 --bind 127.0.0.1 --save "" --appendonly yes --appendfsync ${FSYNC:-always} \
    --dir "$tmp" --daemonize no --logfile "$tmp/redis.log" &
  redis_pid=$!
  for _ in $(seq 50); do redis-cli -p 18379 ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis=redis://127.0.0.1:18379/0
  if [ "${REPLICA:-0}" = 1 ]; then # a replica of it, as a failover-safe deployment has
    mkdir -p "$tmp/replica"
    redis-cli -p 18379 config set repl-diskless-sync-delay 0 >/dev/null
    redis-server --port 18380 --bind 127.0.0.1 --save "" --appendonly yes --appendfsync ${FSYNC:-always} \
      --dir "$tmp/replica" --daemonize no --logfile "$tmp/replica.log" --replicaof 127.0.0.1 18379 &
    replica_pid=$!
    for _ in $(seq 100); do redis-cli -p 18379 info replication | grep -q 'state=online' && break; sleep 0.1; done
  fi
fi
GOMAXPROCS=${SERVER_GOMAXPROCS:-${GOMAXPROCS:-}} SECKILL_PPROF=${PPROF:+127.0.0.1:18090} \
SECKILL_REDIS_MIN_REPLICAS=${MIN_REPLICAS:-0} SECKILL_REDIS=$redis SECKILL_ADDR=127.0.0.1:18080 SECKILL_METRICS_ADDR=127.0.0.1:18091 SECKILL_DB="sqlite:$tmp/db/seckill.db" SECKILL_JWT_SECRET=$secret \
  SECKILL_ADMIN_TOKEN=$admin SECKILL_LOG_LEVEL=warn "$tmp/seckill" > "$tmp/seckill.out" &
seckill_pid=$!
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

ticks() { for p in "$@"; do awk '{print $14 + $15}' "/proc/$p/stat"; done; } # user+system CPU

measure() { # name url activity name=pid... (the processes whose CPU to report)
  local name=$1 url=$2 act=$3; shift 3
  TOKENS="${TOKENS:-$tmp/tokens.txt}" ACTIVITY=$act wrk -t2 -c"$conns" -d"$dur" --latency -s scripts/wrk/grab.lua "$url" -- 2 > "$tmp/$name.txt" &
  local procs=("wrk=$!" "$@") pids=() before after i
  for i in "${procs[@]}"; do pids+=("${i#*=}"); done
  if [ -n "${PPROF:-}" ] && [[ $name == seckill-* ]]; then # the profile's 5 s are the CPU sample's
    (sleep 2; curl -sf -o "$PPROF-$name.prof" "127.0.0.1:18090/debug/pprof/profile?seconds=5") &
  fi
  sleep 2; before=($(ticks "${pids[@]}")); sleep 5; after=($(ticks "${pids[@]}"))
  wait "${pids[0]}"
  echo "== $name"; grep -E 'Requests/sec|Latency|p99.9|status' "$tmp/$name.txt"
  for i in "${!procs[@]}"; do
    awk -v n="${procs[$i]%%=*}" -v t=$((after[i] - before[i])) -v hz="$(getconf CLK_TCK)" \
      'BEGIN {printf "   cpu %-13s %4.0f%% of a core\n", n, 100 * t / hz / 5}'
  done
}

echo "machine: $(nproc) cores, $(uname -m); wrk -t2 -c$conns -d$dur on the same machine; mode ${MODE:-embedded}; replica ${REPLICA:-0}, min replicas ${MIN_REPLICAS:-0}; ${ROUNDS:-3} rounds"
server=("seckill=$seckill_pid")
[ -n "$redis_pid" ] && server+=("redis-server=$redis_pid")
[ -n "$replica_pid" ] && server+=("replica=$replica_pid")

# round profile activity [TOKENS]: trivial then seckill, printing both and the round's ratio.
round() {
  local p=$1 act=$2 r=$3
  measure "trivial-$p-$r" http://127.0.0.1:18081 x "trivial=$trivial_pid"
  measure "seckill-$p-$r" http://127.0.0.1:18080 "$act" "${server[@]}"
  awk -v s="$(rps "$tmp/seckill-$p-$r.txt")" -v t="$(rps "$tmp/trivial-$p-$r.txt")" 'BEGIN {printf "%.3f\n", s/t}' >> "$tmp/ratios-$p"
}

# The runs of a profile alternate with the trivial server's, and the ratio reported is the
# median of the rounds': on two shared cores one run can be 10 % off another.
profiles=${PROFILES:-flash allwin limited}
flash= allwin= allwins=
for r in $(seq "${ROUNDS:-3}"); do
  for p in $profiles; do
    case $p in
      flash) [ -n "$flash" ] || flash=$(create 2000); round flash "$flash" "$r" ;;
      allwin) allwin=$(create 50000000); allwins="$allwins $allwin"; round allwin "$allwin" "$r" ;; # fresh: the tokens start over
      limited) [ -n "$allwin" ] || allwin=$(create 50000000); TOKENS="$tmp/one-token.txt" round limited "$allwin" "$r" ;;
    esac
  done
done
for a in $flash $allwin; do
  curl -sf -H "Authorization: Bearer $admin" "127.0.0.1:18080/api/admin/activities/$a/stats"; echo
done
if [ -n "$redis" ] && [ "${SECKILL_ROLE:-all}" = api ] && [ -n "$allwin" ]; then
  # An API node leaves its grabs in the streams: a worker started now places them, and how fast
  # it does says whether the orders keep up with the acknowledgements (the rate wrk measured).
  # It places every round's grabs, so all of them are counted, and waited for.
  pending() { # the grabs still queued, over every all-win activity of the rounds
    local n=0 a q
    for a in $allwins; do
      q=$(curl -sf -H "Authorization: Bearer $admin" "127.0.0.1:18080/api/admin/activities/$a/stats" |
        sed 's/.*"pending_queue":\([0-9]*\).*/\1/')
      n=$((n + q))
    done
    echo "$n"
  }
  queued=$(pending)
  SECKILL_ROLE=worker SECKILL_ADDR=127.0.0.1:18082 SECKILL_METRICS_ADDR=127.0.0.1:18092 SECKILL_REDIS=$redis SECKILL_DB="sqlite:$tmp/db/seckill.db" \
    SECKILL_JWT_SECRET=$secret SECKILL_ADMIN_TOKEN=$admin SECKILL_LOG_LEVEL=warn "$tmp/seckill" > "$tmp/worker.out" 2>&1 &
  worker_pid=$!
  began=$(date +%s.%N) left=$queued
  for _ in $(seq 3000); do # at most 5 minutes
    kill -0 "$worker_pid" 2>/dev/null || { echo "the worker stopped:"; cat "$tmp/worker.out"; break; }
    left=$(pending)
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  ended=$(date +%s.%N)
  awk -v n="$queued" -v l="$left" -v t="$(echo "$ended - $began" | bc)" -v cpu="$(ticks "$worker_pid")" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "worker: placed %d of %d queued grabs in %.1f s from its start: %.0f orders/s, %.1f s of CPU\n", n - l, n, t, (n - l) / t, cpu / hz}'
  kill "$worker_pid"
fi
if [ -n "$redis" ]; then
  echo "redis-server time per command (microseconds), every profile:"
  redis-cli -p 18379 info commandstats | awk -F'[:,=]' '/^cmdstat_/ {printf "   %-12s calls %8d  usec/call %7s\n", substr($1, 9), $3, $7}'
fi
for p in $profiles; do
  printf "%-8s ratio: median %s of rounds %s\n" "$p" "$(sort -n "$tmp/ratios-$p" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')" \
    "$(paste -sd' ' "$tmp/ratios-$p")"
done

#!/usr/bin/env bash
# Two fencelog builds and Redis (AOF `appendfsync always`, the Lua fenced
# append) side by side: each workload runs against every server in turn,
# seconds apart, for ROUNDS rounds, so the ratios compare runs made under
# the same disk and host noise. Server CPU per request from
# /proc/PID/stat (user + system ticks of all its threads).
#
#   benches/peers/side.sh OLD_BIN NEW_BIN      # both built with --features peers
#   ROUNDS=3 DURATION=4 benches/peers/side.sh old/fencelog new/fencelog
#
# The load generator is NEW_BIN's for every server. Prints one line per
# run (`system workload rate/s µs-per-request p50`); stops its servers by PID.
set -euo pipefail

OLD="${1:?usage: side.sh OLD_BIN NEW_BIN}"
NEW="${2:?usage: side.sh OLD_BIN NEW_BIN}"
ROUNDS="${ROUNDS:-2}"
DURATION="${DURATION:-4}"
WORKLOADS=("--workload reject --clients 16" "--workload reject --clients 64"
    "--workload append --clients 64" "--workload append --clients 1")
OLD_PORT=17290 NEW_PORT=17291 REDIS_PORT=16398
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d /tmp/fencelog-side.XXXXXX)"
PIDS=()
# shellcheck source=serve.sh
. "$HERE/serve.sh" # stop_pid, wait_healthy
cleanup() {
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    rm -rf "$WORK"
}
trap cleanup EXIT

start_fencelog() { # bin port name → sets PID
    "$1" serve --data-dir "$WORK/$3" --listen "127.0.0.1:$2" 2>>"$WORK/$3.log" >/dev/null &
    PID=$!
    PIDS+=("$PID")
    wait_healthy "http://127.0.0.1:$2" "$PID" "$WORK/$3.log"
}
start_fencelog "$OLD" $OLD_PORT old
OLD_PID=$PID
start_fencelog "$NEW" $NEW_PORT new
NEW_PID=$PID
mkdir -p "$WORK/redis"
redis-server --bind 127.0.0.1 --port $REDIS_PORT --dir "$WORK/redis" \
    --appendonly yes --appendfsync always --save '' --daemonize no \
    --logfile "$WORK/redis.log" &
REDIS_PID=$!
PIDS+=("$REDIS_PID")
for _ in $(seq 1 300); do redis-cli -p $REDIS_PORT ping >/dev/null 2>&1 && break; sleep 0.05; done

ticks() { awk '{ print $14 + $15 }' /proc/"$1"/stat; }

run() { # system pid workload args...
    local system="$1" pid="$2" workload="$3" before after line
    shift 3
    before=$(ticks "$pid")
    # shellcheck disable=SC2086
    line=$("$NEW" bench --json --duration "$DURATION" $workload "$@")
    after=$(ticks "$pid")
    echo "$line" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
n = r["requests"]
rate = r["requests_per_s"]
us = (int(sys.argv[4]) - int(sys.argv[3])) / 100 / n * 1e6
p50 = r["latency"]["p50_us"]
print(f"{sys.argv[1]:<13} {sys.argv[2]:<34} {rate:>9,.0f}/s {us:6.1f} µs  p50 {p50} µs")
' "$system" "$workload" "$before" "$after"
}

for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round" >&2
    for w in "${WORKLOADS[@]}"; do
        run fencelog-old "$OLD_PID" "$w" --server "http://127.0.0.1:$OLD_PORT"
        run fencelog-new "$NEW_PID" "$w" --server "http://127.0.0.1:$NEW_PORT"
        run redis "$REDIS_PID" "$w" --target redis --redis-url "redis://127.0.0.1:$REDIS_PORT/"
    done
done

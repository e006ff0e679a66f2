#!/usr/bin/env bash
# Instructions per request on the client side: the load generator under
# callgrind (the servers run natively), stale rejections from one client,
# through fencelog's client crate (pool, and reqwest) and through redis-rs.
# Each is run for two durations; the slope (difference in instructions ÷
# difference in requests) cancels the start-up, set-up and verification,
# which do not grow with the run.
#
#   benches/peers/client_callgrind.sh BIN     # BIN built with --features peers
#
# Prints one line per client; stops its servers by PID.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="${1:?usage: client_callgrind.sh path/to/fencelog}"
SHORT="${SHORT:-2}"
LONG="${LONG:-6}"
REDIS_PORT=16399
WORK="$(mktemp -d /tmp/fencelog-client-cg.XXXXXX)"
REDIS_PID=""
# shellcheck source=serve.sh
. "$HERE/serve.sh"
serve_start "$BIN" 17090 "$WORK"
FL_PID="$PID"
redis-server --bind 127.0.0.1 --port $REDIS_PORT --dir "$WORK" \
    --appendonly yes --appendfsync always --save '' --daemonize no \
    --logfile "$WORK/redis.log" &
REDIS_PID=$!
trap 'stop_pid "$FL_PID"; stop_pid "$REDIS_PID"; rm -rf "$WORK"' EXIT
for _ in $(seq 1 300); do redis-cli -p $REDIS_PORT ping >/dev/null 2>&1 && break; sleep 0.05; done

run() { # name duration args... → "instructions requests"
    local name="$1" d="$2"; shift 2
    local out="$WORK/cg-$name-$d.out" line
    line=$(valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" bench --json \
        --duration "$d" --workload reject --clients 1 "$@" 2>/dev/null)
    local ir
    ir=$(awk '/^(summary|totals):/ { print $2; exit }' "$out")
    echo "$ir $(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')"
}
for spec in "fencelog-client:--server $URL --body client" \
    "fencelog-client-reqwest:--server $URL --body client-reqwest" \
    "redis-rs:--target redis --redis-url redis://127.0.0.1:$REDIS_PORT/"; do
    name="${spec%%:*}" args="${spec#*:}"
    # shellcheck disable=SC2086
    read -r ir1 n1 < <(run "$name" "$SHORT" $args)
    # shellcheck disable=SC2086
    read -r ir2 n2 < <(run "$name" "$LONG" $args)
    python3 -c "import sys; a,b,c,d=map(int,sys.argv[2:]); print(f'{sys.argv[1]}: {(c-a)/(d-b):,.0f} instructions per request ({b} and {d} requests, {a:,} and {c:,} instructions)')" \
        "$name" "$ir1" "$n1" "$ir2" "$n2"
done

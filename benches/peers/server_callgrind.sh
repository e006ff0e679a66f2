#!/usr/bin/env bash
# Instructions per request on the server side: `fencelog serve` under
# callgrind (the load generator runs natively, one client, the lightest
# encoding), for a workload run twice, for two durations, against the
# same server. The slope (difference in the server's instructions ÷
# difference in requests) cancels start-up, set-up and shutdown.
#
#   benches/peers/server_callgrind.sh BIN [WORKLOAD...]   # default: reject append
#
# Each BIN may be a different build (e.g. before and after a change):
#   for b in old/fencelog new/fencelog; do benches/peers/server_callgrind.sh "$b"; done
#
# Prints one line per workload; stops its server by PID.
set -euo pipefail

BIN="${1:?usage: server_callgrind.sh path/to/fencelog [workload...]}"
shift
WORKLOADS=("$@")
[ ${#WORKLOADS[@]} -gt 0 ] || WORKLOADS=(reject append)
SHORT="${SHORT:-2}"
LONG="${LONG:-6}"
PORT=17190
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d /tmp/fencelog-server-cg.XXXXXX)"
PID=""
# shellcheck source=serve.sh
. "$HERE/serve.sh" # stop_pid, wait_healthy
trap 'stop_pid "$PID"; rm -rf "$WORK"' EXIT

# Each measurement is its own server on a fresh data directory (start,
# load, stop): callgrind writes its totals when the process exits.
measure() { # workload duration → "instructions requests"
    local workload="$1" d="$2" out="$WORK/cg-$1-$2.out" line
    rm -rf "$WORK/data"
    RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$BIN" serve --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" \
        2>>"$WORK/server.log" >/dev/null &
    PID=$!
    wait_healthy "http://127.0.0.1:$PORT" "$PID" "$WORK/server.log"
    line=$("$BIN" bench --json --server "http://127.0.0.1:$PORT" --clients 1 \
        --workload "$workload" --duration "$d")
    stop_pid "$PID"
    PID=""
    local ir
    ir=$(awk '/^(summary|totals):/ { print $2; exit }' "$out")
    echo "$ir $(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')"
}

for w in "${WORKLOADS[@]}"; do
    read -r ir1 n1 < <(measure "$w" "$SHORT")
    read -r ir2 n2 < <(measure "$w" "$LONG")
    python3 -c "import sys; a,b,c,d=map(int,sys.argv[2:]); print(f'{sys.argv[1]}: {(c-a)/(d-b):,.0f} server instructions per request ({b} and {d} requests, {a:,} and {c:,} instructions)')" \
        "$w" "$ir1" "$n1" "$ir2" "$n2"
done

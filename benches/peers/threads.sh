#!/usr/bin/env bash
# Where a request's server CPU goes, by thread: one `fencelog serve` on a
# fresh data directory per workload, loaded by `fencelog bench`, and the
# CPU (user + system ticks, /proc/PID/task/TID/stat) and context switches
# (/proc/PID/task/TID/status) of every server thread over the load,
# grouped by thread name and divided by the requests answered. Also the
# appends per group commit (the server's own metrics). Steadier than a
# profile and needs nothing but /proc: the figures that the comparison of
# appends with rejections rests on (docs/benchmark-history.md, "Where an
# append's server CPU goes, by thread").
#
#   benches/peers/threads.sh target/release/fencelog            # append and reject, 64 clients
#   ROUNDS=3 DURATION=4 CLIENTS=64 benches/peers/threads.sh BIN
#
# One JSON line per run on stdout; stops its server by PID.
set -euo pipefail

BIN="$(realpath "${1:?usage: threads.sh path/to/fencelog}")"
ROUNDS="${ROUNDS:-2}"
DURATION="${DURATION:-4}"
CLIENTS="${CLIENTS:-64}"
PORT="${PORT:-17195}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d /tmp/fencelog-threads.XXXXXX)"
PID=""
# shellcheck source=serve.sh
. "$HERE/serve.sh" # stop_pid, wait_healthy
trap 'stop_pid "$PID"; rm -rf "$WORK"' EXIT

# "name ticks switches" per thread of the server, one line each.
threads() {
    local t
    for t in /proc/"$PID"/task/*; do
        printf '%s %s %s\n' "$(tr ' ' '_' <"$t/comm")" \
            "$(awk '{ print $14 + $15 }' "$t/stat")" \
            "$(awk '/ctxt_switches/ { s += $2 } END { print s }' "$t/status")"
    done
}

groups() {
    curl -sf "http://127.0.0.1:$PORT/metrics" |
        awk '/^fencelog_groups_committed_total/ { print $2 }'
}

for round in $(seq 1 "$ROUNDS"); do
    for workload in append reject; do
        rm -rf "$WORK/data"
        RUST_LOG=warn "$BIN" serve --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" \
            2>>"$WORK/server.log" >/dev/null &
        PID=$!
        wait_healthy "http://127.0.0.1:$PORT" "$PID" "$WORK/server.log"
        threads >"$WORK/before"
        g0=$(groups)
        "$BIN" bench --json --server "http://127.0.0.1:$PORT" --duration "$DURATION" \
            --workload "$workload" --clients "$CLIENTS" >"$WORK/bench.json"
        threads >"$WORK/after"
        g1=$(groups)
        stop_pid "$PID"
        PID=""
        python3 - "$WORK/bench.json" "$WORK/before" "$WORK/after" "$g0" "$g1" "$round" <<'PY'
import json, os, sys
bench = json.load(open(sys.argv[1]))
hz = os.sysconf("SC_CLK_TCK")
def load(path):
    rows = {}
    for line in open(path):
        name, ticks, switches = line.split()
        t, s = rows.get(name, (0, 0))
        rows[name] = (t + int(ticks), s + int(switches))
    return rows
before, after = load(sys.argv[2]), load(sys.argv[3])
requests = bench["requests"]
by_thread = {}
for name, (t, s) in after.items():
    t0, s0 = before.get(name, (0, 0))
    # Setup and the read-back verification are in the window too: they
    # are the same for both workloads and small next to the load.
    by_thread[name] = {
        "cpu_us_per_request": round((t - t0) / hz * 1e6 / requests, 2),
        "switches_per_request": round((s - s0) / requests, 3),
    }
groups = float(sys.argv[5]) - float(sys.argv[4])
print(json.dumps({
    "round": int(sys.argv[6]),
    "workload": bench["workload"],
    "clients": bench["clients"],
    "requests_per_s": round(bench["requests_per_s"]),
    "client_cpu_us_per_request": round(bench["client_cpu_us_per_request"], 2),
    "server_cpu_us_per_request": round(sum(v["cpu_us_per_request"] for v in by_thread.values()), 2),
    # A rejection commits nothing (its groups are the set-up's fences).
    "requests_per_group": round(requests / groups, 1) if bench["workload"] == "append" else None,
    "threads": by_thread,
}))
PY
    done
done

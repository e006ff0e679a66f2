#!/usr/bin/env bash
# Cluster mode's figures: a 3-node cluster on loopback against one node,
# in one run, same binary, same machine (all nodes and the load generator
# share the cores and the disk). Rounds interleave (single, cluster,
# single, ...) so a neighbour's load hits both.
#
#   benches/peers/cluster.sh [target/release/fencelog] > benches/peers/cluster.jsonl
#
# Workloads: durable single-record appends at CLIENTS (default 64) clients
# and stale rejections at 16 clients. The cluster runs with its rebalancer
# (leaders spread, (k mod 3)+1) and the bench follows the fencelog-leader
# hint, so each connection ends up on its stream's shard leader, as a smart
# client's would. One JSON line per measurement on stdout (the bench's own
# report plus "system", "round" and the server processes' CPU per request,
# all three nodes summed for the cluster and by node, and the cluster's
# Raft entries/s and requests per entry); a summary with the ratios on
# stderr. SHARDS=3 gives one shard per node, SHARDS=1 one group for all
# (the default is the server's, 8).
# Every process is stopped by its own PID.
set -euo pipefail

BIN="$(realpath "${1:-target/release/fencelog}")"
DURATION="${DURATION:-10}" # seconds, at least 3
CLIENTS="${CLIENTS:-64}"
ROUNDS="${ROUNDS:-2}"
SHARDS="${SHARDS:-8}"
BASE_PORT="${BASE_PORT:-17180}"
WORK="$(mktemp -d /tmp/fencelog-cluster.XXXXXX)"
PIDS=()

stop_all() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
}
trap 'stop_all; rm -rf "$WORK"' EXIT

# shellcheck source=serve.sh
. "$(dirname "$0")/serve.sh"

start_single() { # dir
    "$BIN" serve --data-dir "$1/data" --listen "127.0.0.1:$BASE_PORT" \
        2>>"$1/server.log" >/dev/null &
    PIDS+=($!)
    URL="http://127.0.0.1:$BASE_PORT"
    wait_healthy "$URL" "$!" "$1/server.log"
}

start_cluster() { # dir
    local members="" i
    for i in 1 2 3; do
        members+="${members:+,}$i=127.0.0.1:$((BASE_PORT + i))"
    done
    for i in 1 2 3; do
        "$BIN" serve --node-id "$i" --cluster "$members" --shards "$SHARDS" \
            --data-dir "$1/node-$i" --listen "127.0.0.1:$((BASE_PORT + i))" \
            2>>"$1/node-$i.log" >/dev/null &
        PIDS+=($!)
    done
    for i in 1 2 3; do
        wait_healthy "http://127.0.0.1:$((BASE_PORT + i))" "${PIDS[$((i - 1))]}" "$1/node-$i.log"
    done
    URL="http://127.0.0.1:$((BASE_PORT + 1))"
    # Leaders spread: every shard led by its preferred node, (k mod 3)+1,
    # before the load starts, so no transfer runs during a measurement
    # (bounded wait; each node's rebalancer takes its shards one by one).
    for _ in $(seq 1 1200); do
        if curl -sf "$URL/_cluster/admin/status" | python3 -c '
import json, sys
s = json.load(sys.stdin)["shards"]
sys.exit(0 if all(x.get("leader") == x.get("preferred_leader") for x in s) else 1)'; then
            return 0
        fi
        sleep 0.1
    done
    echo "leaders did not reach their preferred nodes in 120 s" >&2
    exit 1
}

# CPU seconds (user + system) every server process of this run has used
# so far, from /proc/PID/stat: the steadier figure on a noisy machine.
# One comma-separated figure per process, in start order (node 1 first),
# so the leaders' and the followers' shares can be told apart.
servers_cpu_s() {
    local ticks="" p
    for p in "${PIDS[@]}"; do
        ticks+="${ticks:+,}$(awk '{print $14 + $15}' "/proc/$p/stat")"
    done
    python3 -c "import os,sys; print(','.join(str(int(t) / os.sysconf('SC_CLK_TCK')) for t in sys.argv[1].split(',')))" "$ticks"
}

# Raft entries every shard's log holds so far (node 1's view; a single
# node has none): with the appends, the ops each entry carried, the
# cluster's throughput lever (the per-entry costs dwarf the per-op ones).
entries_now() {
    curl -sf "$URL/_cluster/admin/status" 2>/dev/null |
        python3 -c 'import json, sys; print(sum(s.get("last_log_index") or 0 for s in json.load(sys.stdin)["shards"]))' 2>/dev/null ||
        echo 0
}

bench() { # system round workload clients
    local c1 c2 e1 e2
    "$BIN" bench --server "$URL" --json --duration "$DURATION" \
        --workload "$3" --clients "$4" >"$WORK/bench.json" &
    local bench_pid=$!
    # The servers' CPU over the middle of the load (from 1 s in to 1 s
    # before the end), so neither set-up nor the read-back verification
    # after the load counts; ÷ the rate gives CPU per request.
    sleep 1
    c1=$(servers_cpu_s)
    e1=$(entries_now)
    sleep $((DURATION - 2))
    c2=$(servers_cpu_s)
    e2=$(entries_now)
    wait "$bench_pid"
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
r["system"] = sys.argv[2]
r["round"] = int(sys.argv[3])
window_s = float(sys.argv[6])
per_node = [float(b) - float(a) for a, b in zip(sys.argv[4].split(","), sys.argv[5].split(","))]
rate = max(1.0, r["requests_per_s"])
r["server_cpu_us_per_request"] = round(sum(per_node) * 1e6 / window_s / rate, 1)
if len(per_node) > 1:
    r["server_cpu_us_per_request_by_node"] = [round(c * 1e6 / window_s / rate, 1) for c in per_node]
entries = int(sys.argv[8]) - int(sys.argv[7])
if entries > 0:
    r["raft_entries_per_s"] = round(entries / window_s)
    r["requests_per_raft_entry"] = round(r["requests_per_s"] * window_s / entries, 2)
print(json.dumps(r))' "$WORK/bench.json" "$1" "$2" "$c1" "$c2" "$((DURATION - 2))" "$e1" "$e2"
}

leaders() { # status of node 1, one line to stderr
    curl -sf "$URL/_cluster/admin/status" |
        python3 -c 'import json,sys; print("leaders:", json.load(sys.stdin)["leaders"], file=sys.stderr)'
}

OUT="$WORK/out.jsonl"
for round in $(seq 1 "$ROUNDS"); do
    dir="$WORK/single-$round"
    mkdir -p "$dir"
    start_single "$dir"
    bench single "$round" append "$CLIENTS" | tee -a "$OUT"
    bench single "$round" reject 16 | tee -a "$OUT"
    stop_all
    dir="$WORK/cluster-$round"
    mkdir -p "$dir"
    start_cluster "$dir"
    leaders
    bench cluster "$round" append "$CLIENTS" | tee -a "$OUT"
    bench cluster "$round" reject 16 | tee -a "$OUT"
    stop_all
done

python3 - "$OUT" >&2 <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def best(system, workload, key):
    xs = [r for r in rows if r["system"] == system and r["workload"] == workload]
    return max(xs, key=lambda r: r[key])
for workload, key in [("append", "appends_per_s"), ("reject", "rejections_per_s")]:
    s, c = best("single", workload, key), best("cluster", workload, key)
    print(f"{workload}: single {s[key]:.0f}/s p50 {s['latency']['p50_us']} us p99 {s['latency']['p99_us']} us; "
          f"cluster {c[key]:.0f}/s p50 {c['latency']['p50_us']} us p99 {c['latency']['p99_us']} us; "
          f"ratio {c[key] / s[key]:.2f}, p99 x{c['latency']['p99_us'] / max(1, s['latency']['p99_us']):.1f}; "
          f"server CPU per request {s['server_cpu_us_per_request']} us vs {c['server_cpu_us_per_request']} us "
          f"(all nodes; by node {'/'.join(str(x) for x in c.get('server_cpu_us_per_request_by_node', []))}); "
          f"requests per Raft entry {c.get('requests_per_raft_entry', '-')}")
EOF

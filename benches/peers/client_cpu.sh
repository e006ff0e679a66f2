#!/usr/bin/env bash
# The client target (at most 1.3× redis-rs's): CPU per request of the load generator's own
# process while it drives fencelog through the client crate
# (`--body client`: fencelog_client::Client, its HTTP/1.1 pool; and
# `--body client-reqwest`: the same client on reqwest, as before) and Redis
# through redis-rs (the fenced Lua append), same workloads, side by side in
# one run. The figure is `client_cpu_us_per_request` of each JSON line
# (/proc/self/stat of the generator ÷ requests); the generator's own
# bookkeeping is in every row alike.
#
#   benches/peers/client_cpu.sh BIN            # BIN built with --features peers
#   DURATION=5 ROUNDS=1 benches/peers/client_cpu.sh BIN
#
# Starts its own fencelog and redis-server (AOF, appendfsync always, as
# run.sh does) on 127.0.0.1, stops both by PID, writes client_cpu.jsonl
# next to this script and prints the ratios.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="${1:?usage: client_cpu.sh path/to/fencelog}"
DURATION="${DURATION:-10}"
ROUNDS="${ROUNDS:-2}"
REDIS_PORT=16389
WORK="$(mktemp -d /tmp/fencelog-client-cpu.XXXXXX)"
REDIS_PID=""
command -v redis-server >/dev/null || {
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server
}
# shellcheck source=serve.sh
. "$HERE/serve.sh"
serve_start "$BIN" 17080 "$WORK"
FL_PID="$PID"
redis-server --bind 127.0.0.1 --port $REDIS_PORT --dir "$WORK" \
    --appendonly yes --appendfsync always --save '' --daemonize no \
    --logfile "$WORK/redis.log" &
REDIS_PID=$!
trap 'stop_pid "$FL_PID"; stop_pid "$REDIS_PID"; rm -rf "$WORK"' EXIT
for _ in $(seq 1 300); do redis-cli -p $REDIS_PORT ping >/dev/null 2>&1 && break; sleep 0.05; done

OUT="$HERE/client_cpu.jsonl"
: >"$OUT"
row() { # system args...
    local system="$1"; shift
    "$BIN" bench --json --duration "$DURATION" "$@" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
r["system"] = sys.argv[1]
assert r["verification"]["passed"], r["verification"]
print(json.dumps(r))' "$system" | tee -a "$OUT"
}
# Rounds alternate the three clients so drift on this shared machine hits
# each alike; the table is each row's mean over the rounds.
for _ in $(seq 1 "$ROUNDS"); do
    for w in "--workload reject --clients 16" "--workload append --clients 16" "--workload reject --clients 1"; do
        # shellcheck disable=SC2086
        row fencelog-client --server "$URL" --body client $w
        # shellcheck disable=SC2086
        row fencelog-client-reqwest --server "$URL" --body client-reqwest $w
        # shellcheck disable=SC2086
        row redis-rs --target redis --redis-url "redis://127.0.0.1:$REDIS_PORT/" $w
    done
done
python3 - "$OUT" <<'EOF'
import json, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1])]
cpu = defaultdict(list)
for r in rows:
    cpu[(r["workload"], r["clients"], r["system"])].append(r["client_cpu_us_per_request"])
print("| workload | clients | fencelog client (pool) µs/req | fencelog client (reqwest) µs/req | redis-rs µs/req | pool ÷ redis-rs |")
print("|---|---|---|---|---|---|")
for (w, c) in sorted({(k[0], k[1]) for k in cpu}):
    mean = lambda s: sum(cpu[(w, c, s)]) / len(cpu[(w, c, s)])
    ours, old, theirs = mean("fencelog-client"), mean("fencelog-client-reqwest"), mean("redis-rs")
    print(f"| {w} | {c} | {ours:.1f} | {old:.1f} | {theirs:.1f} | {ours / theirs:.2f}× |")
EOF

#!/usr/bin/env bash
# Cluster mode: what a shard snapshot costs in memory. Three nodes, one shard,
# a snapshot every 100 entries. One follower is stopped, FILL_MIB MiB of
# records (RECORD_KIB KiB each) are appended through the leader until its
# log is purged past the follower, then the follower is started again and
# catches up by snapshot. Prints one JSON line: the peak resident memory
# (VmHWM) of the leader and of the follower, the shard's bytes, and how
# long the catch-up took.
#
#   benches/peers/snapshot_memory.sh [target/release/fencelog]
#
# Every process is stopped by its own PID.
set -euo pipefail

BIN="$(realpath "${1:-target/release/fencelog}")"
FILL_MIB="${FILL_MIB:-200}"
RECORD_KIB="${RECORD_KIB:-256}"
BASE_PORT="${BASE_PORT:-17480}"
CATCH_UP_S="${CATCH_UP_S:-300}" # how long the follower may take
WORK="$(mktemp -d /tmp/fencelog-snapmem.XXXXXX)"
declare -A PIDS=()

stop_node() { # id
    local p="${PIDS[$1]:-}"
    [ -n "$p" ] || return 0
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    unset "PIDS[$1]"
}
stop_all() { for i in "${!PIDS[@]}"; do stop_node "$i"; done; }
trap 'stop_all; rm -rf "$WORK"' EXIT

# shellcheck source=serve.sh
. "$(dirname "$0")/serve.sh"

members=""
for i in 1 2 3; do members+="${members:+,}$i=127.0.0.1:$((BASE_PORT + i))"; done
url() { echo "http://127.0.0.1:$((BASE_PORT + $1))"; }

start_node() { # id
    "$BIN" serve --node-id "$1" --cluster "$members" --shards 1 \
        --raft-snapshot-logs 100 --data-dir "$WORK/node-$1" \
        --listen "127.0.0.1:$((BASE_PORT + $1))" 2>>"$WORK/node-$1.log" >/dev/null &
    PIDS[$1]=$!
    wait_healthy "$(url "$1")" "$!" "$WORK/node-$1.log"
}

status() { # id field: shard 0's field in the node's admin status
    curl -sf "$(url "$1")/_cluster/admin/status" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["shards"][0].get(sys.argv[1]) or 0)' "$2"
}

hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/${PIDS[$1]}/status"; }

for i in 1 2 3; do start_node "$i"; done
# The rebalancer moves the shard to its preferred leader first, so the
# leadership does not move during the measurement.
leader=0
for _ in $(seq 1 1200); do
    leader=$(status 1 leader)
    [ "$leader" != 0 ] && [ "$leader" = "$(status 1 preferred_leader)" ] && break
    leader=0
    sleep 0.1
done
[ "$leader" != 0 ] || { echo "the shard did not settle on its preferred leader in 120 s" >&2; exit 1; }
late=$(( leader % 3 + 1 ))
stop_node "$late"

python3 -c '
import json, sys
print(json.dumps({"fencing_token": 1, "records": [{"body": "x" * (int(sys.argv[1]) * 1024)}]}))' \
    "$RECORD_KIB" >"$WORK/record.json"
n=$(( FILL_MIB * 1024 / RECORD_KIB ))
for _ in $(seq 1 "$n"); do
    curl -sf -o /dev/null -X POST "$(url "$leader")/v1/streams/s/records" \
        -H 'content-type: application/json' --data-binary @"$WORK/record.json"
done
last=$(status "$leader" last_log_index)
for _ in $(seq 1 600); do
    [ "$(status "$leader" snapshot_index)" -ge $(( last - 100 )) ] && break
    sleep 0.1
done
leader_before=$(hwm_kib "$leader")
shard_bytes=$(du -sb "$WORK/node-$leader/shards" | cut -f1)

t0=$(date +%s.%N)
start_node "$late"
caught=0
for _ in $(seq 1 $(( CATCH_UP_S * 10 ))); do
    if [ "$(status "$late" applied_index)" -ge "$last" ]; then caught=1; break; fi
    sleep 0.1
done
t1=$(date +%s.%N)
python3 -c '
import json, sys
a = sys.argv
print(json.dumps({
    "bin": a[1], "fill_mib": int(a[2]), "record_kib": int(a[3]),
    "shard_bytes_on_leader": int(a[4]),
    "leader_vmhwm_mib_before_catch_up": round(int(a[5]) / 1024, 1),
    "leader_vmhwm_mib": round(int(a[6]) / 1024, 1),
    "follower_vmhwm_mib": round(int(a[7]) / 1024, 1),
    "caught_up": a[8] == "1", "catch_up_s": round(float(a[10]) - float(a[9]), 2),
}))' "$BIN" "$FILL_MIB" "$RECORD_KIB" "$shard_bytes" "$leader_before" \
    "$(hwm_kib "$leader")" "$(hwm_kib "$late")" "$caught" "$t0" "$t1"

#!/usr/bin/env bash
# Consumers (issue 13): read throughput of one stream of FILL_BYTES
# (default 1 GiB) of 1 KiB records from the page cache, with the
# project's own Rust client over the binary read format and over JSON,
# against `cat` of the same segment files, in one run, rounds interleaved
# (cat, binary, json, cat, ...) so a neighbour's load hits all three.
#
#   benches/peers/consume.sh [target/release/fencelog] > benches/peers/consume.jsonl
#
# One JSON line per measurement on stdout; a summary with the ratios on
# stderr. The server and the reader are `fencelog serve` and
# `fencelog bench-read` (src/cli/bench_read.rs: every record's seq, size
# and body checked); the server's CPU seconds per read come from
# /proc/PID/stat. The server is stopped by its own PID.
set -euo pipefail

BIN="$(realpath "${1:-target/release/fencelog}")"
FILL_BYTES="${FILL_BYTES:-1073741824}"
RECORD_BYTES="${RECORD_BYTES:-1024}"
ROUNDS="${ROUNDS:-3}"
PORT="${PORT:-17072}"
URL="http://127.0.0.1:$PORT"
WORK="$(mktemp -d /tmp/fencelog-consume.XXXXXX)"
PID=""

stop_pid() { # pid
    [ -n "$1" ] || return 0
    kill -TERM "$1" 2>/dev/null || return 0
    wait "$1" 2>/dev/null || true
}
trap 'stop_pid "$PID"; rm -rf "$WORK"' EXIT

"$BIN" serve --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" 2>>"$WORK/server.log" &
PID=$!
for _ in $(seq 1 2000); do
    curl -sf "$URL/healthz" >/dev/null 2>&1 && break
    kill -0 "$PID" 2>/dev/null || { echo "server exited: $(cat "$WORK/server.log")" >&2; exit 1; }
    sleep 0.005
done

read_args=(--server "$URL" --fill-bytes "$FILL_BYTES" --record-bytes "$RECORD_BYTES")
# Fills the stream (binary batches), then one untimed read warms the page
# cache and the server.
"$BIN" bench-read "${read_args[@]}" --rounds 1 >/dev/null

server_cpu_s() { awk '{ print ($14 + $15) / 100 }' /proc/"$PID"/stat; }
segments() { find "$WORK/data" -name '*.seg' -print0 | sort -z; }
seg_bytes=$(segments | xargs -0 cat | wc -c)
segments | xargs -0 cat >/dev/null

for round in $(seq 1 "$ROUNDS"); do
    t0=$(date +%s%N)
    segments | xargs -0 cat >/dev/null
    t1=$(date +%s%N)
    python3 -c 'import json,sys; b=int(sys.argv[1]); s=(int(sys.argv[3])-int(sys.argv[2]))/1e9; print(json.dumps({"format":"cat","round":int(sys.argv[4]),"segment_bytes":b,"seconds":round(s,3),"mb_per_s":round(b/s/1e6,1)}))' \
        "$seg_bytes" "$t0" "$t1" "$round"
    for format in binary json; do
        before=$(server_cpu_s)
        line=$("$BIN" bench-read "${read_args[@]}" --format "$format" --rounds 1)
        after=$(server_cpu_s)
        python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["round"]=int(sys.argv[4]); r["server_cpu_s"]=round(float(sys.argv[3])-float(sys.argv[2]),2); print(json.dumps(r))' \
            "$line" "$before" "$after" "$round"
    done
done | tee "$WORK/results.jsonl"

python3 - "$WORK/results.jsonl" >&2 <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["format"].lower(), []).append(r["mb_per_s"])
med = {k: statistics.median(v) for k, v in by.items()}
print(f"median MB/s over {len(by['cat'])} rounds: cat {med['cat']:.0f}, "
      f"binary {med['binary']:.0f} ({med['binary'] / med['cat']:.1%} of cat), "
      f"json {med['json']:.0f} ({med['json'] / med['cat']:.1%} of cat)")
EOF

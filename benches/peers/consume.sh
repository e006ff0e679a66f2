#!/usr/bin/env bash
# Consumers: read throughput of one stream of FILL_BYTES
# (default 1 GiB) of 1 KiB records from the page cache, with the
# project's own Rust client over the binary read format and over JSON,
# against `cat` of the same segment files, in one run, rounds interleaved
# (cat, binary, json, cat, ...) so a neighbour's load hits all three.
#
#   benches/peers/consume.sh [target/release/fencelog] > benches/peers/consume.jsonl
#
# One JSON line per measurement on stdout; a summary with the ratios on
# stderr, by wall clock and by CPU (bytes over the CPU seconds of the
# busiest process: cat itself, or the busier of client and server), the
# latter because on a shared machine the wall clock of a two-process
# pipeline and of one cat suffer a neighbour's load differently. The server and the reader are `fencelog serve` and
# `fencelog bench-read` (src/cli/bench_read.rs: every record's seq, size
# and body checked); the server's CPU seconds per read come from
# /proc/PID/stat. The server is stopped by its own PID.
set -euo pipefail

BIN="$(realpath "${1:-target/release/fencelog}")"
FILL_BYTES="${FILL_BYTES:-1073741824}"
RECORD_BYTES="${RECORD_BYTES:-1024}"
ROUNDS="${ROUNDS:-3}"
PORT="${PORT:-17072}"
WORK="$(mktemp -d /tmp/fencelog-consume.XXXXXX)"
PID=""
# shellcheck source=serve.sh
. "$(dirname "$0")/serve.sh"
serve_start "$BIN" "$PORT" "$WORK"

read_args=(--server "$URL" --fill-bytes "$FILL_BYTES" --record-bytes "$RECORD_BYTES")
# Fills the stream (binary batches), then one untimed read warms the page
# cache and the server.
"$BIN" bench-read "${read_args[@]}" --rounds 1 >/dev/null

server_cpu_s() { awk '{ print ($14 + $15) / 100 }' /proc/"$PID"/stat; }
segments() { find "$WORK/data" -name '*.seg' -print0 | sort -z; }
segments | xargs -0 cat >/dev/null

for round in $(seq 1 "$ROUNDS"); do
    # cat of every segment, timed, with its CPU (user + system) from the
    # child's rusage.
    python3 - "$round" "$WORK/data" <<'PY'
import json, os, resource, subprocess, sys, time
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(sys.argv[2]) for f in fs if f.endswith(".seg"))
size = sum(os.path.getsize(f) for f in files)
before = resource.getrusage(resource.RUSAGE_CHILDREN)
t0 = time.monotonic()
subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
secs = time.monotonic() - t0
after = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(json.dumps({"format": "cat", "round": int(sys.argv[1]), "segment_bytes": size,
                  "seconds": round(secs, 3), "mb_per_s": round(size / secs / 1e6, 1), "cat_cpu_s": round(cpu, 2)}))
PY
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
by, cpu = {}, {}
for r in rows:
    f = r["format"].lower()
    by.setdefault(f, []).append(r["mb_per_s"])
    # CPU per byte: cat's own; for a read, the busier of client and server
    # (each has a core of its own on an idle 2-core machine).
    busy = r["cat_cpu_s"] if f == "cat" else max(r["client_cpu_s"], r["server_cpu_s"])
    moved = r.get("segment_bytes") or r["record_bytes"]
    cpu.setdefault(f, []).append(moved / busy / 1e6 if busy else float("inf"))
med = {k: statistics.median(v) for k, v in by.items()}
bound = {k: statistics.median(v) for k, v in cpu.items()}
print(f"median MB/s over {len(by['cat'])} rounds (wall clock): cat {med['cat']:.0f}, "
      f"binary {med['binary']:.0f} ({med['binary'] / med['cat']:.1%} of cat), "
      f"json {med['json']:.0f} ({med['json'] / med['cat']:.1%} of cat)")
print(f"CPU-bound MB/s (bytes / busiest process's CPU seconds): cat {bound['cat']:.0f}, "
      f"binary {bound['binary']:.0f} ({bound['binary'] / bound['cat']:.1%} of cat), "
      f"json {bound['json']:.0f} ({bound['json'] / bound['cat']:.1%} of cat)")
EOF

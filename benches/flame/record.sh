#!/usr/bin/env bash
# A flame graph of the fencelog server under one `fencelog bench` workload.
#
#   benches/flame/record.sh BIN OUT.svg [bench args...]
#   benches/flame/record.sh target/release/fencelog benches/flame/reject-after.svg \
#       --workload reject --clients 16
#
# Starts BIN's server on a temporary data directory at 127.0.0.1, samples
# it with perf (software clock, 499 Hz, DWARF call graphs, so it works in
# a VM without hardware counters and without frame pointers) while BIN's
# own load generator runs the workload for DURATION seconds (default 8),
# stops the server by its PID and writes the SVG (benches/flame/flame.py).
# Installs linux-perf when perf is missing.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="$(realpath "$1")"
OUT="$2"
shift 2
DURATION="${DURATION:-8}"
PORT="${PORT:-17171}"
command -v perf >/dev/null || {
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y linux-perf
}

# The server start, health wait and stop by PID are the peers scripts'.
# shellcheck source=../peers/serve.sh
. "$HERE/../peers/serve.sh"
WORK="$(mktemp -d /tmp/fencelog-flame.XXXXXX)"
serve_start "$BIN" "$PORT" "$WORK"
PERF_PID=""
trap 'stop_pid "$PERF_PID"; stop_pid "$PID"; rm -rf "$WORK"' EXIT
perf record -e cpu-clock -F 499 --call-graph dwarf,16384 -p "$PID" \
    -o "$WORK/perf.data" 2>"$WORK/perf.log" &
PERF_PID=$!
# perf prints nothing when it attaches; give it a moment to open its
# buffers before the load starts (a missed first second only shortens the
# profile).
sleep 1
"$BIN" bench --server "$URL" --duration "$DURATION" "$@"
# SIGINT makes perf write out what it sampled.
kill -INT "$PERF_PID"
wait "$PERF_PID" 2>/dev/null || true
PERF_PID=""
perf script -i "$WORK/perf.data" 2>/dev/null |
    python3 "$HERE/flame.py" --top "${TOP:-0}" --title "fencelog server: $* ($(basename "$OUT" .svg))" >"$OUT"
echo "wrote $OUT" >&2

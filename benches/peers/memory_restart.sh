#!/usr/bin/env bash
# fencelog's memory per stream and per record, and its restart time on a
# large log, each against a `fencelog serve` process of its own.
#
#   benches/peers/memory_restart.sh target/release/fencelog
#
# STREAMS (default 1000000) streams with one record each: resident memory
# per stream, from the server's /proc/PID/status (anonymous memory, so the
# page cache of mapped segments does not count). RECORDS_STREAMS x
# RECORDS_PER_STREAM single-record appends: the per-record index cost.
# LOG_STREAMS x LOG_RECORDS records of 100 bytes (default 100,000 x 100 =
# 1 GB of bodies): time from start to a 200 on /healthz after a clean
# shutdown and after kill -9. Every server is stopped by its own PID.
set -euo pipefail

BIN="$(realpath "$1")"
STREAMS="${STREAMS:-1000000}"
RECORDS_STREAMS="${RECORDS_STREAMS:-100}"
RECORDS_PER_STREAM="${RECORDS_PER_STREAM:-5000}"
LOG_STREAMS="${LOG_STREAMS:-100000}"
LOG_RECORDS="${LOG_RECORDS:-100}"
PORT=17071
URL="http://127.0.0.1:$PORT"
WORK="$(mktemp -d /tmp/fencelog-mem.XXXXXX)"
PID=""
UP_MS=0

stop_pid() { # pid signal
    [ -n "$1" ] || return 0
    kill "-$2" "$1" 2>/dev/null || return 0
    for _ in $(seq 1 600); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null || true
}
trap 'stop_pid "$PID" TERM; rm -rf "$WORK"' EXIT

now_ms() { date +%s%3N; }

# Starts a server; sets PID, and UP_MS to the milliseconds until /healthz
# answered 200.
start() { # data-dir
    local t0
    t0=$(now_ms)
    "$BIN" serve --data-dir "$1" --listen "127.0.0.1:$PORT" 2>>"$WORK/server.log" &
    PID=$!
    for _ in $(seq 1 12000); do
        if curl -sf "$URL/healthz" >/dev/null 2>&1; then
            UP_MS=$(($(now_ms) - t0))
            return 0
        fi
        kill -0 "$PID" 2>/dev/null || { echo "server exited" >&2; exit 1; }
        sleep 0.005
    done
    echo "server did not come up" >&2
    exit 1
}

kib() { # pid field
    awk -v f="$2:" '$1 == f { print $2 }' /proc/"$1"/status
}

echo "== memory: $STREAMS streams with one record each"
start "$WORK/streams"
anon0=$(kib "$PID" RssAnon)
"$BIN" bench --server "$URL" --workload fill --streams "$STREAMS" --fill-records 1 --clients 32
anon1=$(kib "$PID" RssAnon)
echo "RssAnon before ${anon0} KiB, after ${anon1} KiB, VmHWM $(kib "$PID" VmHWM) KiB"
echo "per stream: $(( (anon1 - anon0) * 1024 / STREAMS )) bytes"
stop_pid "$PID" TERM
start "$WORK/streams"
echo "restart with $STREAMS streams (clean shutdown before): ${UP_MS} ms, RssAnon $(kib "$PID" RssAnon) KiB"
stop_pid "$PID" TERM
rm -rf "$WORK/streams"

records=$((RECORDS_STREAMS * RECORDS_PER_STREAM))
echo "== memory: $records single-record appends over $RECORDS_STREAMS streams"
start "$WORK/records"
anon0=$(kib "$PID" RssAnon)
"$BIN" bench --server "$URL" --workload fill --streams "$RECORDS_STREAMS" --fill-records "$RECORDS_PER_STREAM" --batch 1 --clients 32
anon1=$(kib "$PID" RssAnon)
echo "RssAnon before ${anon0} KiB, after ${anon1} KiB"
echo "per record (one frame each): $(( (anon1 - anon0) * 1024 / records )) bytes"
stop_pid "$PID" TERM
rm -rf "$WORK/records"

echo "== restart: $LOG_STREAMS streams x $LOG_RECORDS records of 100 bytes"
start "$WORK/log"
"$BIN" bench --server "$URL" --workload fill --streams "$LOG_STREAMS" --fill-records "$LOG_RECORDS" --batch "$LOG_RECORDS" --clients 32
echo "log on disk: $(du -sb "$WORK/log" | cut -f1) bytes in $(find "$WORK/log" -type f | wc -l) files"
stop_pid "$PID" TERM
start "$WORK/log"
echo "after clean shutdown: ${UP_MS} ms to serving"
kill -KILL "$PID"
wait "$PID" 2>/dev/null || true
PID=""
start "$WORK/log"
echo "after kill -9: ${UP_MS} ms to serving"
# The log still holds every record: read a stream back through the API.
curl -sf "$URL/v1/streams?limit=1" | head -c 300
echo
stop_pid "$PID" TERM
PID=""

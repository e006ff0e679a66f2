#!/usr/bin/env bash
# Idle live tails: the server's resident memory per idle SSE
# tail. TAILS (default 10000) connections each open a live tail on one
# stream, and each is counted only once it has received the tail's
# `caught_up` event (so the server holds it as a parked tail, not a
# half-read request); the server's anonymous resident memory
# (/proc/PID/status RssAnon, so mapped segments do not count) is read
# before the first and after the last, and again once they are closed.
#
#   benches/peers/idle_tails.sh [target/release/fencelog] > benches/peers/idle_tails.json
#
# The server is stopped by its own PID.
set -euo pipefail

BIN="$(realpath "${1:-target/release/fencelog}")"
TAILS="${TAILS:-10000}"
PORT="${PORT:-17073}"
WORK="$(mktemp -d /tmp/fencelog-tails.XXXXXX)"
PID=""
# shellcheck source=serve.sh
. "$(dirname "$0")/serve.sh"
ulimit -n "$((TAILS + 1000))"
serve_start "$BIN" "$PORT" "$WORK" --connections-max "$((TAILS + 100))"
curl -sf -X POST "$URL/v1/streams/t/records" -H 'content-type: application/json' \
    -d '{"fencing_token": 1, "records": [{"body": "first"}]}' >/dev/null

python3 - "$PID" "$PORT" "$TAILS" <<'PY'
import asyncio, json, sys

pid, port, tails = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def rss_anon_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1])

async def tail():
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /v1/streams/t/records?start_seq=1 HTTP/1.1\r\nHost: t\r\n"
            b"Accept: text/event-stream\r\n\r\n")
    await w.drain()
    seen = b""
    while b"event: caught_up" not in seen:
        chunk = await r.read(4096)
        if not chunk:
            raise RuntimeError(f"the tail ended: {seen[-200:]!r}")
        seen += chunk
    return r, w

async def main():
    before = rss_anon_kib()
    conns = []
    for start in range(0, tails, 500):
        conns += await asyncio.gather(*(tail() for _ in range(min(500, tails - start))))
    await asyncio.sleep(1)  # let the server's allocator settle; nothing to wait on
    held = rss_anon_kib()
    for _, w in conns:
        w.close()
    await asyncio.sleep(1)
    after = rss_anon_kib()
    print(json.dumps({
        "tails": len(conns),
        "rss_anon_kib_before": before,
        "rss_anon_kib_with_tails": held,
        "rss_anon_kib_after_close": after,
        "kib_per_tail": round((held - before) / len(conns), 2),
    }))

asyncio.run(main())
PY

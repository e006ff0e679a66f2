# Sourced by consume.sh and idle_tails.sh: one `fencelog serve` of the
# script's own on a temporary data directory, stopped by its PID (and the
# directory removed) when the script exits.
#
#   serve_start BIN PORT WORK [serve flags...]   sets PID and URL

stop_pid() { # pid
    [ -n "$1" ] || return 0
    kill -TERM "$1" 2>/dev/null || return 0
    wait "$1" 2>/dev/null || true
}

serve_start() { # bin port work [flags...]
    local bin="$1" port="$2" work="$3"
    shift 3
    URL="http://127.0.0.1:$port"
    "$bin" serve --data-dir "$work/data" --listen "127.0.0.1:$port" "$@" \
        2>>"$work/server.log" >/dev/null &
    PID=$!
    trap 'stop_pid "$PID"; rm -rf "$WORK"' EXIT
    for _ in $(seq 1 2000); do
        curl -sf "$URL/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$PID" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
        sleep 0.005
    done
    echo "the server did not come up" >&2
    exit 1
}

# Sourced by the peers scripts: one `fencelog serve` of the script's own
# on a temporary data directory, stopped by its PID (and the directory
# removed) when the script exits; and the wait for a server to answer.
#
#   serve_start BIN PORT WORK [serve flags...]   sets PID and URL
#   wait_healthy URL PID LOG                     until /healthz answers

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
    wait_healthy "$URL" "$PID" "$work/server.log"
}

wait_healthy() { # url pid log: exits the script if the server dies first
    for _ in $(seq 1 4000); do
        curl -sf "$1/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$2" 2>/dev/null || { cat "$3" >&2; exit 1; }
        sleep 0.005
    done
    echo "$1 did not come up" >&2
    exit 1
}

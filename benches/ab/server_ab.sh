#!/usr/bin/env bash
# Instructions per awaited append through the whole server (HTTP included),
# counted by callgrind, for plain appends and appends with a producer id,
# raw (headers) and JSON (fields):
#   benches/ab/server_ab.sh [FENCELOG_BIN...]   (default: target/release/fencelog)
# AB_MODES="plain" skips the producer appends (for a binary older than idempotent producers);
# AB_MODES="plain session" compares a plain append with one through the
# pipelined append session (session_appends.py).
# Each binary serves a fresh data directory on tmpfs under valgrind; the
# client (server_appends.py) sends 1000 and then 3000 appends to fresh
# servers, and the difference / 2000 is the per-append cost (start-up and
# shutdown cancel out). Instruction counts barely move on a loaded machine,
# unlike throughput. Needs valgrind and python3.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("$root/target/release/fencelog")
out=${AB_DIR:-$root/target/ab}/server
mkdir -p "$out"
port=${AB_PORT:-7391}
count() { # BIN N MODE -> instructions
  local dir log pid
  dir=$(mktemp -d /dev/shm/fencelog-ab.XXXXXX); log="$out/serve.log"
  valgrind --tool=callgrind --callgrind-out-file="$out/cg-$3-$2.out" \
    "$1" serve --data-dir "$dir" --listen "127.0.0.1:$port" >"$log" 2>&1 &
  pid=$!
  # Ready when it accepts a connection (valgrind makes start-up slow).
  until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$port),0.2)" 2>/dev/null; do
    kill -0 "$pid" || { cat "$log"; exit 1; }; sleep 0.2
  done
  if [ "$3" = session ]; then
    python3 "$root/benches/ab/session_appends.py" "$port" "$2"
  else
    python3 "$root/benches/ab/server_appends.py" "$port" "$2" "$3"
  fi
  kill -TERM "$pid"; wait "$pid" || true
  rm -rf "$dir"
  sed -n 's/.*Collected : //p' "$log"
}
for bin in "${bins[@]}"; do
  for mode in ${AB_MODES:-plain producer plain-json producer-json}; do
    small=$(count "$bin" 1000 $mode); large=$(count "$bin" 3000 $mode)
    echo "$bin $mode: $(( (large - small) / 2000 )) instructions per append"
  done
done

#!/usr/bin/env bash
# The web console's tests: its pure modules in Node, then the console in
# Debian's Chromium (playwright-core) against the real fencelog binary.
#
#   FENCELOG_BIN   the server binary (default: target/debug/fencelog)
#   CHROMIUM_BIN   the browser (default: /usr/bin/chromium)
#
# Extra arguments go to `node --test`. Exits non-zero on any failure, and
# fails (never skips) when the binary or the browser is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
run() { echo "+ $*" >&2; "$@"; }
# The pinned Node.js that cargo xtask provides (tests/node-from-pypi.sh),
# when it is there; otherwise the machine's own (20 or later).
if [ -x "$root/target/node/bin/node" ]; then
  export PATH="$root/target/node/bin:$PATH"
fi

export FENCELOG_BIN="$(realpath -m -- "${FENCELOG_BIN:-$root/target/debug/fencelog}")"
if [ ! -x "$FENCELOG_BIN" ]; then
  echo "error: fencelog binary not found at $FENCELOG_BIN; run 'cargo build' at the workspace root or set FENCELOG_BIN" >&2
  exit 1
fi
chromium="${CHROMIUM_BIN:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
  echo "error: no browser at $chromium; install Debian's chromium (cargo xtask deps does) or set CHROMIUM_BIN" >&2
  exit 1
fi

cd "$here"
run node --version
run npm ci --no-audit --no-fund --loglevel=error
# The files by name: Node 21+ reads a bare directory argument as a file.
run node --test --test-concurrency=1 "$@" test/*.test.mjs

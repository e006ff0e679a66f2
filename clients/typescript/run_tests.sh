#!/usr/bin/env bash
# Runs the TypeScript client's tests against the real fencelog binary:
# installs the locked dev dependencies (TypeScript), builds, and runs
# Node's built-in test runner.
#
#   FENCELOG_BIN   the server binary (default: the workspace's debug build,
#                  target/debug/fencelog)
#
# Extra arguments go to `node --test`. Exits non-zero on any failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
run() { echo "+ $*" >&2; "$@"; }
# The pinned Node.js that cargo xtask provides (tests/node-from-pypi.sh),
# when it is there; otherwise the machine's own (20 or later).
if [ -x "$root/target/node/bin/node" ]; then
  export PATH="$root/target/node/bin:$PATH"
fi

bin="${FENCELOG_BIN:-$root/target/debug/fencelog}"
export FENCELOG_BIN="$(realpath -m -- "$bin")"
if [ ! -x "$FENCELOG_BIN" ]; then
  echo "error: fencelog binary not found at $FENCELOG_BIN; run 'cargo build' at the workspace root or set FENCELOG_BIN" >&2
  exit 1
fi

cd "$here"
run node --version
run npm ci --no-audit --no-fund --loglevel=error
run npm run --silent build
# The files by name: Node 21+ reads a bare directory argument as a file.
run node --test "$@" test/*.test.mjs

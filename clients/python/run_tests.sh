#!/usr/bin/env bash
# Runs the Python client's tests against the real fencelog binary.
#
#   FENCELOG_BIN   the server binary (default: the workspace's debug build,
#                  target/debug/fencelog)
#   FENCELOG_PY_VENV  where the virtual environment lives (default:
#                  target/py-venv); venv.sh makes it, and rebuilds it when
#                  requirements-test.txt or the interpreter changes
#   PYTHON         the interpreter to build it with (default: python3)
#
# Extra arguments go to pytest. Exits non-zero on any failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
run() { echo "+ $*" >&2; "$@"; }

bin="${FENCELOG_BIN:-$root/target/debug/fencelog}"
# Absolute before anything changes directory.
export FENCELOG_BIN="$(realpath -m -- "$bin")"
if [ ! -x "$FENCELOG_BIN" ]; then
  echo "error: fencelog binary not found at $FENCELOG_BIN; run 'cargo build' at the workspace root or set FENCELOG_BIN" >&2
  exit 1
fi

venv="${FENCELOG_PY_VENV:-$root/target/py-venv}"
export FENCELOG_PY_VENV="$venv"
"$here/venv.sh"
# The package itself is reinstalled every run, the way a user installs it,
# so the tests exercise what `pip install ./clients/python` gives.
run "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$here"

cd "$here"
run "$venv/bin/python" -m pytest -p no:cacheprovider "$@"

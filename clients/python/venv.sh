#!/usr/bin/env bash
# Makes the virtual environment the Python client's tests run in, with the
# pinned packages of requirements-test.txt; rebuilt only when that file or
# the interpreter changes. Prints nothing on success but what pip says.
#
#   venv.sh          create or refresh it
#   venv.sh --check  exit 0 when it is up to date, 1 otherwise (no changes)
#
#   FENCELOG_PY_VENV  where it lives (default: target/py-venv in the workspace)
#   PYTHON            the interpreter to build it with (default: python3)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${FENCELOG_PY_VENV:-$root/target/py-venv}"
python="${PYTHON:-python3}"
want="$(sha256sum < "$here/requirements-test.txt" | cut -d' ' -f1) $("$python" --version 2>&1)"
have="$(cat "$venv/.fencelog-requirements" 2>/dev/null || true)"
if [ "${1:-}" = "--check" ]; then
  [ -x "$venv/bin/python" ] && [ "$have" = "$want" ]
  exit
fi
if [ -x "$venv/bin/python" ] && [ "$have" = "$want" ]; then
  exit 0
fi
run() { echo "+ $*" >&2; "$@"; }
run rm -rf "$venv"
run "$python" -m venv "$venv"
run "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements-test.txt"
echo "$want" > "$venv/.fencelog-requirements"

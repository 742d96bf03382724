#!/usr/bin/env bash
# The project's test command: Python tests (Triton interpreter, no GPU needed), then
# the VS Code client's type check and unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
"$PY" -m pytest -q -p no:cacheprovider "$@"
if [ -f package.json ] && command -v npm >/dev/null 2>&1; then
  npm test --silent
fi

#!/usr/bin/env bash
# Install KernelBand and its test dependencies into the current Python environment.
# torch is installed first, pinned, only when absent: a bare `torch` requirement on a
# fresh machine can pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "setup: installing torch==2.13.0" >&2
  "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q -e ".[test,plots]"
if command -v npm >/dev/null 2>&1 && [ -f package.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

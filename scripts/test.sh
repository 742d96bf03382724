#!/usr/bin/env bash
# The project's test command: the static checks (ruff check, ruff format --check, mypy), the
# Python tests (Triton interpreter, no GPU needed), then the VS Code client's type check
# and unit tests.
#
# Two tiers, so that this command finishes in about 10 minutes on 2 cores:
#   bash scripts/test.sh           the default tier: every test not marked `slow`
#   bash scripts/test.sh --slow    only the Python tests marked `slow`, nothing else: the
#                                  tests that took 20 s or more on 2 cores (whole sessions,
#                                  whole-corpus red-team sweeps, hangs waited out, Ray, real
#                                  editor sessions, a fresh install, matmuls under the
#                                  interpreter), each file's cheaper tests staying default
# .ci/run runs both, one after the other, so CI runs every test. The marker is registered
# in pyproject.toml ([tool.pytest.ini_options]). Arguments after --slow, or instead of it,
# are passed to pytest; a later -m replaces the tier's (`-m ""` selects every test).
#
# The static checks come first because they take seconds (mypy about a minute on a cold
# cache) and fail the script before the long suite starts; KERNELBAND_SKIP_STATIC=1 skips
# them (e.g. to rerun one test file).
#
# The Python tests run on KERNELBAND_TEST_WORKERS pytest-xdist workers (default 4; 0 runs
# them in this process). Most of a test's time is spent waiting on the worker processes
# it starts, so more workers than cores keeps two cores busy. --dist loadgroup keeps the
# tests that share a module-scoped fixture (a prepared worker, a Ray instance) on one
# worker (tests/helpers/xdist_groups.py); every other test goes to whichever worker is free.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
PYTEST=("$PY" -m pytest -q -p no:cacheprovider -n "${KERNELBAND_TEST_WORKERS:-4}" --dist loadgroup)
if [ "${1:-}" = --slow ]; then
  shift
  exec "${PYTEST[@]}" -m slow "$@"
fi
if [ "${KERNELBAND_SKIP_STATIC:-0}" != 1 ]; then
  "$PY" -m ruff check --quiet .
  # the product's code in ruff's format (tests and benchmarks keep theirs: kernels there are data)
  "$PY" -m ruff format --check --quiet kernelband server
  "$PY" -m mypy  # files and settings: [tool.mypy] in pyproject.toml
fi
"${PYTEST[@]}" -m "not slow" "$@"
if [ -f package.json ] && command -v npm >/dev/null 2>&1; then
  npm test --silent
fi

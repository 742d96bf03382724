#!/usr/bin/env bash
# Source on the GPU machine (device tool): installs carried wheels (.whl/) into /tmp/site
# and puts the working tree first on PYTHONPATH. Usage: source scripts/gpu_env.sh
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
fi
export PYTHONPATH="$PWD:$PWD/server:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

#!/usr/bin/env bash
# One device call that produces the GPU evidence for the README and the issues:
#   1. `kernelband optimize` on each example (rules generator, budget 16)
#   2. the search comparison over the suite (benchmarks/run.py), in parallel shards
# Sessions share the GPU through KERNELBAND_TIMING_LOCK: compilation and correctness
# checks overlap, but nothing else runs on the GPU while a kernel is being timed.
#
#   MINUTES=8 SHARDS=6 BUDGETS=16 bash benchmarks/gpu_batch.sh OUT_DIR
set -u
out=${1:?usage: gpu_batch.sh OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 KERNELBAND_TIMING_LOCK=/tmp/kernelband-gpu.lock
minutes=${MINUTES:-8}
shards=${SHARDS:-6}
budgets=${BUDGETS:-16}
methods=${METHODS:-kernelband,kernelband-v2,random,ucb1,greedy}
cap=${EXHAUSTIVE_CAP:-48}
resume=${RESUME_DIR:-}

if [ "${SKIP_EXAMPLES:-0}" != 1 ]; then
  python3 benchmarks/optimize_examples.py --budget 16 --out "$out" > "$out/optimize_examples.log" 2>&1 &
fi

kernels=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import suite; print(' '.join(e.module for e in suite.SUITE))")
i=0
declare -a shard_lists
for k in $kernels; do
  s=$((i % shards)); shard_lists[$s]="${shard_lists[$s]:-}${shard_lists[$s]:+,}$k"; i=$((i + 1))
done
for s in $(seq 0 $((shards - 1))); do
  dir="$out/shard$s"
  mkdir -p "$dir"
  [ -n "$resume" ] && [ -d "$resume/shard$s" ] && cp -r "$resume/shard$s/." "$dir/"
  python3 benchmarks/run.py --kernels "${shard_lists[$s]}" --methods "$methods" --budgets "$budgets" \
    --exhaustive-cap "$cap" --max-minutes "$minutes" --no-plots --out "$dir" > "$dir/run.log" 2>&1 &
done
wait
tail -n 3 "$out"/shard*/run.log
cat "$out/optimize_examples.md" 2>/dev/null

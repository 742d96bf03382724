#!/usr/bin/env bash
# Run the shards that balance_shards.py planned, in parallel on one GPU, inside one device
# call: each shard runs its (kernel, method) pairs one after another, each pair getting the
# time left before the deadline (run.py starts no run it expects not to fit).
#
#   SECONDS_LEFT=555 BUDGETS=8,32 SEEDS=0 bash benchmarks/gpu_pairs.sh .plan OUT_DIR
set -u
plan=${1:?usage: gpu_pairs.sh PLAN_DIR OUT_DIR}
out=${2:?usage: gpu_pairs.sh PLAN_DIR OUT_DIR}
budgets=${BUDGETS:-8,16,32}
seeds=${SEEDS:-0}
export PYTHONUNBUFFERED=1 KERNELBAND_TIMING_LOCK=${KERNELBAND_TIMING_LOCK:-/tmp/kernelband-gpu.lock}
deadline=$(( $(date +%s) + ${SECONDS_LEFT:-555} ))
i=0
while read -r pairs; do
  dir="$out/s$i"
  mkdir -p "$dir"
  cp "$plan/all.json" "$dir/results.json"   # the oracle rows and everything already done
  (
    for pair in $pairs; do
      minutes=$(awk "BEGIN { print ($deadline - $(date +%s)) / 60 }")
      awk "BEGIN { exit !($minutes > 0.6) }" || break
      python3 benchmarks/run.py --kernels "${pair%%:*}" --methods "${pair##*:}" --budgets "$budgets" --seeds "$seeds" \
        --exhaustive-cap 48 --no-plots --max-minutes "$minutes" --out "$dir" >> "$dir/run.log" 2>&1
    done
  ) &
  i=$((i + 1))
done < "$plan/shards.txt"
wait
grep -h "^run.py: .* ran" "$out"/s*/run.log

"""Spread the runs still missing from benchmarks/results/gpu over N balanced shards, and
fold the rows they produce back into the per-kernel shard layout of gpu_batch.sh.

gpu_batch.sh shards by kernel, so a kernel with many long runs left keeps one shard busy
while the others idle. This packs (kernel, method) pairs by their expected seconds instead:

    python benchmarks/balance_shards.py plan --budgets 8,32 --shards 8 --plan .plan
    # on the GPU:  bash benchmarks/gpu_pairs.sh .plan OUT_DIR     (one run.py per pair)
    python benchmarks/balance_shards.py collect OUT_DIR            # rows -> results/gpu/shard*/
    python benchmarks/merge_shards.py benchmarks/results/gpu      # report, plots, throughput
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import run as bench  # noqa: E402  (benchmarks/run.py)

SHARD_ROOT = Path(__file__).resolve().parent / "results" / "gpu"
BATCH_SHARDS = 6  # gpu_batch.sh's layout: kernel i of the suite lives in shard i % 6
SECONDS_PER_EVALUATION = 1.8  # H200, six to eight sessions sharing the GPU (results.json)
SECONDS_PER_RUN = 11.0        # worker start, baseline checks, final interleaved re-measurement


def plan(budgets: list[int], methods: list[str], shards: int, gpu: str, seed: int) -> tuple[list[list[str]], list[float]]:
    """Greedy longest-first packing of the missing (kernel, method) pairs into shards."""
    done = {bench.run_key(r) for r in bench.load_shard_rows(SHARD_ROOT)}
    cost: dict[str, float] = {}
    for e in bench.load_suite().SUITE:
        for m in methods:
            for b in budgets:
                if (e.module, m, b, seed, gpu) not in done:
                    cost[f"{e.module}:{m}"] = cost.get(f"{e.module}:{m}", 0.0) + SECONDS_PER_RUN + b * SECONDS_PER_EVALUATION
    bins: list[list[str]] = [[] for _ in range(shards)]
    load = [0.0] * shards
    for pair, c in sorted(cost.items(), key=lambda kv: -kv[1]):
        i = load.index(min(load))
        bins[i].append(pair)
        load[i] += c
    return [b for b in bins if b], [x for x in load if x]


def collect(out_dir: Path) -> int:
    """Add the new rows under out_dir/*/results.json to results/gpu/shard{i % 6}; returns how many."""
    modules = [e.module for e in bench.load_suite().SUITE]
    new = bench.load_shard_rows(out_dir)
    added = 0
    for s in range(BATCH_SHARDS):
        path = SHARD_ROOT / f"shard{s}" / bench.RESULTS_FILE
        data = bench.load_results(path)
        keys = {bench.run_key(r) for r in data["runs"]}
        for r in new:
            if r["kernel"] in modules and modules.index(r["kernel"]) % BATCH_SHARDS == s and bench.run_key(r) not in keys:
                data["runs"].append(r)
                keys.add(bench.run_key(r))
                added += 1
        bench.save_results(path, data)
    return added


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan", help="write PLAN/all.json (every row so far) and PLAN/shards.txt (a shard a line)")
    p.add_argument("--budgets", default="8,16,32")
    p.add_argument("--methods", default=",".join(bench.METHODS))
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--gpu", default="NVIDIA H200")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plan", default=".plan")
    c = sub.add_parser("collect", help="fold OUT_DIR/*/results.json into results/gpu/shard*/")
    c.add_argument("out_dir")
    args = ap.parse_args()
    if args.cmd == "collect":
        print(f"balance_shards: {collect(Path(args.out_dir))} new rows")
        return 0
    bins, load = plan([int(b) for b in args.budgets.split(",")], args.methods.split(","), args.shards, args.gpu, args.seed)
    folder = Path(args.plan)
    folder.mkdir(parents=True, exist_ok=True)
    bench.save_results(folder / "all.json", {"schema": bench.SCHEMA, "runs": bench.load_shard_rows(SHARD_ROOT)})
    (folder / "shards.txt").write_text("".join(" ".join(b) + "\n" for b in bins))
    print(f"balance_shards: {sum(len(b) for b in bins)} pairs in {len(bins)} shards, "
          f"expected seconds per shard {[round(x) for x in load]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

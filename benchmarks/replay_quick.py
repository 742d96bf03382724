#!/usr/bin/env python3
"""A quick ablation driver over the measured landscapes: the same replayed sessions as
replay_landscapes.py (``run_one``, the held-out cost model, unmeasured proposals refunded),
fewer seeds, and only the paired ratio against greedy and the per-kernel geomeans.

    python benchmarks/replay_quick.py "greedy,kernelband,kernelband+kb_gap=0" 10 [JOBS] [KERNELS]

Policies are ``replay_landscapes.policy_spec`` strings; greedy must be among them for the
ratios. Seeds 0..N-1, budgets 8, 16, 32, the tables in benchmarks/results/landscapes/tables.
Used to choose the default policy's parts (results/landscapes/ablations/kb_parts.md); the
choice is then checked by the full 30-seed replay.
"""
from __future__ import annotations

import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from common import ROOT

import replay_landscapes as rl  # noqa: E402

TABLES = ROOT / "benchmarks" / "results" / "landscapes" / "tables"
BUDGETS = (8, 16, 32)


def _job(args: tuple[dict[str, Any], list[str], list[int]]) -> tuple[str, dict[str, list[list[float]]]]:
    """replay_landscapes' own per-kernel job (the held-out cost model, refunds), reduced to
    the best speedup at each budget."""
    d, policies, seeds = args
    out = rl.kernel_job((d, policies, seeds, max(BUDGETS), max(BUDGETS), bool(d["meta"].get("block_ptr")),
                          "refund", TABLES))
    return out["module"], {p: [[rl.at_evals(r["traj"], b) for b in BUDGETS] for r in runs]
                           for p, runs in out["runs"].items()}


def main() -> int:
    policies = sys.argv[1].split(",")
    seeds = list(range(int(sys.argv[2])))
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    kernels = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] else None
    for p in policies:
        rl.policy_spec(p)  # fail early on a typo
    tabs = rl.load_tables(TABLES, kernels)
    t0 = time.time()
    with ProcessPoolExecutor(jobs) as ex:
        res = dict(ex.map(_job, [(d, policies, seeds) for d in tabs]))
    ks = sorted(res)
    print(f"{len(ks)} kernels, seeds 0-{len(seeds) - 1}")
    for bi, b in enumerate(BUDGETS):
        print(f"-- N={b}")
        per_seed = {p: np.exp(np.log(np.array([[res[k][p][s][bi] for k in ks] for s in range(len(seeds))])).mean(1))
                    for p in policies}
        for p in policies:
            line = f"{p:60s} geo {np.exp(np.log(per_seed[p]).mean()):.4f}"
            if p != "greedy" and "greedy" in policies:
                pr = rl.paired_ratio(per_seed[p], per_seed["greedy"])
                line += f"  vs greedy {pr['ratio']:.4f} [{pr['lo']:.4f},{pr['hi']:.4f}] {pr['wins']}/{pr['losses']}"
            print(line)
    print("per kernel N=8/16:")
    for k in ks:
        print(f"{k:24s}", "  ".join(
            f"{math.exp(np.mean(np.log([r[0] for r in res[k][p]]))):.3f}/{math.exp(np.mean(np.log([r[1] for r in res[k][p]]))):.3f}"
            for p in policies))
    print("seconds", round(time.time() - t0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

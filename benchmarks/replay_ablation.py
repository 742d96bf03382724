#!/usr/bin/env python3
"""Replay ablation of the default ``kernelband`` policy over the committed pulls.

    python benchmarks/replay_ablation.py [--seeds 40] [--steps 32] [--write-prior] [--out DIR]

The world is benchmarks/simulate.py's, fed with the 1,360 recorded pulls of
benchmarks/results/results.json (T_parent/T_child per strategy, grouped by the
kernel's bottleneck class). Every policy runs the same seeds; the numbers are the best
speedup after 8, 16 and 32 pulls, and the paired differences of log speedup between the
default and each other policy: mean as a geomean ratio, with a 95% t interval over
seeds. The default's strategy prior is learned on the *other* classes' pulls
(leave-one-class-out), so no seed is scored with a prior fitted on its own class's
samples. ``--write-prior`` stores the prior fitted on all pulls in
kernelband/search/priors.json (what a real session uses).

This is a replay of recorded strategy outcomes, not a GPU measurement, and its world
has one class per seed with strategy-level (not config-level) outcomes.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from common import ROOT, paired_ratio

import simulate  # noqa: E402

from kernelband.search import BanditConfig, make_policy  # noqa: E402
from kernelband.search.kernelband import PRIORS_PATH  # noqa: E402

DATA = ROOT / "benchmarks" / "results" / "results.json"
BUDGETS = (8, 16, 32)

# (label, policy name, BanditConfig overrides); the first is the reference
SPECS: list[tuple[str, str, dict[str, Any]]] = [
    ("kernelband", "kernelband", {}),
    ("kb: shrinkage toward the prior (8 pulls)", "kernelband", {"prior_strength": 8.0}),
    ("kb: v2 reward (vs parent)", "kernelband", {"reward_mode": "v2"}),
    ("kb: no hardware term", "kernelband", {"hw_weight": 0.0}),
    ("kb: each strategy once after 3 stalled pulls", "kernelband", {"kb_patience": 3}),
    ("kb: gap term clipped at 0", "kernelband", {"kb_gap_signed": False}),
    ("kb: no depletion", "kernelband", {"kb_deplete": 1.0}),
    ("kernelband-v1", "kernelband-v1", {}),
    ("kernelband-v2", "kernelband-v2", {}),
    ("ucb1", "ucb1", {}),
    ("ucb1 (best reward)", "ucb1", {"reward_mode": "best"}),
    ("greedy", "greedy", {}),
    ("random", "random", {}),
]


def strategy_prior(classes: dict[str, dict[str, list[Optional[float]]]], exclude: Optional[str]) -> dict[str, float]:
    """Mean reward per strategy over the pulls of every class but ``exclude``, as the
    "best" reward of a pull from the best kernel: max(0, 1 - 1/x), failure 0."""
    sums: dict[str, list[float]] = {}
    for cls, table in classes.items():
        if cls == exclude:
            continue
        for s, xs in table.items():
            sums.setdefault(s, []).extend(0.0 if x is None else max(0.0, 1.0 - 1.0 / x) for x in xs)
    return {s: round(float(np.mean(v)), 5) for s, v in sums.items() if v}


def run(name: str, overrides: dict[str, Any], seed: int, steps: int, data: dict[str, Any]) -> list[float]:
    world = simulate.World(data, seed, "v1")
    cfg = BanditConfig(**overrides)
    if name == "kernelband" and "strategy_prior" not in overrides:
        cfg = BanditConfig(**{**overrides, "strategy_prior": strategy_prior(data["classes"], world.root.cls)})
    policy = make_policy(name, cfg)
    pool = [world.root.cand]
    rng = random.Random(seed)
    out = []
    for step in range(steps):
        sel = policy.select(pool, world.offered, rng)
        if sel is not None:
            cand, s = sel
            outcome, child = world.pull(cand, s, np.random.default_rng([seed, step]))
            policy.update(cand, s, outcome, child.cand if child else None)
            if child is not None:
                pool.append(child.cand)
        out.append(world.root.cand.time_ms / min(c.time_ms for c in pool))
    return out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--out", help="write replay_ablation.json and .md here")
    ap.add_argument("--write-prior", action="store_true")
    a = ap.parse_args(argv)
    data = simulate.load_data(a.data)
    if a.write_prior:
        PRIORS_PATH.write_text(json.dumps({
            "source": "benchmarks/results/results.json pulls (H200); mean of max(0, 1 - 1/x), failure 0",
            "strategies": strategy_prior(data["classes"], None)}, indent=1) + "\n")
        print(f"wrote {PRIORS_PATH.relative_to(ROOT)}")
    curves: dict[str, np.ndarray] = {}
    for label, name, over in SPECS:
        t0 = time.perf_counter()
        curves[label] = np.array([run(name, over, seed, a.steps, data) for seed in range(a.seeds)])
        print(f"  {label}: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    ref = SPECS[0][0]
    budgets = [b for b in BUDGETS if b <= a.steps]
    lines = [f"Replay over the committed pulls ({a.data}), {a.seeds} seeds, classes {sorted(data['classes'])}.",
             "", "Geomean best speedup after N pulls:", "",
             "| policy | " + " | ".join(f"@{b}" for b in budgets) + " |", "|" + " --- |" * (1 + len(budgets))]
    for label in curves:
        g = [float(np.exp(np.log(curves[label][:, b - 1]).mean())) for b in budgets]
        lines.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in g) + " |")
    lines += ["", f"Paired ratio {ref} / other (geomean over seeds, 95% CI; wins/losses = seeds better/worse):", "",
              "| other | " + " | ".join(f"@{b}" for b in budgets) + " |", "|" + " --- |" * (1 + len(budgets))]
    result: dict[str, Any] = {"seeds": a.seeds, "steps": a.steps, "data": a.data, "geomean": {}, "paired": {}}
    for label in curves:
        result["geomean"][label] = {b: float(np.exp(np.log(curves[label][:, b - 1]).mean())) for b in budgets}
        if label == ref:
            continue
        cells = []
        result["paired"][label] = {}
        for b in budgets:
            p = paired_ratio(curves[ref][:, b - 1], curves[label][:, b - 1])
            result["paired"][label][b] = p
            cells.append(f"{p['ratio']:.3f} [{p['lo']:.3f}, {p['hi']:.3f}] {p['wins']}/{p['losses']}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        out = Path(a.out)
        (out / "replay_ablation.json").write_text(json.dumps(result, indent=1) + "\n")
        (out / "replay_ablation.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

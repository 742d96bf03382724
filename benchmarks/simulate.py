#!/usr/bin/env python3
"""Bandit simulator: the search policies against a synthetic kernel pool, no GPU.

    python benchmarks/simulate.py --seeds 50 --steps 32 [--data FILE] [--out DIR]

Writes DIR/simulation.json, .md and .png (DIR = benchmarks/results; the plot needs
matplotlib and is skipped with a message without it).

The world. A session starts from one kernel of a class (memory-, compute- or
latency-bound; drawn per seed). Pulling (kernel k, strategy s) draws a speedup sample
x from the data for (class of k, s): ``null`` is a failed variant; otherwise the
child takes T_k / (1 + g) with g = x - 1, where an improvement (g > 0) is shrunk by
``decay ** uses`` (uses = times s was applied along k's lineage) and by the headroom
left on s's resource: (1 - sat) / (1 - sat of a fresh kernel of the class). A faster
child moves the same bytes and FLOPs in less time, so its saturations grow by 1 + g
(capped at 0.99). Correct children join the pool; a child switches to another class
with probability ``switch_prob``. ``offered(k)`` lists the strategies the class has
data for, applied fewer than ``max_uses`` times along k's lineage and pulled on k
fewer than ``max_tries`` times (so the search can run dry: policies then return None).
Each kernel gets a synthetic hardware profile phi, saturations and a runtime vector
consistent with its class, so clustering, masking and psi have something to see.

Regret. At each step, the pseudo-regret is the expected time saved,
E[max(0, 1 - T_child/T_parent)] (failures 0; the expectation of the v2 reward), of
the best (kernel, strategy) offered at that step minus that of the chosen one; the
curves are its running sum (non-decreasing by construction), averaged over seeds.
The best speedup so far (original time / fastest member) is reported alongside.

Data (``--data``): JSON with measured per-strategy speedup samples (T_parent/T_child;
``null`` = the variant failed), either per class or for all kernels:

    {"classes": {"memory-bound": {"vectorization": [1.12, null, 0.98, ...], ...}, ...}}
    {"strategies": {"tiling": [...], ...}}          (one class, "generic")

A results file of ``benchmarks/run.py`` (``{"runs": [...]}``) works too: each row's
``pulls`` (every generated candidate's T_parent/T_child) are grouped by the row's
``baseline_bottleneck`` and strategy.

Optional top-level keys override the world: max_uses, max_tries, decay, switch_prob.
Classes other than the three built-in ones get a middle-of-the-road profile. Without
``--data`` the built-in default is used: samples drawn (fixed seed) from plausible
lognormal speedups and failure rates per class and strategy; it is not measured data
and the outputs say so.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from common import ROOT

from kernelband.model import Variant  # noqa: E402
from kernelband.search import POLICY_NAMES, BanditConfig, Candidate, Outcome, make_policy, runtime_vector  # noqa: E402
from kernelband.strategies import STRATEGIES  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results"
WORLD_DEFAULTS = {"max_uses": 3, "max_tries": 2, "decay": 0.6, "switch_prob": 0.15}

# (median speedup of a correct variant, lognormal sigma, failure rate) per class and strategy
DEFAULT_PARAMS: dict[str, dict[str, tuple[float, float, float]]] = {
    "memory-bound": {
        "tiling": (1.04, 0.06, 0.15), "vectorization": (1.15, 0.08, 0.10), "fusion": (1.10, 0.10, 0.35),
        "pipeline": (1.00, 0.04, 0.10), "reordering": (1.03, 0.04, 0.10), "access_layout": (1.06, 0.05, 0.10),
    },
    "compute-bound": {
        "tiling": (1.20, 0.12, 0.20), "vectorization": (1.01, 0.03, 0.10), "fusion": (1.03, 0.05, 0.35),
        "pipeline": (1.12, 0.08, 0.15), "reordering": (1.08, 0.05, 0.10), "access_layout": (1.02, 0.03, 0.10),
    },
    "latency-bound": {
        "tiling": (1.12, 0.10, 0.15), "vectorization": (1.04, 0.04, 0.10), "fusion": (1.06, 0.08, 0.30),
        "pipeline": (1.08, 0.06, 0.15), "reordering": (1.01, 0.03, 0.10), "access_layout": (1.02, 0.03, 0.10),
    },
}

# What a fresh kernel of each class looks like to the profiler.
PROFILES: dict[str, dict[str, float]] = {
    "memory-bound": dict(L2=0.35, DRAM=0.55, SM=0.25, l2_hit=40, warp=90, occ=60, regs=32, bank=0, sectors=8,
                         tensor=0, footprint=1e8, ai=0.25, shared_kb=0, threads=128),
    "compute-bound": dict(L2=0.45, DRAM=0.30, SM=0.55, l2_hit=80, warp=95, occ=40, regs=128, bank=2, sectors=4,
                          tensor=40, footprint=1e7, ai=50, shared_kb=64, threads=256),
    "latency-bound": dict(L2=0.20, DRAM=0.20, SM=0.20, l2_hit=60, warp=70, occ=20, regs=64, bank=0.5, sectors=4,
                          tensor=0, footprint=1e6, ai=2, shared_kb=16, threads=64),
    "generic": dict(L2=0.35, DRAM=0.35, SM=0.35, l2_hit=60, warp=85, occ=40, regs=64, bank=0.5, sectors=6,
                    tensor=10, footprint=1e7, ai=4, shared_kb=16, threads=128),
}


def default_data(n: int = 64, seed: int = 12345) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    classes: dict[str, dict[str, list[Optional[float]]]] = {}
    for cls, strategies in DEFAULT_PARAMS.items():
        classes[cls] = {}
        for s, (median, sigma, fail) in strategies.items():
            xs = median * np.exp(sigma * rng.standard_normal(n))
            failed = rng.random(n) < fail
            classes[cls][s] = [None if f else round(float(x), 4) for x, f in zip(xs, failed)]
    return {"source": "built-in default (synthetic, not measured)", "classes": classes}


def classes_from_runs(runs: list[dict[str, Any]], path: str) -> dict[str, dict[str, list[Optional[float]]]]:
    """Measured samples from benchmarks/run.py rows: every generated candidate's T_parent/T_child
    (null = failed), grouped by the original kernel's bottleneck class and the strategy."""
    classes: dict[str, dict[str, list[Optional[float]]]] = {}
    for r in runs:
        cls = r.get("baseline_bottleneck") or "generic"
        if cls not in PROFILES:
            cls = "generic"  # launch-bound, unknown: no profile of their own here
        for p in r.get("pulls") or []:
            if p.get("strategy") in STRATEGIES:
                classes.setdefault(cls, {}).setdefault(p["strategy"], []).append(p.get("x"))
    if not classes:
        raise SystemExit(f"{path}: no run carries 'pulls' (rows from benchmarks/run.py record them)")
    return classes


def load_data(path: Optional[str]) -> dict[str, Any]:
    if path is None:
        return default_data()
    raw = json.loads(Path(path).read_text())
    if "runs" in raw:
        raw = {"classes": classes_from_runs(raw["runs"], path)}
    if "classes" in raw:
        classes = raw["classes"]
    elif "strategies" in raw:
        classes = {"generic": raw["strategies"]}
    else:
        raise SystemExit(f"{path}: expected a 'classes' or 'strategies' object")
    for cls, table in classes.items():
        for s, xs in table.items():
            if s not in STRATEGIES:
                raise SystemExit(f"{path}: unknown strategy {s!r} in class {cls!r}")
            if not xs or not all(x is None or (isinstance(x, (int, float)) and x > 0) for x in xs):
                raise SystemExit(f"{path}: {cls}/{s} needs a non-empty list of positive speedups or nulls")
    data = {k: raw[k] for k in WORLD_DEFAULTS if k in raw}
    data.update(source=str(path), classes=classes)
    return data


# --------------------------------------------------------------------------- world


@dataclass
class SimKernel:
    cand: Candidate
    cls: str
    sat: dict[str, float]
    hw: dict[str, float]  # profile values (PROFILES keys)
    uses: dict[str, int]
    pulls: dict[str, int] = field(default_factory=dict)
    g: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (strategy, sample): shrunk x - 1; -1 failed
    index: dict[str, int] = field(default_factory=dict)
    cache: dict[float, np.ndarray] = field(default_factory=dict)  # reference time -> gains()


class World:
    def __init__(self, data: dict[str, Any], seed: int, feature_set: str) -> None:
        self.params = {k: data.get(k, v) for k, v in WORLD_DEFAULTS.items()}
        self.samples = {
            cls: {s: np.array([np.nan if x is None else float(x) for x in xs]) for s, xs in table.items()}
            for cls, table in data["classes"].items()
        }
        self.feature_set = feature_set
        self.kernels: dict[str, SimKernel] = {}
        rng = np.random.default_rng([seed, 999_983])
        classes = sorted(self.samples)
        cls = classes[int(rng.integers(len(classes)))]
        hw = dict(PROFILES.get(cls, PROFILES["generic"]))
        hw["block_log2"] = float(rng.integers(8, 12))
        self.root = self._make(cls, 1.0, {r: hw[r] for r in ("L2", "DRAM", "SM")}, hw, {}, None)

    def _headroom(self, k: SimKernel, s: str) -> float:
        res = STRATEGIES[s].resource
        fresh = PROFILES.get(k.cls, PROFILES["generic"])[res]
        return min(max((1.0 - k.sat[res]) / max(1.0 - fresh, 1e-9), 0.0), 1.0)

    def _shrink(self, k: SimKernel, s: str) -> float:
        return self.params["decay"] ** k.uses.get(s, 0) * self._headroom(k, s)

    def _make(self, cls: str, t: float, sat: dict[str, float], hw: dict[str, float], uses: dict[str, int],
              parent: Optional[SimKernel]) -> SimKernel:
        kid = f"k{len(self.kernels)}"
        phi = [hw["l2_hit"], 100 * sat["DRAM"], 100 * sat["SM"], hw["warp"], hw["occ"], hw["regs"], hw["bank"],
               hw["sectors"], hw["tensor"]]
        values = dict(time_ms=t, footprint_bytes=hw["footprint"], arithmetic_intensity=hw["ai"],
                      block_elems=2 ** hw["block_log2"], occupancy=hw["occ"] / 100, registers=hw["regs"],
                      shared_kb=hw["shared_kb"], threads=hw["threads"])
        cand = Candidate(
            id=kid, variant=Variant(source=f"# simulated kernel {kid}\n", id=kid), time_ms=t, phi=phi,
            runtime_vector=runtime_vector(values, self.feature_set), saturation=dict(sat),
            parent_id=parent.cand.id if parent else None, depth=parent.cand.depth + 1 if parent else 0,
        )
        k = SimKernel(cand, cls, dict(sat), hw, dict(uses))
        table = self.samples[cls]
        k.g = np.full((len(table), max(len(xs) for xs in table.values())), np.nan)  # NaN = padding
        for i, (s, xs) in enumerate(table.items()):
            g = np.where(np.isnan(xs), -1.0, xs - 1.0)  # a failure saves nothing, as an infinitely slow child
            k.g[i, : len(xs)] = np.where(g > 0, g * self._shrink(k, s), g)
            k.index[s] = i
        self.kernels[kid] = k
        return k

    def gains(self, cand: Candidate, ref_ms: float) -> np.ndarray:
        """Expected time saved per strategy, relative to a kernel of ``ref_ms``: E[max(0, 1 - T_child/ref)], failures 0."""
        k = self.kernels[cand.id]
        if ref_ms not in k.cache:
            with np.errstate(divide="ignore"):
                saved = np.maximum(0.0, 1.0 - (cand.time_ms / ref_ms) / (1.0 + k.g))
            k.cache[ref_ms] = np.nanmean(saved, axis=1)
        return k.cache[ref_ms]

    def gain(self, cand: Candidate, s: str, ref_ms: float) -> float:
        return float(self.gains(cand, ref_ms)[self.kernels[cand.id].index[s]])

    def offered(self, cand: Candidate) -> list[str]:
        k = self.kernels[cand.id]
        p = self.params
        return [s for s in self.samples[k.cls]
                if k.uses.get(s, 0) < p["max_uses"] and k.pulls.get(s, 0) < p["max_tries"]]

    def pull(self, cand: Candidate, s: str, rng: np.random.Generator) -> tuple[Outcome, Optional[SimKernel]]:
        k = self.kernels[cand.id]
        k.pulls[s] = k.pulls.get(s, 0) + 1
        xs = self.samples[k.cls][s]
        x = xs[int(rng.integers(len(xs)))]
        if not math.isfinite(x):
            return Outcome(False, cand.time_ms, None), None
        g = x - 1.0
        if g > 0:
            g *= self._shrink(k, s)
        t = cand.time_ms / (1.0 + g)
        sat = {r: min(0.99, v * (1.0 + g)) for r, v in k.sat.items()}
        hw = dict(k.hw)
        if g > 0 and s == "vectorization":
            hw["sectors"] = max(4.0, hw["sectors"] / 2)
        if g > 0 and s == "reordering":
            hw["l2_hit"] = min(95.0, hw["l2_hit"] + 10)
        if s == "tiling":
            hw["block_log2"] = float(np.clip(hw["block_log2"] + rng.choice([-1.0, 1.0]), 6, 14))
        cls = k.cls
        others = [c for c in sorted(self.samples) if c != cls]
        if others and rng.random() < self.params["switch_prob"]:
            cls = others[int(rng.integers(len(others)))]
            fresh = PROFILES.get(cls, PROFILES["generic"])
            hw.update({key: v for key, v in fresh.items() if key not in ("L2", "DRAM", "SM")})
            sat = {r: fresh[r] for r in sat}
        uses = dict(k.uses)
        uses[s] = uses.get(s, 0) + 1
        child = self._make(cls, t, sat, hw, uses, k)
        return Outcome(True, cand.time_ms, t), child


# --------------------------------------------------------------------------- runs


def run_one(policy_name: str, seed: int, steps: int, data: dict[str, Any]) -> dict[str, list[float]]:
    policy = make_policy(policy_name, BanditConfig())
    cfg = getattr(policy, "config", BanditConfig().resolved())
    world = World(data, seed, cfg.feature_set or "v1")
    pool = [world.root.cand]
    rng = random.Random(seed)
    curves: dict[str, list[float]] = {"regret": [], "parent_regret": [], "speedup": []}
    cum = {"regret": 0.0, "parent_regret": 0.0}
    for step in range(steps):
        sel = policy.select(pool, world.offered, rng)
        if sel is not None:
            cand, s = sel
            if not any(c is cand for c in pool) or s not in world.offered(cand):
                raise AssertionError(f"{policy_name} chose {s} for {cand.id}, which is not offered")
            arms = [(c, x) for c in pool for x in world.offered(c)]
            best_ms = min(c.time_ms for c in pool)
            # regret: improvement of the best kernel; parent_regret: improvement of the modified kernel
            for key in cum:
                ref = {c.id: best_ms if key == "regret" else c.time_ms for c in pool}
                best = max(world.gain(c, x, ref[c.id]) for c, x in arms)
                cum[key] += max(0.0, best - world.gain(cand, s, ref[cand.id]))
            outcome, child = world.pull(cand, s, np.random.default_rng([seed, step]))
            policy.update(cand, s, outcome, child.cand if child else None)
            if child is not None:
                pool.append(child.cand)
        for key, v in cum.items():
            curves[key].append(v)
        curves["speedup"].append(world.root.cand.time_ms / min(c.time_ms for c in pool))
    return curves


REGRETS = {
    "regret": "cumulative pseudo-regret: expected time saved on the best kernel so far, "
    "E[max(0, 1 - T_child/T_best)], by the best offered arm minus by the chosen one",
    "parent_regret": "the same with time saved on the modified kernel, E[max(0, 1 - T_child/T_parent)] "
    "(the expectation of the v2 reward: the bandit's own objective)",
}


def _stats(a: np.ndarray, seeds: int) -> dict[str, Any]:
    final = a[:, -1]
    return {
        "mean": [round(float(v), 6) for v in a.mean(axis=0)],
        "std": [round(float(v), 6) for v in a.std(axis=0)],
        "final": {
            "mean": round(float(final.mean()), 6),
            "std": round(float(final.std()), 6),
            "ci95": round(float(1.96 * final.std(ddof=1) / math.sqrt(seeds)) if seeds > 1 else 0.0, 6),
        },
    }


def simulate(seeds: int, steps: int, data: dict[str, Any], policies: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "generated_by": "benchmarks/simulate.py",
        "seeds": seeds,
        "steps": steps,
        "data": {"source": data["source"], "classes": sorted(data["classes"])},
        "world": {k: data.get(k, v) for k, v in WORLD_DEFAULTS.items()},
        "metrics": dict(REGRETS, speedup="original time / fastest pool member, geometric mean over seeds"),
        "policies": {},
    }
    for name in policies:
        t0 = time.perf_counter()
        runs = [run_one(name, seed, steps, data) for seed in range(seeds)]
        spd = np.array([r["speedup"] for r in runs])
        out["policies"][name] = {
            **{key: _stats(np.array([r[key] for r in runs]), seeds) for key in REGRETS},
            "speedup_geomean": [round(float(v), 6) for v in np.exp(np.log(spd).mean(axis=0))],
            "seconds": round(time.perf_counter() - t0, 3),
        }
    return out


def markdown(res: dict[str, Any]) -> str:
    steps = res["steps"]
    marks = sorted({m for m in (steps // 4, steps // 2, steps) if m >= 1})
    cmd = f"python benchmarks/simulate.py --seeds {res['seeds']} --steps {steps}"
    if not res["data"]["source"].startswith("built-in"):
        cmd += f" --data {res['data']['source']}"
    lines = [
        "# Bandit simulation",
        "",
        f"`{cmd}`",
        "",
        f"Data: {res['data']['source']}; classes: {', '.join(res['data']['classes'])}. "
        f"World: {', '.join(f'{k}={v}' for k, v in res['world'].items())}. Mean over {res['seeds']} seeds; "
        "lower regret is better.",
        "",
        *(f"- {k}: {v}" for k, v in res["metrics"].items()),
        "",
        f"| policy | regret @{steps} (± 95% CI) | parent regret @{steps} | "
        + " | ".join(f"best speedup @{m}" for m in marks) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in marks) + " |",
    ]
    ranked = sorted(res["policies"].items(), key=lambda kv: kv[1]["regret"]["final"]["mean"])
    for name, p in ranked:
        fr, pr = p["regret"]["final"], p["parent_regret"]["final"]
        cells = " | ".join(f"{p['speedup_geomean'][m - 1]:.3f}x" for m in marks)
        lines.append(f"| {name} | {fr['mean']:.3f} ± {fr['ci95']:.3f} | {pr['mean']:.3f} ± {pr['ci95']:.3f} | {cells} |")
    return "\n".join(lines) + "\n"


def plot(res: dict[str, Any], path: Path) -> Optional[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: skipped the plot (pip install matplotlib)"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(1, res["steps"] + 1)
    for name, p in res["policies"].items():
        m = np.array(p["regret"]["mean"])
        se = np.array(p["regret"]["std"]) / math.sqrt(res["seeds"])
        (line,) = ax1.plot(x, m, label=name)
        ax1.fill_between(x, m - se, m + se, color=line.get_color(), alpha=0.2)
        ax2.plot(x, p["speedup_geomean"], label=name)
    ax1.set(xlabel="step", ylabel="cumulative pseudo-regret", title="Regret on the best kernel (mean ± s.e.)")
    ax2.set(xlabel="step", ylabel="best speedup (geomean)", title="Best kernel so far")
    ax1.legend()
    fig.suptitle(f"{res['seeds']} seeds; data: {res['data']['source']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--data", help="JSON of measured speedup samples (see the module docstring)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default benchmarks/results)")
    ap.add_argument("--policies", default=",".join(POLICY_NAMES), help="comma-separated policy names")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.steps < 1:
        ap.error("--seeds and --steps must be >= 1")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    res = simulate(args.seeds, args.steps, load_data(args.data), policies)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "simulation.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "simulation.md").write_text(markdown(res))
    print(markdown(res))
    if not args.no_plot:
        msg = plot(res, out / "simulation.png")
        print(msg or f"wrote {out / 'simulation.png'}", file=sys.stderr if msg else sys.stdout)
    print(f"wrote {out / 'simulation.json'} and {out / 'simulation.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

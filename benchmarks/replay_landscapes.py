#!/usr/bin/env python3
"""Replay the search policies, with the real rules generator, against measured landscapes.

    python benchmarks/replay_landscapes.py --tables DIR [--seeds 30] [--budgets 8,16,32]
        [--policies kernelband,kernelband-v1,kernelband-v2,ucb1,greedy,random] [--out DIR] [--jobs 2]

DIR holds ``landscape_measure.py``'s per-kernel JSON. Every (kernel, policy, seed) runs
the session's loop on the CPU: the policy selects (parent, strategy) from the pool, the
product's ``RulesGenerator`` (seeded like a session) proposes the config, and the
evaluation is a lookup of that config's measured time (by AST hash, else by typed key:
see ``landscape_configs.py``). A measured config that failed its check is a failed
pull. A proposal that was **not measured** is skipped and refunded: it costs no
evaluation and the policy is not told (the generator has marked it used, so it is as if
the space lacked it); how often that happens is reported per policy (``miss rate``),
and the most frequent missed recipes are listed in replay.json's ``missing`` (feed them
to ``landscape_measure.py --extra replay.json`` and replay again to close the gap).
Refunds are optimistic: a proposal a real session would pay for (often a repeat of a
step on a near-identical member) is free. ``--unmeasured charge`` gives the pessimistic
bound: each unmeasured proposal costs one evaluation (the table's median config cost)
and is told to the policy as a pull that found nothing (no child, reward 0 in every
policy's reward mode).

Outputs (``--out``, default benchmarks/results/landscapes): ``replay.json``,
``replay.md`` and ``speedup_vs_budget.png``:
- geomean best speedup (over kernels and seeds) per policy and budget, at equal
  evaluations and at equal GPU-seconds (each config costs its measured compile + check
  + timing seconds; the GPU-seconds budget of a kernel is N times its median config
  cost, so N = 8, 16, 32 is comparable with N evaluations; runs stop at 1.5 N_max
  evaluations);
- paired 95% t-intervals over seeds of the ratio kernelband / other (per seed: the
  geomean over kernels of each policy; the pair shares the seed);
- the fraction of the best known config (the landscape's best) reached at the largest
  budget;
- which rewrite won on which kernel, and the kernels where launch tuning alone finds
  under 1.03x but a code rewrite finds more.

A replay has no profiles: candidates carry [log time] as their runtime vector and no
saturation or phi (as a session without a profile), so the hardware term and v1/v2's
clusters see less than in a real session.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Optional

import numpy as np

from common import ROOT, geomean, paired_ratio, t975
from landscape_configs import KNOB_FAMILIES, Analyses, families, force_block_pointers

from kernelband.generators.base import GenContext
from kernelband.generators.rules import RulesGenerator
from kernelband.model import Variant
from kernelband.screen import screen_variant
from kernelband.search import BanditConfig, Candidate, Outcome, make_policy

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "landscapes"
POLICIES = ("kernelband", "kernelband-v1", "kernelband-v2", "ucb1", "greedy", "random")


def policy_spec(spec: str) -> tuple[str, BanditConfig]:
    """``name`` or ``name+field=value+...``: a registered policy with BanditConfig fields
    overridden (an ablation, e.g. ``kernelband+prior_strength=8+kb_patience=1``).
    Raises ValueError on an unknown policy, field or a value of the wrong type."""
    from dataclasses import fields, replace

    from kernelband.search import POLICY_NAMES

    name, *overrides = spec.split("+")
    if name not in POLICY_NAMES:
        raise ValueError(f"unknown policy {name!r}")
    types = {f.name: f.type for f in fields(BanditConfig)}
    changes: dict[str, Any] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or key not in types:
            raise ValueError(f"{spec!r}: {item!r} is not field=value of BanditConfig")
        kind = str(types[key])
        cast: Any = {"int": int, "float": float, "bool": lambda v: v.lower() in ("1", "true", "yes")}.get(kind, str)
        try:
            changes[key] = cast(value)
        except ValueError:
            raise ValueError(f"{spec!r}: {key} needs a {kind}, not {value!r}") from None
    return name, replace(BanditConfig(), **changes)
BASELINES = ("ucb1", "greedy", "random")
MIN_SPEEDUP = 1.03  # the product's noise floor (kernelband.verdict.DEFAULT_MIN_SPEEDUP)
MISS_LIMIT = 300  # unmeasured proposals skipped in one run before it gives up (its table is exhausted)


# --------------------------------------------------------------------------- tables


class Table:
    """One kernel's measured landscape, indexed for lookups."""

    def __init__(self, d: dict[str, Any]) -> None:
        self.d = d
        self.module, self.kernel, self.harness = d["module"], d["kernel"], d["harness"]
        self.meta = d["meta"]
        self.rows = d["configs"]
        self.original = self.rows[0]
        assert not self.original["recipe"], f"{self.module}: the first config must be the original"
        self.by_ast = {r["ast_key"]: r for r in self.rows}
        self.by_typed = {r["typed_key"]: r for r in self.rows}
        self.ac = Analyses(self.kernel, families(bool(self.meta.get("autotune"))))
        costs = [cost(r) for r in self.rows]
        self.median_cost = statistics.median(costs) if costs else 1.0
        ok = [r["ms"] for r in self.rows if r["correct"] and r["ms"]]
        self.best_known = self.original["ms"] / min(ok)
        # --unmeasured estimate: the measured effect of each rewrite key applied to the original
        self.single = {r["recipe"][0]: r for r in self.rows if len(r["recipe"]) == 1}

    def source(self) -> str:
        from benchmarks.suite import entry

        return entry(self.module).path.read_text(encoding="utf-8")

    def lookup(self, source: str, knobs: dict[str, int], code: list[str]) -> Optional[dict[str, Any]]:
        r = self.by_typed.get(self.ac.typed_key(knobs, code))
        return r if r is not None else self.by_ast.get(self.ac.ast_key(source))


def cost(r: dict[str, Any]) -> float:
    return float((r.get("compile_s") or 0) + (r.get("check_s") or 0) + (r.get("time_s") or 0))


def first_pulls(replay: dict[str, Any], kernel: str, policy: str) -> list[list[str]]:
    """Each replayed run's first proposals (descriptions) for ``kernel`` and ``policy``;
    replay.json files written before the descriptions were stored once hold the strings."""
    runs = ((replay.get("first_pulls") or {}).get(kernel) or {}).get(policy) or []
    names = (replay.get("pull_descriptions") or {}).get(kernel)
    return [[names[i] for i in run] if names is not None else run for run in runs]


def load_tables(folder: Path, kernels: Optional[list[str]] = None) -> list[dict[str, Any]]:
    out = []
    for p in sorted(folder.glob("*.json")):
        d = json.loads(p.read_text())
        if "configs" not in d or (kernels and d["module"] not in kernels):
            continue
        if not d["configs"] or not d["configs"][0].get("correct") or not d["configs"][0].get("ms"):
            print(f"{d.get('module', p.name)}: the original has no measured time; skipped", file=sys.stderr)
            continue
        out.append(d)
    return out


# --------------------------------------------------------------------------- one run


_SCREENED: dict[tuple[int, int, str, Optional[str]], Optional[str]] = {}


def memoized_screen(original: str, variant: str, kernel: str, harness: Optional[str] = None) -> Optional[str]:
    """The generator screens every proposal (a pure function of its inputs); replays make
    the same proposals again and again, so this process remembers the answers."""
    key = (hash(original), hash(variant), kernel, harness)
    if key not in _SCREENED:
        _SCREENED[key] = screen_variant(original, variant, kernel, harness)
    return _SCREENED[key]


def run_one(t: Table, policy_name: str, seed: int, max_evals: int, source: str,
            counted: Optional[int] = None, unmeasured: str = "refund", model: Any = None) -> dict[str, Any]:
    """One replayed session: the trajectory of (evaluations, GPU-seconds, best speedup).
    Misses are counted for the miss rate while fewer than ``counted`` (default max_evals)
    evaluations are spent: beyond the largest budget they do not matter. With
    ``unmeasured="estimate"`` an unmeasured non-knob proposal (code rewrite, hint, cache
    modifier) whose rewrite key was measured as a single step from the original takes that step's measured ratio (and correctness and
    cost) applied to its parent's time: a factorised estimate, counted as ``estimated``."""
    counted = max_evals if counted is None else counted
    if model is not None and model is not t.ac.model:  # the held-out cost model (--costmodel loko)
        t.ac.use_model(model)
    # one cache of analyses for the generator and the table's lookups: the same families and model
    gen = RulesGenerator(seed=seed, autotune=bool(t.meta.get("autotune")), ranking_model=t.ac.model,
                         analyses=t.ac.cache, screen=memoized_screen)
    policy = make_policy(*policy_spec(policy_name))
    rng = random.Random(seed)
    orig = Variant(source)
    t0 = float(t.original["ms"])
    root = Candidate(orig.id, orig, t0, runtime_vector=[math.log(t0)])
    pool, code_of, knobs_of = [root], {root.id: []}, {root.id: t.ac.knobs_of(source)}
    recipe_of: dict[str, list[str]] = {root.id: []}
    missed: list[list[str]] = []  # recipes of unmeasured proposals made within the evaluation budget
    best, spent, evals, misses, idle, counted_misses, estimated = t0, 0.0, 0, 0, 0, 0, 0
    traj: list[tuple[int, float, float]] = []
    pulls: list[dict[str, Any]] = []
    ctx = GenContext(kernel=t.kernel, harness=t.harness, module_path="")

    def offered(c: Candidate) -> list[str]:
        return gen.offered(c.variant, t.kernel)

    while evals < max_evals:
        pick = policy.select(pool, offered, rng)
        if pick is None:
            break
        parent, strategy = pick
        g = gen.generate(parent.variant, strategy, ctx)
        if g.variant is None or gen.last_rewrite is None:
            idle += 1
            if idle > 50:
                break
            continue
        idle = 0
        family, key = gen.last_rewrite
        code = code_of[parent.id] + ([key] if family not in KNOB_FAMILIES else [])
        an = t.ac.analysis(parent.variant.source)
        rw = an.rewrite(key) if an is not None else None
        assert rw is not None, f"the generator proposed {key!r}, which its analysis does not list"
        knobs = t.ac.child_knobs(parent.variant.source, knobs_of[parent.id], rw)
        row = t.lookup(g.variant.source, knobs, code)
        est_ms = None
        # knob moves are not estimated: their key names the target value, so the original's
        # ratio for it would count the moves before it twice (measured: 5x the best known)
        if row is None and unmeasured == "estimate" and family not in KNOB_FAMILIES and key in t.single:
            row = t.single[key]
            if row["correct"] and row["ms"]:
                est_ms = parent.time_ms * float(row["ms"]) / t0
            estimated += 1
        if row is None:  # not measured: skipped and refunded, or (charge) a pull that found nothing
            misses += 1
            if evals < counted:
                counted_misses += 1
                if len(missed) < 64:
                    missed.append(recipe_of[parent.id] + [key])
            if unmeasured == "charge":
                evals += 1
                spent += t.median_cost
                # told as a success without a time: reward 0 in every mode (a failure would
                # cost the v1-reward baselines -1 and kernelband 0: a bias, not a bound)
                policy.update(parent, strategy, Outcome(True, parent.time_ms, None), None)
                traj.append((evals, spent, t0 / best))
                pulls.append({"strategy": strategy, "family": family, "key": key, "ok": False,
                              "description": g.variant.description, "estimated": False, "charged": True})
                continue
            if misses > MISS_LIMIT:
                break
            continue
        evals += 1
        spent += cost(row)
        ok = bool(row["correct"] and row["ms"])
        child = None
        if ok:
            ms = est_ms if est_ms is not None else float(row["ms"])
            child = Candidate(g.variant.id, g.variant, ms, runtime_vector=[math.log(ms)], parent_id=parent.id,
                              depth=parent.depth + 1)
            pool.append(child)
            code_of[child.id] = code
            knobs_of[child.id] = knobs
            recipe_of[child.id] = recipe_of[parent.id] + [key]
            best = min(best, ms)
        policy.update(parent, strategy, Outcome(ok, parent.time_ms, child.time_ms if child else None), child)
        traj.append((evals, spent, t0 / best))
        pulls.append({"strategy": strategy, "family": family, "key": key, "ok": ok, "description": g.variant.description,
                      "estimated": row is t.single.get(key) and est_ms is not None})
    return {"traj": traj, "misses": misses, "evals": evals, "pulls": pulls, "missed": missed,
            "counted_misses": counted_misses, "counted_evals": min(evals, counted), "estimated": estimated}


def _best_within(traj: list[tuple[int, float, float]], column: int, limit: float) -> float:
    """The best speedup of a trajectory (evaluations, GPU-seconds, best speedup) while
    its ``column`` (0: evaluations, 1: GPU-seconds) is within ``limit``; 1.0 before any."""
    out = 1.0
    for point in traj:
        if point[column] > limit:
            break
        out = point[2]
    return out


def at_evals(traj: list[tuple[int, float, float]], n: int) -> float:
    return _best_within(traj, 0, n)


def at_seconds(traj: list[tuple[int, float, float]], seconds: float) -> float:
    return _best_within(traj, 1, seconds)


def held_out_model(module: str, tables: Path) -> Any:
    """The proposal cost model fitted without ``module``'s measurements (leave one kernel
    out), so a replay never ranks a kernel's proposals with what was learned on it."""
    import landscape_costmodel as lc

    return lc.fit([x for x in lc.load_landscapes() + lc.load_tables(tables) if x["kernel"] != module])


def kernel_job(args: tuple[dict[str, Any], list[str], list[int], int, int, bool, str, Optional[Path]]) -> dict[str, Any]:
    d, policies, seeds, max_evals, counted, block_ptr, unmeasured, loko_tables = args
    force_block_pointers(block_ptr)
    t = Table(d)
    model = held_out_model(t.module, loko_tables) if loko_tables is not None else None
    if model is not None:
        t.ac.use_model(model)
    src = t.source()
    out: dict[str, Any] = {"module": t.module, "best_known": t.best_known, "median_cost": t.median_cost, "runs": {}}
    for p in policies:
        out["runs"][p] = [run_one(t, p, s, max_evals, src, counted, unmeasured, model) for s in seeds]
    return out


# --------------------------------------------------------------------------- tables of rewrites


def rewrite_tables(tables: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per kernel: the best launch-only config, the best config with a non-knob rewrite and
    which rewrite that was; and the kernels where launch tuning stays under MIN_SPEEDUP
    while a rewrite finds more."""
    won, only = [], []
    for d in tables:
        o = d["configs"][0]["ms"]
        ok = [r for r in d["configs"] if r["correct"] and r["ms"]]
        launch = [r for r in ok if set(r["families"]) <= KNOB_FAMILIES]
        code = [r for r in ok if r["code"]]
        bl = min(launch, key=lambda r: r["ms"])
        bc = min(code, key=lambda r: r["ms"]) if code else None
        row = {"module": d["module"], "launch_speedup": o / bl["ms"], "launch_best": bl["description"] or "original",
               "rewrite_speedup": o / bc["ms"] if bc else None, "rewrite": ", ".join(bc["code"]) if bc else None,
               "rewrite_config": bc["description"] if bc else None,
               "winner": "rewrite" if bc and bc["ms"] < bl["ms"] else "launch"}
        won.append(row)
        if row["launch_speedup"] < MIN_SPEEDUP and bc and row["rewrite_speedup"] > row["launch_speedup"]:
            only.append(row)
    return won, only


# --------------------------------------------------------------------------- report


def report(results: list[dict[str, Any]], tables: list[dict[str, Any]], policies: list[str], seeds: list[int],
           budgets: list[int]) -> tuple[dict[str, Any], str]:
    ref = policies[0]
    K, S = len(results), len(seeds)
    # speed[p][mode][b]: array (seeds, kernels)
    speed: dict[str, dict[str, dict[int, np.ndarray]]] = {}
    curve: dict[str, np.ndarray] = {}
    top = max(budgets)
    for p in policies:
        speed[p] = {"evals": {}, "seconds": {}}
        for b in budgets:
            speed[p]["evals"][b] = np.array([[at_evals(r["runs"][p][i]["traj"], b) for r in results] for i in range(S)])
            speed[p]["seconds"][b] = np.array([[at_seconds(r["runs"][p][i]["traj"], b * r["median_cost"]) for r in results]
                                               for i in range(S)])
        curve[p] = np.array([[geomean([at_evals(r["runs"][p][i]["traj"], n) for r in results]) for n in range(1, top + 1)]
                             for i in range(S)])
    best_known = np.array([r["best_known"] for r in results])
    out: dict[str, Any] = {"kernels": [r["module"] for r in results], "seeds": seeds, "budgets": budgets,
                           "policies": policies, "geomean": {}, "paired": {}, "best_known_fraction": {},
                           "miss_rate": {}, "measured_on": tables[0]["meta"] if tables else {}}
    for p in policies:
        out["geomean"][p] = {mode: {b: geomean(speed[p][mode][b].ravel()) for b in budgets} for mode in ("evals", "seconds")}
        out["best_known_fraction"][p] = float(np.mean(speed[p]["evals"][top] / best_known[None, :]))
        ev = sum(run["counted_evals"] for r in results for run in r["runs"][p])
        miss = sum(run["counted_misses"] for r in results for run in r["runs"][p])
        out["miss_rate"][p] = miss / max(1, ev + miss)
        runs = [run for r in results for run in r["runs"][p]]
        out.setdefault("short_runs", {})[p] = sum(1 for run in runs if run["evals"] < top) / max(1, len(runs))
        out.setdefault("estimated_rate", {})[p] = sum(run["estimated"] for run in runs) / max(1, sum(run["evals"] for run in runs))
    for p in policies[1:]:
        out["paired"][p] = {}
        for mode in ("evals", "seconds"):
            out["paired"][p][mode] = {}
            for b in budgets:
                a = np.array([geomean(x) for x in speed[ref][mode][b]])
                c = np.array([geomean(x) for x in speed[p][mode][b]])
                out["paired"][p][mode][b] = paired_ratio(a, c)
    base = [p for p in policies if p in BASELINES]
    out["best_baseline"] = {mode: {b: max(base, key=lambda p: out["geomean"][p][mode][b]) for b in budgets}
                            for mode in ("evals", "seconds")} if base else {}
    per_kernel = {r["module"]: {p: geomean([at_evals(run["traj"], top) for run in r["runs"][p]]) for p in policies}
                  for r in results}
    out["per_kernel_at_max_budget"] = per_kernel
    # every run's best speedup at each budget (equal evaluations), for replay_confirm.py
    out["per_run"] = {r["module"]: {p: {b: [at_evals(run["traj"], b) for run in r["runs"][p]] for b in budgets}
                                    for p in policies} for r in results}
    # each run's first proposals, for replay_confirm.py: a kernel's descriptions are stored once
    # and runs hold indices into them (as strings they were 4.6 MB of a 5.3 MB replay.json)
    out["pull_descriptions"], out["first_pulls"] = {}, {}
    for r in results:
        index: dict[str, int] = {}
        out["first_pulls"][r["module"]] = {
            p: [[index.setdefault(pl["description"], len(index)) for pl in run["pulls"][:top]] for run in r["runs"][p]]
            for p in policies}
        out["pull_descriptions"][r["module"]] = list(index)
    won, only = rewrite_tables(tables)
    out["rewrite_winners"], out["rewrite_only"] = won, only
    # the unmeasured proposals made within the largest budget, most frequent first: the
    # input of ``landscape_measure.py --extra`` (measure them, replay again)
    out["missing"] = {}
    for r in results:
        c = Counter(json.dumps(m) for p in policies for run in r["runs"][p] for m in run["missed"])
        out["missing"][r["module"]] = [{"recipe": json.loads(k), "count": n} for k, n in c.most_common(40)]
    wins = Counter(pl["family"] for r in results for run in r["runs"][ref] for pl in run["pulls"] if pl["ok"])
    out["families_pulled_by_" + ref] = dict(wins)
    out["curve"] = {p: {"mean": [geomean(curve[p][:, n]) for n in range(top)],
                        "lo": [], "hi": []} for p in policies}
    for p in policies:
        for n in range(top):
            logs = np.log(curve[p][:, n])
            half = t975(S) * logs.std(ddof=1) / math.sqrt(S) if S > 1 else 0.0
            out["curve"][p]["lo"].append(float(np.exp(logs.mean() - half)))
            out["curve"][p]["hi"].append(float(np.exp(logs.mean() + half)))

    f3 = lambda v: f"{v:.3f}" if v is not None else "-"  # noqa: E731
    meta = out["measured_on"]
    L = [f"Replay of {len(policies)} policies with the rules generator over {K} measured landscapes "
         f"({meta.get('gpu', '?')}, Triton {meta.get('triton', '?')}), {S} seeds, budgets {budgets}. "
         "Proposals are ranked by the cost model fitted without the replayed kernel (`--costmodel loko`) unless "
         "replay.json's `costmodel` says `shipped`. Tables measured with `landscape_measure.py`: one process timing "
         "one config at a time, nothing else on the GPU (one session per GPU).", ""]
    for mode, title in (("evals", "equal evaluations"), ("seconds", "equal GPU-seconds (N x the kernel's median config cost)")):
        L += [f"Geomean best speedup over kernels and seeds, {title}:", "",
              "| policy | " + " | ".join(f"N={b}" for b in budgets) + " |", "|" + " --- |" * (1 + len(budgets))]
        for p in policies:
            L.append(f"| {p} | " + " | ".join(f3(out["geomean"][p][mode][b]) for b in budgets) + " |")
        L += ["", f"Paired ratio {ref} / other, {title} (geomean over seeds of the per-seed geomean over kernels; "
              "95% t-interval; wins/losses = seeds):", "",
              "| other | " + " | ".join(f"N={b}" for b in budgets) + " |", "|" + " --- |" * (1 + len(budgets))]
        for p in policies[1:]:
            cells = [f"{c['ratio']:.3f} [{c['lo']:.3f}, {c['hi']:.3f}] {c['wins']}/{c['losses']}"
                     for c in (out["paired"][p][mode][b] for b in budgets)]
            L.append(f"| {p} | " + " | ".join(cells) + " |")
        L.append("")
    L += [f"Fraction of the best known (the landscape's best config) reached at N={top}, mean over kernels and seeds; "
          "miss rate = proposals not in the measured tables (skipped and refunded) / all proposals, "
          f"counted until N={top} evaluations:", "",
          f"short runs = runs that ended before N={top} (space or table exhausted, or {MISS_LIMIT} misses):", "",
          "estimated = evaluations that took a single step's measured ratio (--unmeasured estimate):", "",
          "| policy | best-known fraction | miss rate | short runs | estimated |", "| --- | --- | --- | --- | --- |"]
    for p in policies:
        L.append(f"| {p} | {out['best_known_fraction'][p]:.3f} | {out['miss_rate'][p]:.1%} | {out['short_runs'][p]:.1%} | "
                 f"{out['estimated_rate'][p]:.1%} |")
    L += ["", f"Per kernel at N={top} (geomean over seeds), and the landscape's best:", "",
          "| kernel | best known | " + " | ".join(policies) + " |", "|" + " --- |" * (2 + len(policies))]
    for r in results:
        L.append(f"| {r['module']} | {r['best_known']:.3f} | " + " | ".join(f3(per_kernel[r['module']][p]) for p in policies) + " |")
    L += ["", "Which rewrite won on which kernel (measured landscapes; launch = knob moves only):", "",
          "| kernel | best launch-only | its config | best with a rewrite | rewrite(s) | winner |",
          "| --- | --- | --- | --- | --- | --- |"]
    for w in won:
        L.append(f"| {w['module']} | {w['launch_speedup']:.3f} | {w['launch_best'][:60]} | {f3(w['rewrite_speedup'])} | "
                 f"{w['rewrite'] or '-'} | {w['winner']} |")
    L += ["", f"Kernels where launch tuning alone finds < {MIN_SPEEDUP}x but a rewrite finds more:", ""]
    L += [f"- {w['module']}: launch {w['launch_speedup']:.3f}x, {w['rewrite']} {w['rewrite_speedup']:.3f}x" for w in only] or ["- none"]
    return out, "\n".join(L) + "\n"


def plot(out: dict[str, Any], path: Path) -> Optional[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for p, c in out["curve"].items():
        xs = list(range(1, len(c["mean"]) + 1))
        ax.plot(xs, c["mean"], label=p)
        ax.fill_between(xs, c["lo"], c["hi"], alpha=0.15)
    ax.set_xlabel("evaluations")
    ax.set_ylabel("geomean best speedup (95% CI over seeds)")
    ax.set_title(f"Replay over {len(out['kernels'])} measured landscapes, {len(out['seeds'])} seeds")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=Path, required=True, help="landscape_measure.py's output folder")
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--budgets", default="8,16,32")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help="the first is the reference of the paired ratios; name+field=value overrides a BanditConfig field")
    ap.add_argument("--kernels", default="")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--jobs", type=int, default=1, help="kernels replayed in parallel processes")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--costmodel", choices=("loko", "shipped"), default="loko",
                    help="rank proposals with a cost model fitted without the replayed kernel (loko), or the shipped one")
    ap.add_argument("--unmeasured", choices=("refund", "estimate", "charge"), default="refund",
                    help="an unmeasured proposal is skipped and refunded (optimistic: a wasted proposal costs "
                         "nothing), estimated from its step's measured ratio, or charged as an evaluation that "
                         "found nothing (pessimistic: it might have been a gain)")
    a = ap.parse_args(argv)
    try:
        budgets = sorted({int(b) for b in a.budgets.split(",") if b})
    except ValueError:
        ap.error(f"--budgets must be integers, not {a.budgets!r}")
    policies = [p for p in a.policies.split(",") if p]
    bad = []
    for p in policies:
        try:
            policy_spec(p)
        except ValueError as e:
            bad.append(str(e))
    if bad or not budgets or a.seeds < 2:
        ap.error(f"unknown policies: {'; '.join(bad)}" if bad else "need budgets and at least 2 seeds")
    tables = load_tables(a.tables, [k for k in a.kernels.split(",") if k] or None)
    if not tables:
        ap.error(f"no measured tables in {a.tables}")
    block_ptr = bool(tables[0]["meta"].get("block_ptr"))
    # room for the equal-GPU-seconds comparison (a policy of cheap configs gets more pulls), truncated at 1.5x
    max_evals = (max(budgets) * 3 + 1) // 2
    seeds = list(range(a.seeds))
    loko = a.tables if a.costmodel == "loko" else None
    jobs = [(d, policies, seeds, max_evals, max(budgets), block_ptr, a.unmeasured, loko) for d in tables]
    t0 = time.perf_counter()
    if a.jobs > 1:
        with ProcessPoolExecutor(a.jobs) as ex:
            results = list(ex.map(kernel_job, jobs))
    else:
        results = [kernel_job(j) for j in jobs]
    out, md = report(results, tables, policies, seeds, budgets)
    out["replay_seconds"] = time.perf_counter() - t0
    out["unmeasured"] = a.unmeasured
    out["costmodel"] = a.costmodel
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "replay.json").write_text(json.dumps(out, indent=1) + "\n")
    (a.out / "replay.md").write_text(md)
    if not a.no_plot:
        plot(out, a.out / "speedup_vs_budget.png")
    print(md)
    print(f"replay took {out['replay_seconds']:.0f}s; wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

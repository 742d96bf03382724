#!/usr/bin/env python3
"""GPU confirmation of the landscape replay: real sessions vs the replay's prediction.

    python benchmarks/replay_confirm.py --replay benchmarks/results/landscapes/replay.json --out DIR
        [--kernels add_small_blocks_fp16,softmax_short_fp32] [--seeds 0,1,2] [--budget 8]
        [--baseline auto] [--minutes 8.5] [--profile-tier 0] [--report-only]

For each kernel, seed and policy (kernelband and the best baseline: ``auto`` takes the
replay's best baseline at this budget, at equal evaluations), a real session runs, one
at a time: the product's ``run_session`` (the ``kernelband optimize`` path: hardened
evaluation in the judge/variant processes, the rules generator, warm start off), with
the same seed as the replay's run, so with identical timings the session would make the
same proposals in the same order. Each session's record goes to
DIR/sessions/<kernel>__<policy>__<seed>.json as soon as it ends; present records are
skipped (resumable); ``--minutes`` stops before a session that would not fit (sessions
run in the order seed, kernel, policy, so a cut-short run stays paired). Without a GPU it
refuses to run sessions (they would run on the CPU); ``--report-only`` only builds the
tables from the records present, e.g. against a newer replay.json.

Compared, per kernel and policy (geomean over seeds): the replay's best speedup after
``--budget`` evaluations, the session's best speedup during its search (same measure:
the original's warm time over the fastest candidate's time), and the session's final
paired speedup (the verdict's re-measurement); the ratio kernelband / baseline in the
replay and in reality; and how many of the first ``--budget`` proposals the session
made are the replay's (same description, same position). ``--profile-tier 0`` (the
default) matches the replay, which has no profiles; 2 is what a default session does.

Sizing (measured on an H100, 2026-11-23): a budget-8 session took 108-137 s (the
first candidate 29 s after the start, then about 7 s per evaluation, and the final
paired timing), so one 9-minute device call holds 4 sessions: one seed of 2 kernels x 2
policies. Three seeds of 2 kernels need three calls (the records accumulate).
"""
from __future__ import annotations

import argparse
import json
import math
import threading
import time
from pathlib import Path
from typing import Any, Optional

from common import geomean_known as geomean

from replay_landscapes import first_pulls  # noqa: E402

DEFAULT_KERNELS = "add_small_blocks_fp16,softmax_short_fp32"
BASELINES = ("ucb1", "greedy", "random")


def run_one(entry: Any, policy: str, seed: int, budget: int, profile_tier: int, stop: threading.Event,
            interpreted: bool) -> dict[str, Any]:
    from run import run_session_adapter

    fields = {"module_path": str(entry.path), "source": entry.path.read_text(encoding="utf-8"), "kernel": entry.kernel,
              "harness": entry.harness, "device": "cpu" if interpreted else "auto"}
    t0 = time.monotonic()
    res = run_session_adapter(fields, policy, budget, seed, stop, None, profile_tier=profile_tier,
                              **({"cpu_tuning": True} if interpreted else {}))
    hist = res.get("history") or []
    return {
        "module": entry.module, "policy": policy, "seed": seed, "budget": budget, "profile_tier": profile_tier,
        "wall_s": time.monotonic() - t0, "status": res.get("status"), "evaluations": res.get("evaluations"),
        "search_best_speedup": hist[-1]["best_speedup_so_far"] if hist else 1.0,
        "final_speedup": res.get("speedup"), "final_ci": res.get("speedup_ci"),
        "baseline_ms": res.get("baseline_ms"), "stop_reason": res.get("stop_reason"),
        "pulls": [{k: h.get(k) for k in ("strategy", "status", "description", "speedup", "time_ms", "t")} for h in hist],
        "interpreted": res.get("interpreted"),
    }


def _gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _replayed(replay: dict[str, Any], kernel: str, policy: str, budget: int) -> list[float]:
    """Each replayed run's best speedup after ``budget`` evaluations (replay.json's per_run)."""
    runs = ((replay.get("per_run") or {}).get(kernel) or {}).get(policy) or {}
    return runs.get(str(budget)) or runs.get(budget) or []  # type: ignore[call-overload]


def compare(replay: dict[str, Any], records: list[dict[str, Any]], kernels: list[str], policies: list[str],
            budget: int) -> tuple[dict[str, Any], str]:
    out: dict[str, Any] = {"budget": budget, "policies": policies, "kernels": {}}
    L = [f"Real sessions vs the landscape replay at budget {budget} (geomean over the seeds run; "
         "search = best speedup found during the search, final = the verdict's paired re-measurement):", "",
         "| kernel | policy | seeds | replay | real search | real final | same proposals |",
         "| --- | --- | --- | --- | --- | --- | --- |"]
    for k in kernels:
        out["kernels"][k] = {}
        for p in policies:
            rs = sorted((r for r in records if r["module"] == k and r["policy"] == p), key=lambda r: r["seed"])
            if not rs:
                continue
            pred_runs = _replayed(replay, k, p, budget)
            pred = geomean([pred_runs[r["seed"]] for r in rs if r["seed"] < len(pred_runs)])
            firsts = first_pulls(replay, k, p)
            same = total = 0
            for r in rs:
                mine = [x["description"] for x in r["pulls"][:budget]]
                theirs = firsts[r["seed"]][:budget] if r["seed"] < len(firsts) else []
                total += len(mine)
                same += sum(1 for x, y in zip(mine, theirs) if x == y)
            cell = {"seeds": [r["seed"] for r in rs], "replay": pred,
                    "real_search": geomean([r["search_best_speedup"] for r in rs]),
                    "real_final": geomean([r["final_speedup"] or 1.0 for r in rs]),
                    "same_proposals": same, "proposals": total}
            out["kernels"][k][p] = cell
            f = lambda v: f"{v:.3f}" if v is not None else "-"  # noqa: E731
            L.append(f"| {k} | {p} | {len(rs)} | {f(pred)} | {f(cell['real_search'])} | {f(cell['real_final'])} | "
                     f"{same}/{total} |")
    if len(policies) == 2:
        ref, other = policies
        L += ["", f"Ratio {ref} / {other} (geomean over kernels of the per-kernel geomeans):", "",
              "| | replay | real search | real final |", "| --- | --- | --- | --- |"]
        ratios = {}
        for key in ("replay", "real_search", "real_final"):
            vals = [out["kernels"][k][ref][key] / out["kernels"][k][other][key] for k in kernels
                    if ref in out["kernels"].get(k, {}) and other in out["kernels"].get(k, {})
                    and out["kernels"][k][ref][key] and out["kernels"][k][other][key]]
            ratios[key] = geomean(vals)
        out["ratio"] = ratios
        L.append("| " + " | ".join([f"{ref}/{other}"] + [f"{ratios[x]:.3f}" if ratios[x] else "-"
                                                          for x in ("replay", "real_search", "real_final")]) + " |")
        L += ["", f"Per seed (final paired speedup; replay's best after {budget} evaluations in brackets):", "",
              f"| kernel | seed | {ref} | {other} | ratio |", "| --- | --- | --- | --- | --- |"]
        by = {(r["module"], r["policy"], r["seed"]): r for r in records}
        for k in kernels:
            for seed in sorted({r["seed"] for r in records if r["module"] == k}):
                x, y = by.get((k, ref, seed)), by.get((k, other, seed))
                if x is None or y is None:
                    continue

                def cell(r: dict[str, Any], p: str) -> str:
                    pred = _replayed(replay, k, p, budget)
                    final = f"{r['final_speedup'] or 1.0:.3f}"
                    return f"{final} [{pred[seed]:.3f}]" if seed < len(pred) else final
                L.append(f"| {k} | {seed} | {cell(x, ref)} | {cell(y, other)} | "
                         f"{(x['final_speedup'] or 1.0) / (y['final_speedup'] or 1.0):.3f} |")
    return out, "\n".join(L) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replay", type=Path, required=True, help="replay_landscapes.py's replay.json")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--kernels", default=DEFAULT_KERNELS)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--baseline", default="auto", help="ucb1, greedy, random, or auto (the replay's best at this budget)")
    ap.add_argument("--profile-tier", type=int, default=0)
    ap.add_argument("--minutes", type=float, default=0.0)
    ap.add_argument("--report-only", action="store_true",
                    help="run no session: the tables from the records already in DIR/sessions")
    a = ap.parse_args(argv)
    from benchmarks.suite import entry

    if not a.replay.is_file():
        ap.error(f"no replay file {a.replay}")
    replay = json.loads(a.replay.read_text())
    try:
        entries = [entry(k) for k in a.kernels.split(",") if k]
        seeds = [int(s) for s in a.seeds.split(",") if s]
    except (KeyError, ValueError) as e:
        ap.error(str(e))
    baseline = a.baseline
    if baseline == "auto":
        bb = (replay.get("best_baseline") or {}).get("evals") or {}
        baseline = bb.get(str(a.budget)) or bb.get(a.budget) or "greedy"
    if baseline not in BASELINES:
        ap.error(f"--baseline must be one of {BASELINES} or auto, not {baseline!r}")
    policies = ["kernelband", baseline]
    import os

    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    if not a.report_only and not interpreted and not _gpu():
        # a session here would run on the CPU and confirm nothing about the GPU replay
        ap.error("no GPU here: sessions would not confirm the replay (--report-only builds the tables from "
                 "the records present; TRITON_INTERPRET=1 runs interpreted sessions, for tests)")
    sess = a.out / "sessions"
    sess.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + a.minutes * 60 if a.minutes > 0 else math.inf
    walls: list[float] = []
    for seed in seeds:
        for e in entries:
            for p in policies:
                path = sess / f"{e.module}__{p}__{seed}.json"
                if path.is_file() or a.report_only:
                    continue
                need = max(walls) if walls else 0.0
                if time.monotonic() + need > deadline:
                    print(f"{e.module} {p} seed {seed}: not started (time)", flush=True)
                    continue
                stop = threading.Event()
                left = deadline - time.monotonic()
                timer = threading.Timer(left, stop.set) if math.isfinite(left) else None
                if timer:
                    timer.daemon = True
                    timer.start()
                try:
                    rec = run_one(e, p, seed, a.budget, a.profile_tier, stop, interpreted)
                finally:
                    if timer:
                        timer.cancel()
                if stop.is_set():
                    print(f"{e.module} {p} seed {seed}: stopped at the deadline, not written", flush=True)
                    continue
                walls.append(rec["wall_s"])
                path.write_text(json.dumps(rec, indent=1) + "\n")
                print(f"{e.module} {p} seed {seed}: search {rec['search_best_speedup']:.3f}x final "
                      f"{rec['final_speedup']} in {rec['wall_s']:.0f}s ({rec['evaluations']} evals)", flush=True)
    records = [json.loads(p.read_text()) for p in sorted(sess.glob("*.json"))]
    out, md = compare(replay, records, [e.module for e in entries], policies, a.budget)
    (a.out / "confirm.json").write_text(json.dumps(out, indent=1) + "\n")
    (a.out / "confirm.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Evaluations per minute with 1 and 2 local workers on suite kernels (issue 15).

    python benchmarks/executor_scaling.py --out benchmarks/results/executor_scaling   # 2 GPUs
    python benchmarks/executor_scaling.py --out /tmp/es --device cpu --kernels gelu_fp32 --budget 3   # smoke test

For each kernel, the same session (exhaustive search of the rules space, capped at
``--budget`` evaluations: the same candidates whatever order they finish in; same seed)
runs with one worker, then with two (one per GPU). Reported per kernel: evaluations per
minute of the search phase (first baseline event to last candidate event) and of the whole
session, the 2-worker / 1-worker ratio, whether every candidate got the same verdict
(ok / rejected / wrong / ...) and whether the final status agrees. Stops starting new
kernels when ``--max-minutes`` (default 7.5) would be exceeded. Writes
``executor_scaling.json`` and ``executor_scaling.md`` into --out and prints the table.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DEFAULT_KERNELS = "gelu_fp32,softmax_fp16,rmsnorm_bf16"
TARGET = 1.8  # the target ratio on 2 GPUs


def run_one(entry: Any, device: str, workers: int, budget: int, seed: int, profile_tier: int,
            store_path: str) -> dict[str, Any]:
    from kernelband.detect import read_source
    from kernelband.events import EventEmitter
    from kernelband.executor import ExecutorOptions
    from kernelband.executor.local import LocalExecutor
    from kernelband.model import Task
    from kernelband.session import Budget, Session, SessionConfig
    from kernelband.store import Store

    marks: dict[str, float] = {}

    def sink(ev: Any) -> None:
        now = time.monotonic()
        if ev.type == "baseline":
            marks.setdefault("baseline", now)
        elif ev.type == "candidate":
            marks.setdefault("first_candidate", now)
            marks["last_candidate"] = now

    task = Task(module_path=str(entry.path), source=read_source(entry.path), kernel=entry.kernel, harness=entry.harness,
                device=device)
    config = SessionConfig(search="exhaustive", generator="rules", budget=Budget(evaluations=budget), seed=seed,
                           warm_start=False, profile_tier=profile_tier)
    t0 = time.monotonic()
    with Store(store_path) as store:  # device peaks measured once, not per session (warm_start is off)
        result = Session(task, config, EventEmitter(sink), store, threading.Event(),
                         executor=LocalExecutor(ExecutorOptions(workers=workers))).run().to_dict()
    total = time.monotonic() - t0
    search = marks.get("last_candidate", t0) - marks.get("baseline", t0)
    n = int(result["evaluations"])
    return {
        "workers": workers,
        "evaluations": n,
        "session_s": round(total, 3),
        "search_s": round(search, 3),
        "search_evals_per_min": round(60.0 * n / search, 2) if search > 0 else None,
        "session_evals_per_min": round(60.0 * n / total, 2) if total > 0 else None,
        "status": result["status"],
        "speedup": result.get("speedup"),
        "verdicts": {h["variant_id"]: h["status"] for h in result["history"]},
        "workers_used": sorted({h.get("worker", "gpu") for h in result["history"]}),
        "gpu": result.get("gpu"),
        "warnings": result.get("warnings", []),
    }


def compare(one: dict[str, Any], two: dict[str, Any]) -> dict[str, Any]:
    a, b = one["verdicts"], two["verdicts"]
    same = [v for v in a if v in b and a[v] == b[v]]
    ratio = None
    if one["search_evals_per_min"] and two["search_evals_per_min"]:
        ratio = round(two["search_evals_per_min"] / one["search_evals_per_min"], 3)
    return {"candidates": len(a), "same_candidates": set(a) == set(b), "verdicts_agree": len(same) == len(a) == len(b),
            "disagreements": {v: [a.get(v), b.get(v)] for v in set(a) | set(b) if a.get(v) != b.get(v)},
            "final_status_agrees": one["status"] == two["status"], "ratio": ratio}


def geomean(xs: list[float]) -> Optional[float]:
    xs = [x for x in xs if x and x > 0]
    return round(math.exp(sum(math.log(x) for x in xs) / len(xs)), 3) if xs else None


def table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = ["| kernel | evals | 1 worker evals/min | 2 workers evals/min | ratio | verdicts agree | final 1w / 2w |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        one, two, c = r["one"], r["two"], r["compare"]
        lines.append(f"| {r['kernel']} | {one['evaluations']} | {one['search_evals_per_min']} | "
                     f"{two['search_evals_per_min']} | {c['ratio']} | "
                     f"{'yes' if c['verdicts_agree'] else 'NO ' + json.dumps(c['disagreements'])} | "
                     f"{one['status']} / {two['status']} |")
    lines.append("")
    lines.append(f"Search-phase evaluations per minute, 2 workers / 1: geomean {summary['ratio_geomean']}, "
                 f"pooled {summary['ratio_pooled']} (target >= {TARGET}); every candidate's verdict agrees: "
                 f"{summary['all_verdicts_agree']}; final statuses agree: {summary['all_final_agree']}.")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for executor_scaling.json and .md")
    ap.add_argument("--kernels", default=DEFAULT_KERNELS, help="suite modules (default: %(default)s)")
    ap.add_argument("--budget", type=int, default=12, help="evaluations per session (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", help="auto (needs 2 GPUs) | cpu (2 interpreter slots, a smoke test)")
    ap.add_argument("--profile-tier", type=int, default=2, help="as a default session (default: %(default)s)")
    ap.add_argument("--max-minutes", type=float, default=7.5, help="start no kernel past this (default: %(default)s)")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(HERE))
    from run import detect_environment, load_suite  # type: ignore[import-not-found]

    from kernelband.executor.local import visible_gpus

    env = detect_environment(args.device)
    if args.device != "cpu" and len(visible_gpus()) < 2:
        print("executor_scaling.py: needs 2 visible GPUs (or --device cpu for a smoke test)", file=sys.stderr)
        return 2
    suite = load_suite()
    entries = [suite.entry(k.strip()) for k in args.kernels.split(",") if k.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for e in entries:
        elapsed = time.monotonic() - started
        per_kernel = (elapsed / len(rows)) if rows else 0.0
        if rows and elapsed + per_kernel > args.max_minutes * 60:
            skipped.append(e.module)
            continue
        print(f"[{e.module}] 1 worker...", file=sys.stderr, flush=True)
        one = run_one(e, args.device, 1, args.budget, args.seed, args.profile_tier, str(out / "scaling.db"))
        print(f"[{e.module}] 2 workers...", file=sys.stderr, flush=True)
        two = run_one(e, args.device, 2, args.budget, args.seed, args.profile_tier, str(out / "scaling.db"))
        rows.append({"kernel": e.module, "one": one, "two": two, "compare": compare(one, two)})
    ratios = [r["compare"]["ratio"] for r in rows]
    n1 = sum(r["one"]["evaluations"] for r in rows)
    s1 = sum(r["one"]["search_s"] for r in rows)
    n2 = sum(r["two"]["evaluations"] for r in rows)
    s2 = sum(r["two"]["search_s"] for r in rows)
    summary = {
        "ratio_geomean": geomean(ratios),
        "ratio_pooled": round((n2 / s2) / (n1 / s1), 3) if s1 > 0 and s2 > 0 and n1 else None,
        "all_verdicts_agree": all(r["compare"]["verdicts_agree"] for r in rows),
        "all_final_agree": all(r["compare"]["final_status_agrees"] for r in rows),
        "target": TARGET,
        "skipped_for_time": skipped,
        "minutes": round((time.monotonic() - started) / 60, 2),
    }
    data = {"schema": 1, "environment": env, "budget": args.budget, "seed": args.seed, "device": args.device,
            "search": "exhaustive", "profile_tier": args.profile_tier, "summary": summary, "kernels": rows}
    (out / "executor_scaling.json").write_text(json.dumps(data, indent=1, default=str))
    md = table(rows, summary)
    (out / "executor_scaling.md").write_text(
        f"# Executor scaling: 1 vs 2 local workers\n\nEnvironment: {env.get('gpu')}, torch {env.get('torch_version')}, "
        f"Triton {env.get('triton_version')}. Exhaustive search capped at {args.budget} evaluations, seed {args.seed}, "
        f"profile tier {args.profile_tier}; command: `python benchmarks/executor_scaling.py --out {args.out}`.\n\n"
        + md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

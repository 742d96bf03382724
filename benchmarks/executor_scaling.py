#!/usr/bin/env python3
"""Evaluations per minute with 1 and 2 local workers on suite kernels.

    source scripts/gpu_env.sh && python benchmarks/executor_scaling.py --out DIR      # 2 GPUs
    python benchmarks/executor_scaling.py --out /tmp/es --device cpu --kernels gelu_fp32 --budget 4 \\
        --profile-tier 0                                                                 # CPU smoke test

For each kernel, the same session (exhaustive search of the rules space, capped at
``--budget`` evaluations: the same candidates whatever order they finish in; same seed,
no warm start) runs with one worker and with two (one per GPU; under the interpreter two
CPU slots). The order alternates from kernel to kernel (1 then 2, then 2 then 1) so
that drift does not favour one side. Device peaks are measured once, before any
session, so no session pays for them.

Reported per session, from the session's own events (monotonic clock in the sink):
setup (start -> baseline event), search (baseline event -> last candidate event), final
(last candidate -> result event: memcheck and paired re-measurement on a GPU), close
(result -> the session returned: workers shut down); evaluations per minute over the
search phase and end to end; each worker's evaluations, busy share of the search phase
and when it joined. Per kernel, the 2-worker / 1-worker ratios, whether every candidate
got the same verdict (ok / rejected / wrong / ...) and whether the final status agrees.

Resumable: a kernel already in ``DIR/executor_scaling.json`` with the same budget, seed,
device and tier is kept (``--force`` runs it again), so a long suite can be measured in
several commands (the device tool stops a command after 10 minutes; ``--max-minutes``,
default 8, starts no kernel that would not finish in time at the pace so far).
Writes ``executor_scaling.json`` and ``executor_scaling.md`` into DIR and prints the table.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

from common import ROOT as REPO
from common import geomean_known

HERE = REPO / "benchmarks"

# an elementwise, a reduction and a matmul kernel: each has more than 24 points in the rules space
DEFAULT_KERNELS = "gelu_fp32,layernorm_fp32,matmul_fp16"
DEFAULT_BUDGET = 24
TARGET = 1.8  # the ratio 2 GPUs should reach: 2x, less the primary's serial setup and final re-measurement
SCHEMA = 2


def _task(entry: Any, device: str) -> Any:
    from kernelband.detect import read_source
    from kernelband.model import Task

    return Task(module_path=str(entry.path), source=read_source(entry.path), kernel=entry.kernel,
                harness=entry.harness, device=device)


def prime_device_facts(entry: Any, device: str, store_path: str) -> Optional[float]:
    """Measure the device peaks once into the store (a session measures them when its store
    lacks them): seconds spent, None under the interpreter (no peaks there)."""
    from kernelband.evaluate import Evaluator
    from kernelband.store import Store

    t0 = time.monotonic()
    with Evaluator(_task(entry, device)) as ev, Store(store_path) as store:
        info = ev.start()
        if info.interpreted:
            return None
        if store.get_device_facts(info.device_name, info.triton_version) is None:
            facts = ev.device_facts()
            if facts:
                store.put_device_facts(info.device_name, info.triton_version, facts)
    return round(time.monotonic() - t0, 3)


def run_one(entry: Any, device: str, workers: int, budget: int, seed: int, profile_tier: int,
            store_path: str) -> dict[str, Any]:
    from kernelband.events import EventEmitter
    from kernelband.executor import ExecutorOptions
    from kernelband.executor.local import LocalExecutor
    from kernelband.session import Budget, Session, SessionConfig
    from kernelband.store import Store

    marks: dict[str, float] = {}

    def sink(ev: Any) -> None:
        now = time.monotonic()
        if ev.type in ("baseline", "result"):
            marks.setdefault(ev.type, now)
        elif ev.type == "candidate":
            marks.setdefault("first_candidate", now)
            marks["last_candidate"] = now

    config = SessionConfig(search="exhaustive", generator="rules", budget=Budget(evaluations=budget), seed=seed,
                           warm_start=False, profile_tier=profile_tier)
    t0 = time.monotonic()
    with Store(store_path) as store:  # device peaks come from the store (prime_device_facts)
        session = Session(_task(entry, device), config, EventEmitter(sink), store, threading.Event(),
                          executor=LocalExecutor(ExecutorOptions(workers=workers)))
        result = session.run().to_dict()
    end = time.monotonic()
    base = marks.get("baseline", t0)
    last = marks.get("last_candidate", base)
    res = marks.get("result", end)
    n = int(result["evaluations"])
    search, total = last - base, end - t0
    return {
        "workers": workers,
        "evaluations": n,
        "setup_s": round(base - t0, 3),
        "search_s": round(search, 3),
        "final_s": round(res - last, 3),
        "close_s": round(end - res, 3),
        "session_s": round(total, 3),
        "search_evals_per_min": round(60.0 * n / search, 2) if search > 0 else None,
        "session_evals_per_min": round(60.0 * n / total, 2) if total > 0 else None,
        "status": result["status"],
        "speedup": result.get("speedup"),
        "verdicts": {h["variant_id"]: h["status"] for h in result["history"]},
        "usage": session.workers.usage(),
        "gpu": result.get("gpu"),
        "warnings": result.get("warnings", []),
    }


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return round(b / a, 3) if a and b else None


def _round3(x: Optional[float]) -> Optional[float]:
    return round(x, 3) if x is not None else None


def compare(one: dict[str, Any], two: dict[str, Any]) -> dict[str, Any]:
    a, b = one["verdicts"], two["verdicts"]
    same = [v for v in a if v in b and a[v] == b[v]]
    return {"candidates": len(a), "same_candidates": set(a) == set(b), "verdicts_agree": len(same) == len(a) == len(b),
            "disagreements": {v: [a.get(v), b.get(v)] for v in set(a) | set(b) if a.get(v) != b.get(v)},
            "final_status_agrees": one["status"] == two["status"],
            "ratio": _ratio(one["search_evals_per_min"], two["search_evals_per_min"]),
            "ratio_session": _ratio(one["session_evals_per_min"], two["session_evals_per_min"])}


def pooled(rows: list[dict[str, Any]], seconds: str) -> Optional[float]:
    """(all evaluations / all seconds) with 2 workers over the same with 1."""
    rates = []
    for side in ("one", "two"):
        n = sum(r[side]["evaluations"] for r in rows)
        s = sum(r[side][seconds] for r in rows)
        rates.append(n / s if s > 0 else None)
    return _ratio(rates[0], rates[1])


def summarize(rows: list[dict[str, Any]], skipped: list[str], minutes: float) -> dict[str, Any]:
    return {
        "ratio_geomean": _round3(geomean_known([r["compare"]["ratio"] for r in rows])),
        "ratio_pooled": pooled(rows, "search_s"),
        "ratio_session_geomean": _round3(geomean_known([r["compare"]["ratio_session"] for r in rows])),
        "ratio_session_pooled": pooled(rows, "session_s"),
        "all_verdicts_agree": all(r["compare"]["verdicts_agree"] for r in rows),
        "all_final_agree": all(r["compare"]["final_status_agrees"] for r in rows),
        "target": TARGET,
        "skipped_for_time": skipped,
        "minutes": round(minutes, 2),
    }


def _usage_cell(run: dict[str, Any]) -> str:
    cells = []
    for w, u in run["usage"].items():
        share = "-" if u["busy_share"] is None else f"{100 * u['busy_share']:.0f}%"
        ready = "-" if u["ready_at_s"] is None else f"{u['ready_at_s']:.1f}"
        cells.append(f"{w}: {u['evaluations']} ev, busy {share}, ready {ready} s")
    return "; ".join(cells)


def table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = ["| kernel | evals | search evals/min 1w | 2w | ratio | end-to-end evals/min 1w | 2w | ratio | "
             "verdicts agree | final 1w / 2w |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        one, two, c = r["one"], r["two"], r["compare"]
        agree = "yes" if c["verdicts_agree"] else "NO " + json.dumps(c["disagreements"])
        lines.append(f"| {r['kernel']} | {one['evaluations']} / {two['evaluations']} | {one['search_evals_per_min']} | "
                     f"{two['search_evals_per_min']} | {c['ratio']} | {one['session_evals_per_min']} | "
                     f"{two['session_evals_per_min']} | {c['ratio_session']} | {agree} | "
                     f"{one['status']} / {two['status']} |")
    lines += ["", "Phases (seconds) and workers:", "",
              "| kernel | workers | setup | search | final | close | total | per worker (search phase) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        for side in ("one", "two"):
            x = r[side]
            lines.append(f"| {r['kernel']} | {x['workers']} | {x['setup_s']} | {x['search_s']} | {x['final_s']} | "
                         f"{x['close_s']} | {x['session_s']} | {_usage_cell(x)} |")
    lines.append("")
    lines.append(f"Evaluations per minute, 2 workers / 1: search phase geomean {summary['ratio_geomean']}, pooled "
                 f"{summary['ratio_pooled']}; end to end geomean {summary['ratio_session_geomean']}, pooled "
                 f"{summary['ratio_session_pooled']} (target >= {TARGET}); every candidate's verdict agrees: "
                 f"{summary['all_verdicts_agree']}; final statuses agree: {summary['all_final_agree']}.")
    if summary["skipped_for_time"]:
        lines.append(f"Not run (time limit; run again with --kernels): {', '.join(summary['skipped_for_time'])}.")
    return "\n".join(lines)


def _previous(path: Path, settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Rows of an earlier run with the same settings, by kernel (resume)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if data.get("schema") != SCHEMA or any(data.get(k) != v for k, v in settings.items()):
        return {}
    return {r["kernel"]: r for r in data.get("kernels", [])}


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for executor_scaling.json and .md")
    ap.add_argument("--kernels", default=DEFAULT_KERNELS, help="suite modules (default: %(default)s)")
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="evaluations per session (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", help="auto (needs 2 GPUs) | cpu (2 interpreter slots, a smoke test)")
    ap.add_argument("--profile-tier", type=int, default=2, help="as a default session (default: %(default)s)")
    ap.add_argument("--max-minutes", type=float, default=8.0, help="start no kernel past this (default: %(default)s)")
    ap.add_argument("--force", action="store_true", help="run kernels already in DIR/executor_scaling.json again")
    args = ap.parse_args(argv)

    from run import detect_environment, load_suite

    from kernelband.executor.local import visible_gpus

    env = detect_environment(args.device)
    if args.device != "cpu" and len(visible_gpus()) < 2:
        print("executor_scaling.py: needs 2 visible GPUs (or --device cpu for a smoke test)", file=sys.stderr)
        return 2
    suite = load_suite()
    entries = [suite.entry(k.strip()) for k in args.kernels.split(",") if k.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"budget": args.budget, "seed": args.seed, "device": args.device, "profile_tier": args.profile_tier}
    kept = {} if args.force else _previous(out / "executor_scaling.json", settings)
    store = str(out / "scaling.db")
    started = time.monotonic()
    primed = prime_device_facts(entries[0], args.device, store) if entries and args.device != "cpu" else None
    rows: list[dict[str, Any]] = [r for k, r in kept.items() if k not in {e.module for e in entries}]
    skipped: list[str] = []
    ran: list[float] = []
    for n, e in enumerate(entries):
        if e.module in kept:
            print(f"[{e.module}] kept from an earlier run (--force runs it again)", file=sys.stderr)
            rows.append(kept[e.module])
            continue
        elapsed = time.monotonic() - started
        pace = max(ran) if ran else 0.0
        if ran and elapsed + pace > args.max_minutes * 60:
            skipped.append(e.module)
            continue
        k0 = time.monotonic()
        runs: dict[int, dict[str, Any]] = {}
        for workers in ((1, 2) if n % 2 == 0 else (2, 1)):
            print(f"[{e.module}] {workers} worker(s)...", file=sys.stderr, flush=True)
            runs[workers] = run_one(e, args.device, workers, args.budget, args.seed, args.profile_tier, store)
        ran.append(time.monotonic() - k0)
        rows.append({"kernel": e.module, "one": runs[1], "two": runs[2], "compare": compare(runs[1], runs[2])})
        _write(out, env, settings, primed, rows, skipped, started, args)  # a killed command keeps what it measured
    md = _write(out, env, settings, primed, rows, skipped, started, args)
    print(md)
    return 0


def _write(out: Path, env: dict[str, Any], settings: dict[str, Any], primed: Optional[float],
           rows: list[dict[str, Any]], skipped: list[str], started: float, args: Any) -> str:
    summary = summarize(rows, skipped, (time.monotonic() - started) / 60)
    data = {"schema": SCHEMA, **settings, "environment": env, "search": "exhaustive", "device_facts_s": primed,
            "summary": summary, "kernels": rows}
    (out / "executor_scaling.json").write_text(json.dumps(data, indent=1, default=str))
    md = table(rows, summary)
    (out / "executor_scaling.md").write_text(
        f"# Executor scaling: 1 vs 2 local workers\n\nSessions ran one at a time; with 2 workers each worker had its "
        f"own GPU and timed alone on it.\n\nEnvironment: {env.get('gpu')}, torch {env.get('torch_version')}, "
        f"Triton {env.get('triton_version')}. Exhaustive search capped at {args.budget} evaluations, seed {args.seed}, "
        f"profile tier {args.profile_tier}; device peaks measured before the sessions; command: "
        f"`python benchmarks/executor_scaling.py --out {args.out} --kernels {args.kernels} --budget {args.budget}`.\n\n"
        + md + "\n")
    return md


if __name__ == "__main__":
    sys.exit(main())

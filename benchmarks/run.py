#!/usr/bin/env python3
"""Benchmark runner: every search policy at several budgets over the kernel suite,
with the exhaustive search of the rules generator's space as the oracle.

    python benchmarks/run.py                         # everything, on the GPU, resumable
    python benchmarks/run.py --kernels gelu_fp32,matmul_fp16 --methods kernelband,random \
        --budgets 8,16 --seeds 0,1 --max-minutes 8
    python benchmarks/run.py --report-only           # rebuild report.md and the plots
    python benchmarks/run.py --throughput            # evaluations per minute, where time goes
    python benchmarks/run.py --list                  # the suite and the runs still to do

Results go to ``--out`` (default ``benchmarks/results``):

- ``results.json``: ``{"schema": 1, "runs": [row, ...]}``, one row per finished run, keyed
  by (kernel, method, budget, seed, gpu). Rows already there are skipped, so a run
  interrupted (or stopped by ``--max-minutes``) goes on where it stopped. The file is
  rewritten atomically after every run.
- ``report.md``, ``summary.json``: tables per method and budget and per kernel.
- ``speedup_vs_budget.png``, ``oracle_fraction_vs_budget.png``, ``best_known_fraction_vs_budget.png``, ``per_kernel.png``
  (when matplotlib is installed).
- ``throughput.json``, ``throughput.md`` with ``--throughput``.

Only ``run_session_adapter`` knows the session API (``kernelband/session.py``); the
rest works on the Result dict it returns.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from common import ROOT as REPO
from common import geomean_known as geomean
from common import load_module

HERE = REPO / "benchmarks"

METHODS = ("kernelband", "kernelband-v2", "random", "ucb1", "greedy")
ORACLE = "exhaustive"
ALL_METHODS = METHODS + (ORACLE,)
BUDGETS = (8, 16, 32)
DEFAULT_OUT = HERE / "results"
RESULTS_FILE = "results.json"
THROUGHPUT_FILE = "throughput.json"
SCHEMA = 1
EXHAUSTIVE_CAP = 512  # evaluation budget handed to the exhaustive search (its space is far smaller)
REACH_FRACTION = 0.95  # "evaluations and seconds to reach 95% of the final"
PHASES = ("compile", "correctness", "timing", "profile")


# --------------------------------------------------------------------------- suite


def load_suite() -> Any:
    """benchmarks/suite/__init__.py, loaded by path (no package import, no torch)."""
    path = HERE / "suite" / "__init__.py"
    name = "kernelband_benchmark_suite"
    if name in sys.modules:
        return sys.modules[name]
    return load_module(path, name)


def _csv(text: Optional[str]) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def select_entries(suite: Any, kernels: Optional[str]) -> list[Any]:
    if not kernels or kernels == "all":
        return list(suite.SUITE)
    return [suite.entry(k) for k in _csv(kernels)]


# --------------------------------------------------------------------------- environment


def detect_environment(device: str) -> dict[str, Any]:
    """GPU name and versions. device: "auto" | "cuda" | "cpu"."""
    env: dict[str, Any] = {"device": device, "gpu": "cpu (interpreter)", "interpreted": True}
    try:
        import torch

        env["torch_version"] = torch.__version__
        if device in ("auto", "cuda") and torch.cuda.is_available():
            env.update(gpu=torch.cuda.get_device_name(0), interpreted=False, device="cuda")
        elif device == "cuda":
            raise SystemExit("run.py: --device cuda, but torch sees no CUDA device")
        else:
            env["device"] = "cpu"
    except ImportError:
        env["torch_version"] = None
        env["device"] = "cpu"
    if env["device"] == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere here
    try:
        import triton

        env["triton_version"] = triton.__version__
    except ImportError:
        env["triton_version"] = None
    return env


# --------------------------------------------------------------------------- the session adapter


def run_session_adapter(
    task_fields: dict[str, Any],
    method: str,
    budget: Optional[int],
    seed: int,
    stop: threading.Event,
    store_path: Optional[str],
    verbose: bool = False,
    exhaustive_cap: int = EXHAUSTIVE_CAP,
    **session_options: Any,
) -> dict[str, Any]:
    """Run one KernelBand session and return its Result dict (docs/ARCHITECTURE.md).

    The only function that knows the session API:
    ``run_session(task, SessionConfig(search=..., generator="rules",
    budget=Budget(evaluations=N), seed=...), emitter, store, stop) -> dict``.
    The exhaustive oracle is ``search="exhaustive"``: the session evaluates the rules
    generator's whole space (capped at ``exhaustive_cap`` evaluations). Runs start cold
    (``warm_start=False``: no variant stored by an earlier run seeds the pool);
    ``session_options`` go to SessionConfig (e.g. ``profile_tier=0``)."""
    from kernelband import session as ks
    from kernelband.model import Task

    evaluations = exhaustive_cap if method == ORACLE else int(budget or 0)
    options = {"warm_start": False, **session_options}
    config = ks.SessionConfig(search=method, generator="rules", budget=ks.Budget(evaluations=evaluations), seed=seed,
                              **options)
    emitter = None
    if verbose:
        from kernelband.events import EventEmitter

        def sink(ev: Any) -> None:
            if ev.type in ("baseline", "candidate", "result", "error", "log"):
                d = ev.data
                brief = {k: d[k] for k in ("index", "strategy", "status", "time_ms", "speedup", "message") if k in d}
                print(f"    [{ev.t:7.1f}s] {ev.type} {json.dumps(brief, default=str)[:200]}", file=sys.stderr)

        emitter = EventEmitter(sink)
    store = None
    if store_path:
        from kernelband.store import Store

        store = Store(store_path)
    try:
        return ks.run_session(Task(**task_fields), config, emitter=emitter, store=store, stop=stop).to_dict()
    finally:
        if store is not None:
            store.close()


# --------------------------------------------------------------------------- the oracle, resumable in chunks


def run_oracle_chunked(
    task_fields: dict[str, Any],
    checkpoint: Path,
    stop: threading.Event,
    exhaustive_cap: int = EXHAUSTIVE_CAP,
    paired_rounds: int = 10,
    log: Callable[[str], None] = lambda s: None,
) -> Optional[dict[str, Any]]:
    """The exhaustive oracle, resumable between processes: every point of the rules
    generator's space (``enumerate_space``, as the session's exhaustive search uses) is
    evaluated through the Evaluator and checkpointed one by one, so a run longer than
    one device call finishes over several. Returns a Result-like dict once every point
    is done (the best one re-measured interleaved against the original), or None when
    stopped first (the checkpoint keeps what was done).

    Times from different chunks are compared as speedups over the original measured in
    the same chunk, so a chunk on another machine of the same GPU kind does not skew
    the choice; the final speedup and CI come from one paired re-measurement."""
    from kernelband.evaluate import Evaluator
    from kernelband.generators import make_generator
    from kernelband.model import Task, Variant

    task = Task(**task_fields)
    original = Variant(task.source, generator="original", description="the original kernel")
    space = make_generator("rules", seed=0).enumerate_space(original, task.kernel)[: max(int(exhaustive_cap), 0)]
    by_id = {v.id: v for v in space}
    state: dict[str, Any] = {}
    if checkpoint.is_file():
        try:
            state = json.loads(checkpoint.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
    if state.get("source_hash") != task.source_hash or state.get("space") != [v.id for v in space]:
        state = {"source_hash": task.source_hash, "space": [v.id for v in space], "done": {}, "seconds": 0.0, "chunks": 0}

    def save() -> None:
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        tmp = checkpoint.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, checkpoint)

    t0 = time.monotonic()
    state["chunks"] += 1
    prior_seconds = float(state["seconds"])

    def elapsed() -> float:
        return prior_seconds + time.monotonic() - t0

    evaluator = Evaluator(task, profile_tier=0)
    try:
        evaluator.start()
        base = evaluator.prepare()
        base_ms = base.timing.median_ms if base.timing else None
        for v in space:
            if v.id in state["done"]:
                continue
            if stop.is_set():
                return None
            ev = evaluator.evaluate(v)
            ratio = (base_ms / ev.time_ms) if ev.ok and ev.time_ms and base_ms else None
            state["done"][v.id] = {"index": len(state["done"]), "status": ev.status.value, "time_ms": ev.time_ms,
                                   "speedup": ratio, "strategy": v.strategy, "description": v.description,
                                   "t": round(elapsed(), 3)}
            state["seconds"] = round(elapsed(), 3)
            save()
            log(f"    oracle {len(state['done'])}/{len(space)} {ev.status.value} "
                + (f"{ratio:.3f}x" if ratio else ev.message[:120]))
        if stop.is_set():
            return None
        done = sorted(state["done"].items(), key=lambda kv: kv[1]["index"])
        history, best_so_far = [], 1.0
        for vid, d in done:
            best_so_far = max(best_so_far, d["speedup"] or 0.0)
            history.append({"index": d["index"], "t": d["t"], "variant_id": vid, "strategy": d["strategy"],
                            "status": d["status"], "time_ms": d["time_ms"], "speedup": d["speedup"],
                            "best_speedup_so_far": best_so_far})
        ok = [(vid, d) for vid, d in done if d["speedup"] and vid in by_id]
        result: dict[str, Any] = {"status": "no_improvement", "kernel": task.kernel, "speedup": 1.0, "speedup_ci": [1.0, 1.0],
                                  "baseline_ms": base_ms, "best_ms": base_ms, "evaluations": len(done),
                                  "interpreted": evaluator.interpreted,
                                  "clock": "cpu-interpreter" if evaluator.interpreted else "cuda-events",
                                  "best_source": task.source, "best_variant_id": original.id, "strategy_path": [],
                                  "history": history, "search": ORACLE, "oracle_chunks": state["chunks"],
                                  "space_size": len(space)}
        if ok:
            vid, d = max(ok, key=lambda kv: kv[1]["speedup"])
            if d["speedup"] > 1.0:
                paired = evaluator.paired_timing(by_id[vid], rounds=paired_rounds)
                result.update(speedup=paired.speedup, speedup_ci=[paired.ci_low, paired.ci_high],
                              baseline_ms=paired.baseline_ms, best_ms=paired.variant_ms, best_source=by_id[vid].source,
                              best_variant_id=vid, strategy_path=[by_id[vid].strategy or "?"],
                              status="improved" if paired.ci_low > 1.0 else "no_improvement",
                              message=by_id[vid].description)
        result["seconds"] = round(elapsed(), 3)
        return result
    finally:
        state["seconds"] = round(elapsed(), 3)  # time spent in this chunk counts, finished or not
        save()
        evaluator.close()


# --------------------------------------------------------------------------- results file


def run_key(row: dict[str, Any]) -> tuple:
    return (row["kernel"], row["method"], row.get("budget"), row.get("seed"), row["gpu"])


def load_shard_rows(folder: Path, pattern: str = "*/results.json") -> list[dict[str, Any]]:
    """The rows of every results file under folder's shards, one per run key (the first)."""
    rows: dict[tuple, dict[str, Any]] = {}
    for f in sorted(folder.glob(pattern)):
        for r in json.loads(f.read_text())["runs"]:
            rows.setdefault(run_key(r), r)
    return list(rows.values())


def load_results(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {"schema": SCHEMA, "runs": []}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise SystemExit(f"run.py: {path} is not a results file (no top-level 'runs' list)")
    return data


def save_results(path: Path, data: dict[str, Any]) -> None:
    """Atomic write: a kill mid-write never leaves a truncated results file."""
    refresh_derived(data["runs"])
    data["schema"] = SCHEMA
    data["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
        f.write("\n")
    os.replace(tmp, path)


def refresh_derived(runs: list[dict[str, Any]]) -> None:
    """Fill oracle_speedup / oracle_fraction from the oracle row of the same (kernel, gpu),
    whichever order the rows were produced in.

    oracle_fraction = speedup / oracle speedup; oracle_gain_fraction = (speedup - 1) /
    (oracle speedup - 1), the share of the oracle's gain (None when the oracle gained
    nothing). Either can exceed 1: timing noise, or variants outside the enumerated space
    (a search chains several rewrites; the oracle enumerates single points, and may be capped).

    best_known_fraction = speedup / the best speedup any correct run (oracle included) reached
    on the same (kernel, gpu): never above 1, the reference to read when the oracle is weak."""
    oracle: dict[tuple, float] = {}
    best: dict[tuple, float] = {}
    for r in runs:
        if not (r.get("correct") and _num(r.get("speedup"))):
            continue
        key = (r["kernel"], r["gpu"])
        best[key] = max(best.get(key, 1.0), float(r["speedup"]))
        if r.get("method") == ORACLE:
            oracle[key] = float(r["speedup"])
    for r in runs:
        o = oracle.get((r["kernel"], r["gpu"]))
        s = r.get("speedup")
        r["oracle_speedup"] = o
        b = best.get((r["kernel"], r["gpu"]))
        r["best_known_speedup"] = b
        r["best_known_fraction"] = round(float(s) / b, 4) if b and _num(s) and r.get("correct") else None
        if o and _num(s):
            r["oracle_fraction"] = round(float(s) / o, 4)
            r["oracle_gain_fraction"] = round((float(s) - 1.0) / (o - 1.0), 4) if o > 1.0 + 1e-9 else None
        else:
            r["oracle_fraction"] = None
            r["oracle_gain_fraction"] = None


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# --------------------------------------------------------------------------- one run -> one row


def reach_point(history: list[dict[str, Any]], fraction: float = REACH_FRACTION) -> tuple[Optional[int], Optional[float]]:
    """(evaluations, seconds) until best_speedup_so_far first reached ``fraction`` of the
    final gain: 1 + fraction * (final - 1). (0, 0.0) when the search never beat the
    original (the original already is the final answer); (None, None) without history."""
    pts = [h for h in history if _num(h.get("best_speedup_so_far"))]
    if not pts:
        return None, None
    pts.sort(key=lambda h: h.get("index", 0))
    final = max(float(h["best_speedup_so_far"]) for h in pts)
    if final <= 1.0:
        return 0, 0.0
    threshold = 1.0 + fraction * (final - 1.0)
    base = 0 if min(int(h.get("index", 0)) for h in pts) == 0 else 1  # 0-based indices count from 1
    for h in pts:
        if float(h["best_speedup_so_far"]) >= threshold - 1e-12:
            t = h.get("t")
            return int(h.get("index", 0)) + (1 if base == 0 else 0), (round(float(t), 3) if _num(t) else None)
    return None, None  # unreachable: the max is in pts


def strategy_pulls(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each generated candidate as {strategy, status, x}: x = T_parent / T_child (None when the
    candidate failed). The bandit simulator draws its arms' rewards from these."""
    times = {h.get("variant_id"): h.get("time_ms") for h in history if h.get("status") == "ok" and _num(h.get("time_ms"))}
    pulls = []
    for h in history:
        if not h.get("strategy"):
            continue  # exhaustive points and the like: no strategy was chosen
        x = None
        if h.get("status") == "ok" and _num(h.get("time_ms")) and _num(h.get("speedup")):
            # the original is not in the history: its search-time ms is time_ms * speedup
            parent_ms = times.get(h.get("parent")) or h["time_ms"] * h["speedup"]
            x = round(parent_ms / h["time_ms"], 4)
        pulls.append({"strategy": h["strategy"], "status": h.get("status"), "x": x})
    return pulls


def phase_seconds(result: dict[str, Any]) -> tuple[dict[str, float], list[str]]:
    """Per-phase seconds from whatever the Result carries, and the phases it lacks.

    Looks for a dict under ``phase_seconds`` / ``phases`` / ``timings`` in the Result,
    else sums the same keys over history entries."""
    found: dict[str, float] = {}

    def take(d: Any) -> None:
        if not isinstance(d, dict):
            return
        for k, v in d.items():
            if _num(v):
                key = "profile" if k in ("profiling", "profile_s", "profile_seconds") else k.removesuffix("_s")
                key = "compile" if key == "compile_and_first_run" else key  # the worker's name for it
                found[key] = found.get(key, 0.0) + float(v)

    for name in ("phase_seconds", "phases", "timings"):
        if isinstance(result.get(name), dict):
            take(result[name])
            break
    else:
        for h in result.get("history") or []:
            for name in ("phase_seconds", "phases", "timings"):
                if isinstance(h.get(name), dict):
                    take(h[name])
                    break
    missing = [p for p in PHASES if p not in found]
    return {k: round(v, 3) for k, v in found.items()}, missing


def verify_against_reference(entry: Any, source: str, seed: int = 0) -> Optional[list[str]]:
    """Run the best variant's harness and the suite's torch reference in this process and
    compare them (independent of the session's own original-vs-variant check).
    Returns the problems (empty = correct), or None when it could not run."""
    suite = load_suite()
    import torch

    with tempfile.TemporaryDirectory(prefix="kb-verify-") as d:
        path = Path(d) / f"{entry.module}_best.py"
        path.write_text(source, encoding="utf-8")
        name = f"kb_verify_{entry.module}_{abs(hash(source)) % 10**8}"
        mod = load_module(path, name)
        torch.manual_seed(seed)
        out = getattr(mod, entry.harness)()
        # the reference (and its inputs) always come from the original module, never the variant
        orig = load_module(entry.path, name + "_orig")
        torch.manual_seed(seed)
        expected = getattr(orig, entry.reference)()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return suite.compare(out, expected)


def make_row(
    entry: Any,
    method: str,
    budget: Optional[int],
    seed: int,
    env: dict[str, Any],
    result: Optional[dict[str, Any]],
    wall_s: float,
    error: Optional[str] = None,
    verify: Optional[list[str]] = None,
    verify_s: float = 0.0,
) -> dict[str, Any]:
    r = result or {}
    history = r.get("history") or []
    evals_95, secs_95 = reach_point(history)
    phases, missing = phase_seconds(r)
    seconds = r.get("seconds") if _num(r.get("seconds")) else round(wall_s, 3)
    session_ok = result is not None and error is None and r.get("status") in ("improved", "no_improvement")
    correct = bool(session_ok and (verify is None or not verify))
    if _num(r.get("gpu_seconds")):
        gpu_seconds, gpu_how = float(r["gpu_seconds"]), "result.gpu_seconds"
    elif not env.get("interpreted"):
        gpu_seconds, gpu_how = float(seconds or 0.0) + verify_s, "session wall seconds on the GPU + reference check"
    else:
        gpu_seconds, gpu_how = 0.0, "interpreter (no GPU)"
    profile_s = phases.get("profile")
    ci = r.get("speedup_ci")
    ci = list(ci) if isinstance(ci, (list, tuple)) and len(ci) == 2 else None
    measured = r.get("speedup") if _num(r.get("speedup")) else None
    improved = session_ok and r.get("status") == "improved" and measured is not None
    row: dict[str, Any] = {
        "kernel": entry.module,
        "kernel_function": entry.kernel,
        "category": entry.category,
        "dtype": entry.dtype,
        "method": method,
        "budget": budget,
        "seed": seed,
        "gpu": env["gpu"],
        "status": r.get("status", "error" if error else None),
        "correct": correct,
        "session_ok": session_ok,
        "reference_check": None if verify is None else ("ok" if not verify else "; ".join(verify)[:500]),
        # delivered: what the user gets. A winner whose paired re-measurement does not beat the
        # original (CI lower bound <= 1) is not proposed, so the speedup is 1.0 there.
        "speedup": measured if improved else (1.0 if session_ok else None),
        "speedup_ci": ci if improved else ([1.0, 1.0] if session_ok else None),
        "measured_speedup": measured,  # the Result's paired speedup of its best candidate, proposed or not
        "measured_speedup_ci": ci,
        "baseline_ms": r.get("baseline_ms"),
        "best_ms": r.get("best_ms"),
        "oracle_speedup": None,
        "oracle_fraction": None,
        "oracle_gain_fraction": None,
        "evaluations": r.get("evaluations"),
        "seconds": seconds,
        "evals_to_95": evals_95,
        "seconds_to_95": secs_95,
        "gpu_seconds": round(gpu_seconds, 3),
        "gpu_seconds_how": gpu_how,
        "phase_seconds": phases,
        "phases_missing": missing,
        "profile_seconds": profile_s,
        "profiling_overhead": round(profile_s / seconds, 4) if profile_s is not None and _num(seconds) and seconds else None,
        "strategy_path": r.get("strategy_path"),
        "best_variant_id": r.get("best_variant_id"),
        "baseline_bottleneck": r.get("baseline_bottleneck"),
        "pulls": strategy_pulls(history),
        "interpreted": r.get("interpreted", env.get("interpreted")),
        "clock": r.get("clock"),
        "message": (r.get("message") or "")[:500],
        "warnings": r.get("warnings") or [],
        "error": error,
        "wall_seconds": round(wall_s, 3),
        "triton_version": env.get("triton_version"),
        "torch_version": env.get("torch_version"),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    return row


# --------------------------------------------------------------------------- planning and running


def plan_runs(entries: list[Any], methods: list[str], budgets: list[int], seeds: list[int], oracle: bool) -> list[tuple]:
    """(entry, method, budget, seed) in running order: per kernel, the oracle first
    (every other row's oracle_fraction needs it), then budgets x methods x seeds."""
    plan: list[tuple] = []
    for e in entries:
        if oracle:
            plan.append((e, ORACLE, None, 0))
        for b in budgets:
            for m in methods:
                if m == ORACLE:
                    continue
                for s in seeds:
                    plan.append((e, m, b, s))
    return plan


def estimate_seconds(runs: list[dict[str, Any]], entry: Any, method: str, budget: Optional[int]) -> float:
    """A guess at how long a run will take, from finished rows (0 = no idea)."""

    def longest(rows: Iterable[dict[str, Any]]) -> float:
        return max((float(r.get("wall_seconds") or 0.0) for r in rows), default=0.0)

    same = [r for r in runs if r["kernel"] == entry.module and r["method"] == method and r.get("budget") == budget]
    if same:
        return longest(same)
    kernel_rows = [r for r in runs if r["kernel"] == entry.module and r.get("budget") and r.get("evaluations")]
    if kernel_rows and budget:
        per_eval = max(float(r["wall_seconds"]) / max(int(r["evaluations"]), 1) for r in kernel_rows)
        return per_eval * budget
    return 0.0


SessionFn = Callable[..., dict[str, Any]]


class Runner:
    def __init__(
        self,
        out_dir: Path,
        env: dict[str, Any],
        session_fn: Optional[SessionFn] = None,
        deadline: Optional[float] = None,
        verify: bool = True,
        retry_errors: bool = False,
        store: Optional[str] = None,
        verbose: bool = False,
        exhaustive_cap: int = EXHAUSTIVE_CAP,
        max_same_errors: int = 3,
        oracle_mode: str = "chunked",
        oracle_fn: Optional[Callable[..., Optional[dict[str, Any]]]] = None,
        session_options: Optional[dict[str, Any]] = None,
        log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
    ) -> None:
        self.out_dir = out_dir
        self.path = out_dir / RESULTS_FILE
        self.env = env
        self.session_fn = session_fn or run_session_adapter
        self.deadline = deadline
        self.verify = verify
        self.retry_errors = retry_errors
        self.store = store
        self.verbose = verbose
        self.exhaustive_cap = exhaustive_cap
        self.max_same_errors = max_same_errors
        self.oracle_mode = oracle_mode
        self.oracle_fn = oracle_fn or run_oracle_chunked
        self.session_options = dict(session_options or {})
        self.log = log
        self.data = load_results(self.path)
        self._verified: dict[tuple[str, str], Optional[list[str]]] = {}

    def _remaining(self) -> float:
        return math.inf if self.deadline is None else self.deadline - time.monotonic()

    def run_all(self, plan: list[tuple]) -> dict[str, int]:
        """Run what is not done yet; stop cleanly at the deadline. Returns counts."""
        counts = {"done_before": 0, "ran": 0, "errors": 0, "left": 0, "stopped": 0}
        gpu = self.env["gpu"]
        if self.retry_errors:
            self.data["runs"] = [r for r in self.data["runs"] if not (r.get("error") and r["gpu"] == gpu)]
        done = {run_key(r) for r in self.data["runs"]}
        todo = []
        for item in plan:
            e, m, b, s = item
            if (e.module, m, b, s, gpu) in done:
                counts["done_before"] += 1
            else:
                todo.append(item)
        same_error_streak: list[str] = []
        for i, (e, m, b, s) in enumerate(todo):
            left = self._remaining()
            guess = estimate_seconds(self.data["runs"], e, m, b)
            if left <= 0 or (guess and guess > left):
                counts["left"] = len(todo) - i
                self.log(f"run.py: time is up ({max(left, 0):.0f}s left, next run ~{guess:.0f}s): "
                         f"{counts['left']} runs left for a later call")
                break
            label = f"{e.module} {m} budget={b if b is not None else 'all'} seed={s}"
            self.log(f"[{i + 1}/{len(todo)}] {label}")
            row = self.run_one(e, m, b, s)
            if row is None:  # stopped by the deadline mid-run: not recorded, redone next time
                counts["stopped"] += 1
                counts["left"] = len(todo) - i
                self.log(f"run.py: deadline reached during {label}; it is not recorded and will run again")
                break
            self.data["runs"].append(row)
            save_results(self.path, self.data)
            counts["ran"] += 1
            counts["errors"] += bool(row.get("error"))
            sp = row.get("speedup")
            self.log(f"    -> {row.get('status')} correct={row['correct']} speedup={sp if sp is None else f'{sp:.3f}'} "
                     f"evals={row.get('evaluations')} {row.get('wall_seconds')}s"
                     + (f" error={row['error'][:200]}" if row.get("error") else ""))
            same_error_streak = same_error_streak + [row["error"]] if row.get("error") else []
            if len(same_error_streak) >= self.max_same_errors and len(set(same_error_streak[-self.max_same_errors:])) == 1:
                counts["left"] = len(todo) - i - 1
                self.log(f"run.py: {self.max_same_errors} runs in a row failed with the same error, which looks "
                         f"systematic (the session API?): {row['error'][:300]}. Stopping; fix it and rerun with "
                         "--retry-errors.")
                break
        return counts

    def run_one(self, e: Any, method: str, budget: Optional[int], seed: int) -> Optional[dict[str, Any]]:
        stop = threading.Event()
        timer = None
        left = self._remaining()
        if math.isfinite(left):
            timer = threading.Timer(max(left, 0.0), stop.set)
            timer.daemon = True
            timer.start()
        task_fields = {
            "module_path": str(e.path),
            "source": e.path.read_text(encoding="utf-8"),
            "kernel": e.kernel,
            "harness": e.harness,
            "device": "cpu" if self.env.get("interpreted") else "auto",
        }
        t0 = time.monotonic()
        result: Optional[dict[str, Any]] = None
        error: Optional[str] = None
        try:
            if method == ORACLE and self.oracle_mode == "chunked":
                ckpt = self.out_dir / "oracle_partial" / f"{e.module}__{_slug(self.env['gpu'])}.json"
                result = self.oracle_fn(task_fields, ckpt, stop, exhaustive_cap=self.exhaustive_cap,
                                        log=self.log if self.verbose else (lambda s: None))
                if result is None:  # stopped between points: the checkpoint keeps them for the next call
                    return None
            else:
                with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
                    store = self.store or str(Path(tmp) / "kernelband.db")  # fresh store: runs do not share learning
                    result = self.session_fn(task_fields, method, budget, seed, stop, store,
                                             verbose=self.verbose, exhaustive_cap=self.exhaustive_cap,
                                             **self.session_options)
        except (KeyboardInterrupt, ImportError):
            raise  # no session module: nothing to record, every run would fail the same way
        except Exception as ex:  # a broken run is a result, not the end of the benchmark
            if stop.is_set():
                return None
            error = f"{type(ex).__name__}: {ex}"
            if self.verbose:
                traceback.print_exc()
        finally:
            if timer is not None:
                timer.cancel()
        wall = time.monotonic() - t0
        if stop.is_set() or (result or {}).get("status") == "cancelled":
            return None
        verify: Optional[list[str]] = None
        verify_s = 0.0
        if result is not None and self.verify and result.get("status") in ("improved", "no_improvement"):
            source = result.get("best_source") or task_fields["source"]
            key = (e.module, str(hash(source)))
            t1 = time.monotonic()
            if key not in self._verified:
                try:
                    self._verified[key] = verify_against_reference(e, source, seed=0)
                except Exception as ex:
                    self._verified[key] = [f"reference check could not run: {type(ex).__name__}: {ex}"]
            verify = self._verified[key]
            verify_s = time.monotonic() - t1
        return make_row(e, method, budget, seed, self.env, result, wall, error, verify, verify_s)


# --------------------------------------------------------------------------- statistics


def bootstrap_ci(xs: list[float], stat: Callable[[list[float]], Optional[float]] = geomean,
                 n: int = 2000, seed: int = 0) -> Optional[tuple[float, float]]:
    """95% percentile bootstrap interval of stat over xs (None for fewer than 2 values)."""
    xs = [x for x in xs if _num(x)]
    if len(xs) < 2:
        return None
    rng = random.Random(seed)
    vals = sorted(v for v in (stat([rng.choice(xs) for _ in xs]) for _ in range(n)) if v is not None)
    return vals[int(0.025 * (len(vals) - 1))], vals[int(0.975 * (len(vals) - 1))]


def _mean(xs: Iterable[Any]) -> Optional[float]:
    v = [float(x) for x in xs if _num(x)]
    return sum(v) / len(v) if v else None


def _median(xs: Iterable[Any]) -> Optional[float]:
    v = sorted(float(x) for x in xs if _num(x))
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def cell_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One (kernel, method, budget) cell over its seeds."""
    correct = [r for r in rows if r.get("correct")]
    sp = [float(r["speedup"]) for r in correct if _num(r.get("speedup"))]
    if len(sp) >= 2:
        ci = bootstrap_ci(sp)
    elif len(correct) == 1 and correct[0].get("speedup_ci"):
        ci = tuple(correct[0]["speedup_ci"])
    else:
        ci = None
    return {
        "n": len(rows),
        "correct": len(correct),
        "speedup": geomean(sp),
        "ci": ci,
        "oracle_fraction": _mean(r.get("oracle_fraction") for r in correct),
        "best_known_fraction": _mean(r.get("best_known_fraction") for r in correct),
        "evals_to_95": _median(r.get("evals_to_95") for r in correct),
        "seconds_to_95": _median(r.get("seconds_to_95") for r in correct),
        "seconds": _mean(r.get("seconds") for r in rows),
        "gpu_seconds": sum(float(r.get("gpu_seconds") or 0.0) for r in rows),
    }


def summarize(runs: list[dict[str, Any]], gpu: str) -> dict[str, Any]:
    """Per (method, budget) over kernels, per kernel cells, and the oracle per kernel."""
    rows = [r for r in runs if r["gpu"] == gpu]
    kernels = sorted({r["kernel"] for r in rows}, key=_suite_order)
    budgets = sorted({r["budget"] for r in rows if r.get("budget") is not None})
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    methods += sorted({r["method"] for r in rows} - set(METHODS) - {ORACLE})
    cells: dict[str, dict[str, Any]] = {}
    for k in kernels:
        for m in methods:
            for b in budgets:
                sel = [r for r in rows if r["kernel"] == k and r["method"] == m and r.get("budget") == b]
                if sel:
                    cells[f"{k}|{m}|{b}"] = cell_stats(sel)
    overall = []
    for m in methods:
        for b in budgets:
            ks = [(k, cells[f"{k}|{m}|{b}"]) for k in kernels if f"{k}|{m}|{b}" in cells]
            if not ks:
                continue
            per_kernel = [c["speedup"] for _, c in ks if c["speedup"] is not None]
            total_runs = sum(c["n"] for _, c in ks)
            overall.append({
                "method": m,
                "budget": b,
                "kernels": len(ks),
                "runs": total_runs,
                "correct_rate": sum(c["correct"] for _, c in ks) / total_runs if total_runs else None,
                "geomean_speedup": geomean(per_kernel),
                "geomean_ci": bootstrap_ci(per_kernel),
                "faster_rate": sum(1 for s in per_kernel if s > 1.0) / len(ks),
                "mean_oracle_fraction": _mean(c["oracle_fraction"] for _, c in ks),
                "mean_best_known_fraction": _mean(c["best_known_fraction"] for _, c in ks),
                "median_evals_to_95": _median(c["evals_to_95"] for _, c in ks),
                "median_seconds_to_95": _median(c["seconds_to_95"] for _, c in ks),
                "gpu_seconds": sum(c["gpu_seconds"] for _, c in ks),
                "mean_profiling_overhead": _mean(r.get("profiling_overhead") for r in rows
                                                 if r["method"] == m and r.get("budget") == b),
            })
    oracle = {}
    for k in kernels:
        o = [r for r in rows if r["kernel"] == k and r["method"] == ORACLE]
        if o:
            r = o[-1]
            oracle[k] = {"speedup": r.get("speedup") if r.get("correct") else None, "ci": r.get("speedup_ci"),
                         "evaluations": r.get("evaluations"), "seconds": r.get("seconds"), "correct": r.get("correct")}
    phases_missing = sorted({p for r in rows for p in (r.get("phases_missing") or [])})
    return {"gpu": gpu, "kernels": kernels, "methods": methods, "budgets": budgets, "overall": overall,
            "cells": cells, "oracle": oracle, "phases_missing": phases_missing}


def _suite_order(module: str) -> tuple[int, str]:
    try:
        names = [e.module for e in load_suite().SUITE]
        return (names.index(module), module)
    except (ValueError, Exception):
        return (10**6, module)


# --------------------------------------------------------------------------- report writers


def _fmt(x: Any, spec: str = ".2f", suffix: str = "") -> str:
    return "–" if not _num(x) else f"{x:{spec}}{suffix}"


def _fmt_ci(ci: Any) -> str:
    if not ci or not all(_num(v) for v in ci):
        return ""
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text).strip("_").lower() or "gpu"


def write_markdown(summary_by_gpu: list[dict[str, Any]], path: Path, synthetic_note: Optional[str] = None) -> None:
    lines = ["# KernelBand benchmark results", ""]
    if synthetic_note:
        lines += [f"> {synthetic_note}", ""]
    lines += [
        "Speedups are delivered speedups: the session's paired re-measurement (original vs. winner, "
        "interleaved) when it reported `improved`, else 1.0; with its 95% CI for one seed, or a "
        "bootstrap CI over seeds. `correct`: the session "
        "ended without failing and the winner's harness output matches the suite's torch reference. "
        "Oracle: exhaustive search of the rules generator's space (single points, capped at the oracle's "
        "evaluation count below), so a search that chains rewrites can beat it. `oracle`: speedup / oracle "
        "speedup. `best-known`: speedup / the best speedup any correct run reached on that kernel (at most 1). "
        "`evals→95%` / `s→95%`: evaluations and seconds until the best speedup so far first reached "
        "95% of the run's final gain (1 + 0.95·(final − 1)). Geometric means are over correct runs.",
        "",
    ]
    for s in summary_by_gpu:
        lines += [f"## {s['gpu']}", "", "### By method and budget (over kernels)", ""]
        lines += ["| method | budget | kernels | correct | geomean speedup [95% CI] | faster than original | "
                  "oracle fraction | best-known fraction | evals→95% (median) | s→95% (median) | GPU s | profiling overhead |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for o in s["overall"]:
            lines.append(
                f"| {o['method']} | {o['budget']} | {o['kernels']} | {_fmt(o['correct_rate'] and 100 * o['correct_rate'], '.0f', '%')} "
                f"| {_fmt(o['geomean_speedup'], '.3f', 'x')}{_fmt_ci(o['geomean_ci'])} "
                f"| {_fmt(100 * o['faster_rate'], '.0f', '%')} | {_fmt(o['mean_oracle_fraction'], '.2f')} "
                f"| {_fmt(o.get('mean_best_known_fraction'), '.2f')} | {_fmt(o['median_evals_to_95'], '.1f')} | {_fmt(o['median_seconds_to_95'], '.1f')} "
                f"| {_fmt(o['gpu_seconds'], '.0f')} | {_fmt(o['mean_profiling_overhead'] and 100 * o['mean_profiling_overhead'], '.1f', '%')} |"
            )
        if s["oracle"]:
            lines += ["", "### Oracle (exhaustive) per kernel", "", "| kernel | speedup [95% CI] | evaluations | seconds |",
                      "| --- | --- | --- | --- |"]
            for k, o in s["oracle"].items():
                sp = _fmt(o["speedup"], ".3f", "x") if o.get("correct") else "failed"
                lines.append(f"| {k} | {sp}{_fmt_ci(o.get('ci'))} | {_fmt(o['evaluations'], 'd') if isinstance(o['evaluations'], int) else '–'} "
                             f"| {_fmt(o['seconds'], '.0f')} |")
        for b in s["budgets"]:
            lines += ["", f"### Per kernel, budget {b}", "",
                      "Each cell: speedup [CI] · oracle fraction · evaluations to 95% · correct runs / runs.", "",
                      "| kernel | " + " | ".join(s["methods"]) + " | oracle |",
                      "| --- | " + " | ".join("---" for _ in s["methods"]) + " | --- |"]
            for k in s["kernels"]:
                cells = []
                for m in s["methods"]:
                    c = s["cells"].get(f"{k}|{m}|{b}")
                    if not c:
                        cells.append("")
                        continue
                    cells.append(f"{_fmt(c['speedup'], '.2f', 'x')}{_fmt_ci(c['ci'])} · {_fmt(c['oracle_fraction'], '.2f')} "
                                 f"· {_fmt(c['evals_to_95'], '.0f')} · {c['correct']}/{c['n']}")
                o = s["oracle"].get(k)
                cells.append(_fmt(o["speedup"], ".2f", "x") if o else "")
                lines.append(f"| {k} | " + " | ".join(cells) + " |")
        if s["phases_missing"]:
            lines += ["", f"Per-phase timings missing from the session's Result: {', '.join(s['phases_missing'])} "
                          "(profiling overhead is shown only where the Result reports profiling time)."]
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_plots(summary: dict[str, Any], out_dir: Path, suffix: str = "", synthetic_note: Optional[str] = None) -> list[Path]:
    """speedup_vs_budget, oracle_fraction_vs_budget, best_known_fraction_vs_budget and per_kernel
    PNGs. [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("run.py: matplotlib is not installed; no plots (pip install matplotlib)", file=sys.stderr)
        return []
    written: list[Path] = []
    title_gpu = summary["gpu"] + (f"  ({synthetic_note})" if synthetic_note else "")
    by_mb = {(o["method"], o["budget"]): o for o in summary["overall"]}
    for metric, fname, ylabel in (
        ("geomean_speedup", "speedup_vs_budget", "geometric-mean speedup over kernels"),
        ("mean_oracle_fraction", "oracle_fraction_vs_budget", "mean fraction of the oracle's speedup"),
        ("mean_best_known_fraction", "best_known_fraction_vs_budget", "mean fraction of the best known speedup"),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for m in summary["methods"]:
            xs, ys, lo, hi = [], [], [], []
            for b in summary["budgets"]:
                o = by_mb.get((m, b))
                if o and _num(o.get(metric)):
                    xs.append(b)
                    ys.append(o[metric])
                    ci = o.get("geomean_ci") if metric == "geomean_speedup" else None
                    lo.append(o[metric] - ci[0] if ci else 0.0)
                    hi.append(ci[1] - o[metric] if ci else 0.0)
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=m)
        if metric == "geomean_speedup":
            oracle = geomean([o["speedup"] for o in summary["oracle"].values() if _num(o.get("speedup"))])
            if oracle:
                ax.axhline(oracle, linestyle="--", color="gray", label=f"oracle (exhaustive) {oracle:.2f}x")
            ax.axhline(1.0, linestyle=":", color="black", linewidth=0.8)
        else:
            ax.axhline(1.0, linestyle="--", color="gray",
                       label="oracle" if metric == "mean_oracle_fraction" else "best known")
        ax.set_xscale("log", base=2)
        ax.set_xticks(summary["budgets"] or [8, 16, 32])
        ax.set_xticklabels([str(b) for b in (summary["budgets"] or [8, 16, 32])])
        ax.set_xlabel("budget (evaluations)")
        ax.set_ylabel(ylabel)
        ax.set_title(title_gpu, fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        p = out_dir / f"{fname}{suffix}.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        written.append(p)

    # per-kernel bars at the largest budget
    kernels = summary["kernels"]
    if kernels and summary["budgets"]:
        b = max(summary["budgets"])
        series = [(m, [(summary["cells"].get(f"{k}|{m}|{b}") or {}).get("speedup") for k in kernels]) for m in summary["methods"]]
        series.append(("oracle", [(summary["oracle"].get(k) or {}).get("speedup") for k in kernels]))
        width = 0.8 / max(len(series), 1)
        fig, ax = plt.subplots(figsize=(max(8.0, 0.6 * len(kernels) + 3), 5))
        for i, (name, vals) in enumerate(series):
            xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(kernels))]
            ax.bar(xs, [v if _num(v) else 0.0 for v in vals], width=width, label=name)
        ax.axhline(1.0, linestyle=":", color="black", linewidth=0.8)
        ax.set_xticks(range(len(kernels)))
        ax.set_xticklabels(kernels, rotation=60, ha="right", fontsize=8)
        ax.set_ylabel(f"speedup at budget {b} (0 = failed / not run)")
        ax.set_title(title_gpu, fontsize=9)
        ax.legend(fontsize=7, ncol=3)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        p = out_dir / f"per_kernel{suffix}.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        written.append(p)
    return written


def write_report(out_dir: Path, runs: Optional[list[dict[str, Any]]] = None, plots: bool = True,
                 synthetic_note: Optional[str] = None) -> list[Path]:
    """report.md, summary.json and the plots from the results file (or the runs given)."""
    if runs is None:
        runs = load_results(out_dir / RESULTS_FILE)["runs"]
    refresh_derived(runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    gpus = sorted({r["gpu"] for r in runs}, key=lambda g: -sum(1 for r in runs if r["gpu"] == g))
    summaries = [summarize(runs, g) for g in gpus]
    written = [out_dir / "report.md", out_dir / "summary.json"]
    write_markdown(summaries, written[0], synthetic_note)
    payload = {"synthetic": synthetic_note, "summaries": summaries}
    written[1].write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")
    if plots:
        for i, s in enumerate(summaries):
            written += write_plots(s, out_dir, "" if i == 0 else f"_{_slug(s['gpu'])}", synthetic_note)
    return written


# --------------------------------------------------------------------------- throughput (part 4)


THROUGHPUT_MODES = (("throughput", {}), ("throughput-noprofile", {"profile_tier": 0}))


def throughput_row(entry: Any, budget: int, env: dict[str, Any], result: dict[str, Any], wall: float,
                   label: str = "throughput") -> dict[str, Any]:
    """Evaluations per minute and where the time goes, from one session's Result."""
    history = sorted(result.get("history") or [], key=lambda h: h.get("index", 0))
    evals = int(result.get("evaluations") or len(history) or 0)
    seconds = float(result.get("seconds") or wall)
    phases, missing = phase_seconds(result)
    ts = [float(h["t"]) for h in history if _num(h.get("t"))]
    first_t = ts[0] if ts else None
    steady = (len(ts) - 1) / (ts[-1] - ts[0]) * 60.0 if len(ts) >= 2 and ts[-1] > ts[0] else None
    accounted = sum(phases.get(p, 0.0) for p in PHASES)
    return {
        "kernel": entry.module,
        "method": label,
        "search": "random",
        "budget": budget,
        "seed": 0,
        "gpu": env["gpu"],
        "evaluations": evals,
        "seconds": round(seconds, 3),
        "evals_per_minute": round(evals / seconds * 60.0, 2) if seconds > 0 else None,
        "steady_evals_per_minute": round(steady, 2) if steady else None,
        "seconds_to_first_evaluation": round(first_t, 3) if first_t is not None else None,
        "phase_seconds": phases,
        "process_overhead_seconds": round(seconds - accounted, 3) if phases else None,
        "phases_missing": missing,
        "status": result.get("status"),
        "wall_seconds": round(wall, 3),
        "triton_version": env.get("triton_version"),
    }


def run_throughput(out_dir: Path, env: dict[str, Any], kernels: list[Any], budget: int,
                   session_fn: Optional[SessionFn] = None, deadline: Optional[float] = None,
                   store: Optional[str] = None, verbose: bool = False,
                   session_options: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    session_fn = session_fn or run_session_adapter
    path = out_dir / THROUGHPUT_FILE
    data = load_results(path)
    done = {run_key(r) for r in data["runs"]}
    todo = [(e, label, opts) for e in kernels for label, opts in THROUGHPUT_MODES
            if (e.module, label, budget, 0, env["gpu"]) not in done]
    for e, label, opts in todo:
        if deadline is not None and deadline - time.monotonic() <= 0:
            print("run.py: time is up; throughput rows left for a later call", file=sys.stderr)
            break
        stop = threading.Event()
        timer = threading.Timer(max(deadline - time.monotonic(), 0.0), stop.set) if deadline is not None else None
        if timer:
            timer.daemon = True
            timer.start()
        task_fields = {"module_path": str(e.path), "source": e.path.read_text(encoding="utf-8"), "kernel": e.kernel,
                       "harness": e.harness, "device": "cpu" if env.get("interpreted") else "auto"}
        t0 = time.monotonic()
        try:
            with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
                result = session_fn(task_fields, "random", budget, 0, stop, store or str(Path(tmp) / "kernelband.db"),
                                    verbose=verbose, **{**(session_options or {}), **opts})
        except Exception as ex:
            if stop.is_set():
                break
            result = {"status": "error", "message": f"{type(ex).__name__}: {ex}"}
        finally:
            if timer:
                timer.cancel()
        if stop.is_set() or result.get("status") == "cancelled":
            break
        data["runs"].append(throughput_row(e, budget, env, result, time.monotonic() - t0, label))
        save_throughput(path, data)
    write_throughput_markdown(data["runs"], out_dir / "throughput.md")
    return data["runs"]


def save_throughput(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_throughput_markdown(rows: list[dict[str, Any]], path: Path) -> None:
    lines = ["# Evaluation throughput", "",
             "One `random` session per kernel and mode: `throughput` profiles each correct candidate as a "
             "session does by default (profile_tier 2), `throughput-noprofile` does not (profile_tier 0). "
             "evals/min = evaluations / session seconds; steady = between the first and last evaluation "
             "(worker start, baseline and device facts excluded). Profiling overhead = the share of the steady "
             "time per evaluation that profiling adds (from the two modes).", "",
             "| gpu | kernel | mode | budget | evaluations | seconds | evals/min | steady evals/min | s to 1st eval | "
             + " | ".join(PHASES) + " | process overhead | profiling overhead |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | " + " | ".join("---" for _ in PHASES) + " | --- | --- |"]
    missing: set[str] = set()
    rate = {(r["gpu"], r["kernel"], r["method"], r["budget"]): r.get("steady_evals_per_minute") for r in rows}
    for r in rows:
        ph = r.get("phase_seconds") or {}
        missing |= set(r.get("phases_missing") or [])
        overhead = None
        with_p = rate.get((r["gpu"], r["kernel"], "throughput", r["budget"]))
        without = rate.get((r["gpu"], r["kernel"], "throughput-noprofile", r["budget"]))
        if r["method"] == "throughput" and _num(with_p) and _num(without) and without:
            overhead = 1.0 - with_p / without  # (1/with - 1/without) / (1/with)
        lines.append(f"| {r['gpu']} | {r['kernel']} | {r['method']} | {r['budget']} | {r.get('evaluations')} | {_fmt(r.get('seconds'), '.1f')} "
                     f"| {_fmt(r.get('evals_per_minute'), '.1f')} | {_fmt(r.get('steady_evals_per_minute'), '.1f')} "
                     f"| {_fmt(r.get('seconds_to_first_evaluation'), '.1f')} | "
                     + " | ".join(_fmt(ph.get(p), ".1f") for p in PHASES)
                     + f" | {_fmt(r.get('process_overhead_seconds'), '.1f')} | {_fmt(overhead and 100 * overhead, '.0f', '%')} |")
    if missing:
        lines += ["", f"Not reported by the session's Result (so not broken down here): {', '.join(sorted(missing))}. "
                      "Add per-phase seconds to the Result (e.g. `phase_seconds: {compile, correctness, timing, profile}`) "
                      "to fill these columns; process overhead is then seconds minus their sum."]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- suite check


def check_suite(out_dir: Path, entries: list[Any], env: dict[str, Any]) -> list[dict[str, Any]]:
    """Every suite kernel at its real size: harness vs torch reference (seed 0) and the
    kernel-only time of its launches (captured, replayed under do_bench on a GPU).
    Writes suite_check.json and suite_check.md."""
    import torch

    from kernelband.worker.capture import recording, replay_all

    suite = load_suite()
    rows = []
    for e in entries:
        t0 = time.monotonic()
        row: dict[str, Any] = {"kernel": e.module, "gpu": env["gpu"], "category": e.category, "dtype": e.dtype}
        try:
            mod = load_module(e.path, f"kb_check_{e.module}")
            torch.manual_seed(0)
            with recording() as rec:
                out = getattr(mod, e.harness)()
            torch.manual_seed(0)
            problems = suite.compare(out, getattr(mod, e.reference)())
            launches = list(rec.launches)
            if not env.get("interpreted"):
                import triton.testing

                torch.cuda.synchronize()
                ms = triton.testing.do_bench(lambda launches=launches: replay_all(launches), warmup=25, rep=200)
            else:
                t1 = time.perf_counter()
                replay_all(launches)
                ms = (time.perf_counter() - t1) * 1e3
            row.update(correct=not problems, problems=problems[:3], time_ms=round(ms, 4), launches=len(launches),
                       clock="cpu-interpreter" if env.get("interpreted") else "cuda-events")
            del out
        except Exception as ex:
            row.update(correct=False, error=f"{type(ex).__name__}: {ex}"[:500])
        row["seconds"] = round(time.monotonic() - t0, 2)
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "suite_check.json").write_text(json.dumps({"runs": rows}, indent=1) + "\n", encoding="utf-8")
    lines = [f"# Suite check on {env['gpu']} (triton {env.get('triton_version')}, torch {env.get('torch_version')})", "",
             "| kernel | category | dtype | matches reference | kernel time (ms) | launches |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ok = "yes" if r.get("correct") else ("; ".join(r.get("problems") or []) or r.get("error", "no"))
        lines.append(f"| {r['kernel']} | {r['category']} | {r['dtype']} | {ok} | {_fmt(r.get('time_ms'), '.4f')} "
                     f"| {r.get('launches', '–')} |")
    (out_dir / "suite_check.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


# --------------------------------------------------------------------------- CLI


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", default="all", help="comma-separated suite modules or kernel names (default: all)")
    p.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, from {', '.join(METHODS)}")
    p.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="comma-separated evaluation budgets")
    p.add_argument("--seeds", default="0", help="comma-separated session seeds")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="results folder (default benchmarks/results)")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="stop cleanly and save when the time is up (an in-flight run is dropped and redone later)")
    p.add_argument("--no-oracle", action="store_true", help="skip the exhaustive oracle runs")
    p.add_argument("--exhaustive-cap", type=int, default=EXHAUSTIVE_CAP, help="evaluation cap for the exhaustive oracle")
    p.add_argument("--oracle-mode", choices=("chunked", "session"), default="chunked",
                   help="chunked: evaluate the rules space point by point with a checkpoint, so an oracle longer "
                        "than one device call finishes over several (default); session: run_session(search='exhaustive')")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="cpu = Triton interpreter (smoke runs only; times are CPU times)")
    p.add_argument("--allow-cpu", action="store_true", help="with --device auto and no GPU, run on the interpreter anyway")
    p.add_argument("--no-verify", action="store_true", help="skip the winner-vs-torch-reference check")
    p.add_argument("--retry-errors", action="store_true", help="run again the rows that ended in an exception")
    p.add_argument("--store", default=None, help="share one KernelBand store across runs (default: a fresh one per run)")
    p.add_argument("--allow-weak-harness", action="store_true",
                   help="pass allow_weak_harness=True to the sessions (go on when the weak-harness check fires)")
    p.add_argument("--throughput", action="store_true", help="measure evaluations per minute instead (part 4)")
    p.add_argument("--throughput-kernels", default="add_relu_fp16,matmul_fp16", help="a small and a large kernel")
    p.add_argument("--throughput-budget", type=int, default=16)
    p.add_argument("--check-suite", action="store_true",
                   help="only run every suite harness at full size against its reference and time its kernel")
    p.add_argument("--report-only", action="store_true", help="only rebuild report.md, summary.json and the plots")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--list", action="store_true", help="print the suite and the runs still to do, then exit")
    p.add_argument("-v", "--verbose", action="store_true", help="print session events")
    args = p.parse_args(argv)
    bad = [m for m in _csv(args.methods) if m not in ALL_METHODS]
    if bad:
        p.error(f"unknown method(s) {', '.join(bad)}; choose from {', '.join(ALL_METHODS)}")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    t_start = time.monotonic()
    deadline = t_start + 60.0 * args.max_minutes if args.max_minutes else None
    out = Path(args.out).resolve()
    suite = load_suite()

    if args.report_only:
        for p in write_report(out, plots=not args.no_plots):
            print(p)
        return 0

    entries = select_entries(suite, args.kernels)
    methods = _csv(args.methods)
    budgets = [int(b) for b in _csv(args.budgets)]
    seeds = [int(s) for s in _csv(args.seeds)]
    oracle = ORACLE in methods or not args.no_oracle
    plan = plan_runs(entries, [m for m in methods if m != ORACLE], budgets, seeds, oracle)

    if args.list:
        data = load_results(out / RESULTS_FILE)
        done = {run_key(r)[:4] for r in data["runs"]}
        print(f"{len(suite.SUITE)} suite kernels:")
        for e in suite.SUITE:
            print(f"  {e.module:22s} {e.kernel:22s} {e.harness:24s} {e.category:15s} {e.dtype}")
        todo = [(e.module, m, b, s) for e, m, b, s in plan if (e.module, m, b, s) not in done]
        print(f"{len(plan)} planned runs, {len(plan) - len(todo)} done on some GPU, {len(todo)} to do")
        return 0

    env = detect_environment(args.device)
    if env["interpreted"] and args.device == "auto" and not args.allow_cpu:
        print("run.py: no CUDA device; the benchmark is meant for a GPU. Use --device cpu (or --allow-cpu) "
              "for an interpreter smoke run.", file=sys.stderr)
        return 2
    print(f"run.py: {env['gpu']}, triton {env.get('triton_version')}, torch {env.get('torch_version')}", file=sys.stderr)

    if args.check_suite:
        rows = check_suite(out, entries, env)
        print(out / "suite_check.md")
        return 0 if all(r.get("correct") for r in rows) else 1

    if args.throughput:
        ks = select_entries(suite, args.throughput_kernels)
        run_throughput(out, env, ks, args.throughput_budget, deadline=deadline, store=args.store, verbose=args.verbose,
                       session_options={"allow_weak_harness": True} if args.allow_weak_harness else None)
        print(out / "throughput.md")
        return 0

    runner = Runner(out, env, deadline=deadline, verify=not args.no_verify, retry_errors=args.retry_errors,
                    store=args.store, verbose=args.verbose, exhaustive_cap=args.exhaustive_cap,
                    oracle_mode=args.oracle_mode,
                    session_options={"allow_weak_harness": True} if args.allow_weak_harness else None)
    counts = runner.run_all(plan)
    for p in write_report(out, plots=not args.no_plots):
        print(p)
    n_err = sum(1 for r in runner.data["runs"] if r.get("error") and r["gpu"] == env["gpu"])
    print(f"run.py: {counts['ran']} ran ({counts['errors']} with errors), {counts['done_before']} already done, "
          f"{counts['left']} left; {time.monotonic() - t_start:.0f}s"
          + (f"; {n_err} rows on this GPU ended in an exception (--retry-errors runs them again)" if n_err else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``kernelband optimize FILE --kernel NAME``: run a budgeted KernelBand session.

"improved" needs the paired CI's lower bound above --min-speedup (kernelband/verdict.py).
Under the Triton interpreter (no GPU) the best correct variant is reported as
"verified_correct": correct, but its speed cannot be measured without a GPU; --apply does
not write it unless --cpu-tuning asks to rank and apply by CPU time.

Exit codes: 0 a verified speedup was found, 1 the session ran but found none (including
verified_correct and a worker lost mid-search: the best verified so far is reported),
2 the job could not run (bad usage, unreadable file, unusable harness).
"""

from __future__ import annotations

import argparse
import codecs
import os
import sys
import threading
from pathlib import Path
from typing import Any

from ..deps import MissingDependency, require
from ..evaluate import SetupError
from ..events import EventEmitter, JobError, jsonl_sink
from ..model import Result, ResultStatus
from ..redact import one_line
from ..options import OPTIMIZE, add_arguments, limit
from ..session import Budget, SessionConfig, run_session
from ..store import Store
from ..worker.client import WorkerError
from .common import (
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VERDICT,
    UsageError,
    add_task_arguments,
    build_task,
    print_json,
    stop_on_signals,
)
from .executor_args import executor_from_args
from .progress import ProgressBar


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "optimize",
        help="search for a faster verified variant of a kernel",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_task_arguments(p)
    add_arguments(p, OPTIMIZE)  # budget, generator, search, strategies, verdict...: kernelband/options.py
    p.add_argument("--no-store", action="store_true", help="do not read or write .kernelband/ in the workspace")
    p.add_argument("--events", choices=("jsonl",), help="write typed JSON-lines events to stdout (for editors)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--diff", action="store_true", help="print the winning diff")
    out.add_argument(
        "--apply", action="store_true", help="write the winner into FILE if FILE is unchanged since the start"
    )
    p.set_defaults(func=run)


def _config(args: argparse.Namespace) -> SessionConfig:
    if args.generator == "openai":  # before any work: a missing package is a usage error, not a traceback later
        try:
            require("openai", "the openai generator", "pip install openai")
        except MissingDependency as e:
            raise UsageError(str(e)) from None
    options: dict[str, Any] = {}
    for name in ("model", "base_url", "temperature"):
        if getattr(args, name) not in (None, ""):
            options[name] = getattr(args, name)
    options["timeout"] = args.llm_timeout
    # 0 = no limit, for every budget (kernelband/options.py)
    budget = Budget(
        evaluations=limit(args.budget),
        seconds=limit(args.seconds),
        tokens=limit(args.tokens),
        dollars=limit(args.dollars),
    )
    try:
        budget.validate()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return SessionConfig(
        search=args.search,
        generator=args.generator,
        budget=budget,
        seed=args.seed,
        generator_options=options,
        strategies=args.strategies or None,
        profile_tier=args.profile_tier,
        paired_rounds=args.rounds,
        min_speedup=args.min_speedup,
        cpu_tuning=args.cpu_tuning,
        allow_weak_harness=args.allow_weak_harness,
    )


def _prestart_judge(args: argparse.Namespace, device: str) -> None:
    """Start the one judge of a local single-GPU (or interpreter) session now: its imports
    overlap the rest of the set-up."""
    if (getattr(args, "executor", "local") or "local") != "local" or (getattr(args, "workers", 0) or 0) > 1:
        return
    if device == "auto":
        from ..executor.local import visible_gpus

        if len(visible_gpus()) > 1:  # a judge per GPU, each pinned: started by the session
            return
    from ..worker.client import prestart

    prestart(device)


def run(args: argparse.Namespace) -> int:
    emitter = EventEmitter()
    if args.events == "jsonl":
        emitter.add_sink(jsonl_sink(sys.stdout))
    try:
        task, _ = build_task(args)
        _prestart_judge(args, task.device)
        config = _config(args)
        executor = executor_from_args(args)
    except UsageError as e:
        if args.events == "jsonl":
            emitter.emit(JobError(message=str(e), kind="usage"))
        raise
    if not args.json and args.events is None:
        emitter.add_sink(ProgressBar(sys.stderr, total=config.budget.evaluations))
    stop = threading.Event()
    stop_on_signals(stop, "the current evaluation")
    store = None if args.no_store else Store.for_file(task.module_path)
    try:
        result = run_session(task, config, emitter, store, stop, executor=executor)
    except (SetupError, ValueError) as e:
        emitter.emit(JobError(message=str(e), kind="setup"))
        print(f"kernelband: {one_line(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except WorkerError as e:  # the session handles the known cases; never a traceback for the rest
        emitter.emit(JobError(message=f"the evaluation worker failed ({e.kind}): {e}", kind="worker"))
        print(f"kernelband: the evaluation worker failed ({e.kind}): {one_line(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        executor.close()
        if store:
            store.close()
    if args.apply:
        _apply_result(args, task, result)
    if args.events == "jsonl":
        pass  # the result event already carried everything
    elif args.json:
        print_json(result.to_dict())
    else:
        _print_summary(result, show_diff=args.diff)
    return EXIT_OK if result.status == ResultStatus.IMPROVED else EXIT_VERDICT


def _apply_result(args: argparse.Namespace, task: Any, result: Result) -> None:
    """--apply writes only an applicable verdict: improved on a GPU, or with --cpu-tuning."""
    if result.status == ResultStatus.VERIFIED_CORRECT:
        note = (
            "not applied: the variant is correct, but its speed cannot be measured without a GPU; "
            "pass --cpu-tuning to tune and apply by CPU-interpreter time"
        )
    elif result.status == ResultStatus.IMPROVED and result.applicable:
        result.applied, note = _apply(task.module_path, task.source, result.best_source)
    else:
        return
    print(f"kernelband: {note}", file=sys.stderr)


def _apply(path: str, started_from: str, new_source: str) -> tuple[bool, str]:
    try:
        raw = Path(path).read_bytes()
        current = raw.decode("utf-8-sig")  # as read_module read it
    except (OSError, UnicodeDecodeError) as e:
        return False, f"not applied: cannot read {path} ({e})"
    if current != started_from:
        return False, f"not applied: {path} changed since the session started; use --diff and apply by hand"
    tmp = f"{path}.kernelband.tmp"
    Path(tmp).write_text(new_source, encoding="utf-8-sig" if raw.startswith(codecs.BOM_UTF8) else "utf-8")
    os.replace(tmp, path)  # atomic: never a half-written file
    return True, f"applied the winning variant to {path}"


def _print_summary(r: Result, show_diff: bool) -> None:
    print(f"{r.kernel}: {r.status}: {r.message}")
    if r.status == ResultStatus.VERIFIED_CORRECT:
        print(f"  {r.evaluations} evaluations in {r.seconds:.1f} s under the Triton interpreter; no speed claim")
    elif r.paired_rounds and r.speedup_ci and r.speedup is not None:
        # both times from the interleaved rounds, and original / best == the speedup printed
        clock = "CPU time under the Triton interpreter, not GPU time" if r.interpreted else f"GPU time on {r.gpu}"
        lo, hi = r.speedup_ci
        print(
            f"  original {r.baseline_ms:.4g} ms -> best {r.best_ms:.4g} ms "
            f"({r.paired_rounds} interleaved rounds; {clock})"
        )
        print(
            f"  speedup {r.speedup:.3f}x (95% CI {lo:.3f}-{hi:.3f}); {r.evaluations} evaluations in {r.seconds:.1f} s"
        )
    else:
        print(f"  {r.evaluations} evaluations in {r.seconds:.1f} s")
    if r.strategy_path:
        print(f"  path: {' -> '.join(r.strategy_path)}")
    for w in r.warnings:
        print(f"  warning: {w}")
    diff = r.diff or r.unverified_diff or ""
    if show_diff and diff:
        print()
        print(diff, end="")
    elif r.diff and not r.applied:
        print("  (--diff shows the change" + (", --apply writes it)" if r.applicable else ")"))

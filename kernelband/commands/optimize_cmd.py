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
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from ..evaluate import SetupError
from ..events import Event, EventEmitter, jsonl_sink
from ..redact import clean
from ..session import DEFAULT_LLM_TIMEOUT_S, SEARCH_NAMES, Budget, SessionConfig, run_session
from ..store import Store
from ..strategies import STRATEGY_NAMES
from ..verdict import DEFAULT_MIN_SPEEDUP, IMPROVED, VERIFIED_CORRECT
from ..worker.client import WorkerError
from .common import EXIT_OK, EXIT_USAGE, EXIT_VERDICT, UsageError, add_task_arguments, build_task, print_json
from .executor_args import add_executor_arguments, executor_from_args
from .progress import ProgressBar


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("optimize", help="search for a faster verified variant of a kernel",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_task_arguments(p)
    p.add_argument("--budget", type=int, default=16, help="evaluations (default 16; 0 = no evaluation limit)")
    p.add_argument("--seconds", type=float, help="wall-clock budget in seconds")
    p.add_argument("--tokens", type=int, help="LLM token budget")
    p.add_argument("--dollars", type=float, help="LLM cost budget in US dollars")
    p.add_argument("--generator", choices=("rules", "openai"), default="rules",
                   help="rules: offline rewrites of tunables (default); openai: an LLM through any OpenAI-compatible API")
    p.add_argument("--model", help="LLM model name (openai generator)")
    p.add_argument("--base-url", help="OpenAI-compatible base URL, e.g. http://localhost:11434/v1")
    p.add_argument("--temperature", type=float, help="LLM temperature")
    p.add_argument("--llm-timeout", type=float, default=DEFAULT_LLM_TIMEOUT_S,
                   help="seconds one LLM request may take (default: %(default)s); a timed-out request is retried "
                        "once, and an endpoint that never answers ends the search")
    p.add_argument("--search", choices=SEARCH_NAMES, default="kernelband", help="search policy (default kernelband = v1)")
    p.add_argument("--strategies", help=f"comma-separated subset of: {', '.join(STRATEGY_NAMES)}")
    p.add_argument("--seed", type=int, default=0,
                   help="random seed of the search and the rules generator: same seed, same candidates (default: %(default)s)")
    p.add_argument("--profile-tier", type=int, choices=(0, 1, 2, 3), default=2,
                   help="profile each correct candidate up to this tier for the bandit's features (default 2)")
    p.add_argument("--rounds", type=int, default=10,
                   help="interleaved A/B rounds for the final speedup's CI (default: %(default)s)")
    p.add_argument("--min-speedup", type=float, default=DEFAULT_MIN_SPEEDUP,
                   help="'improved' only when the CI's lower bound is above this (default: %(default)s, the measured "
                        "noise floor; see README)")
    p.add_argument("--cpu-tuning", action="store_true",
                   help="under the interpreter (no GPU), rank, report and --apply by CPU time anyway (no GPU claim)")
    p.add_argument("--allow-weak-harness", action="store_true", help="search even if the harness cannot catch a broken kernel")
    p.add_argument("--no-store", action="store_true", help="do not read or write .kernelband/ in the workspace")
    p.add_argument("--events", choices=("jsonl",), help="write typed JSON-lines events to stdout (for editors)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--diff", action="store_true", help="print the winning diff")
    out.add_argument("--apply", action="store_true", help="write the winner into FILE if FILE is unchanged since the start")
    add_executor_arguments(p)  # --executor/--workers/--ray-address (issue 15)
    p.set_defaults(func=run)


def _config(args: argparse.Namespace) -> SessionConfig:
    strategies = None
    if args.strategies:
        strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
        unknown = [s for s in strategies if s not in STRATEGY_NAMES]
        if unknown:
            raise UsageError(f"unknown strategies: {', '.join(unknown)} (known: {', '.join(STRATEGY_NAMES)})")
    options: dict[str, Any] = {}
    for name in ("model", "base_url", "temperature"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    if args.llm_timeout <= 0:
        raise UsageError("--llm-timeout must be positive")
    options["timeout"] = args.llm_timeout
    budget = Budget(evaluations=args.budget or None, seconds=args.seconds, tokens=args.tokens, dollars=args.dollars)
    try:
        budget.validate()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return SessionConfig(search=args.search, generator=args.generator, budget=budget, seed=args.seed,
                         generator_options=options, strategies=strategies, profile_tier=args.profile_tier,
                         paired_rounds=max(args.rounds, 2), min_speedup=args.min_speedup,
                         cpu_tuning=args.cpu_tuning, allow_weak_harness=args.allow_weak_harness)


def _install_stop_handlers(stop: threading.Event) -> None:
    """First SIGINT/SIGTERM: finish the current evaluation and report the best so far.
    A second SIGINT aborts."""

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        print("\nkernelband: stopping after the current evaluation (Ctrl-C again to abort)", file=sys.stderr)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def run(args: argparse.Namespace) -> int:
    emitter = EventEmitter()
    if args.events == "jsonl":
        emitter.add_sink(jsonl_sink(sys.stdout))
    try:
        task, _ = build_task(args)
        config = _config(args)
        executor = executor_from_args(args)
    except UsageError as e:
        if args.events == "jsonl":
            emitter.emit("error", message=str(e), kind="usage")
        raise
    if not args.json and args.events is None:
        emitter.add_sink(ProgressBar(sys.stderr, total=config.budget.evaluations))
    stop = threading.Event()
    _install_stop_handlers(stop)
    store = None if args.no_store else Store.for_file(task.module_path)
    try:
        result = run_session(task, config, emitter, store, stop, executor=executor)
    except (SetupError, ValueError) as e:
        emitter.emit("error", message=str(e), kind="setup")
        print(f"kernelband: {_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except WorkerError as e:  # the session handles the known cases; never a traceback for the rest
        emitter.emit("error", message=f"the evaluation worker failed ({e.kind}): {e}", kind="worker")
        print(f"kernelband: the evaluation worker failed ({e.kind}): {_line(e)}", file=sys.stderr)
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
        print_json({k: v for k, v in result.items()})
    else:
        _print_summary(result, show_diff=args.diff)
    return EXIT_OK if result["status"] == "improved" else EXIT_VERDICT


def _line(e: BaseException) -> str:
    return " | ".join(x.strip() for x in clean(str(e)).splitlines() if x.strip())


def _apply_result(args: argparse.Namespace, task: Any, result: dict[str, Any]) -> None:
    """--apply writes only an applicable verdict: improved on a GPU, or with --cpu-tuning."""
    if result["status"] == VERIFIED_CORRECT:
        note = ("not applied: the variant is correct, but its speed cannot be measured without a GPU; "
                "pass --cpu-tuning to tune and apply by CPU-interpreter time")
    elif result["status"] == IMPROVED and result.get("applicable", True):
        result["applied"], note = _apply(task.module_path, task.source, result["best_source"])
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


def _print_summary(r: dict[str, Any], show_diff: bool) -> None:
    print(f"{r['kernel']}: {r['status']}: {r['message']}")
    if r["status"] == VERIFIED_CORRECT:
        print(f"  {r['evaluations']} evaluations in {r['seconds']:.1f} s under the Triton interpreter; no speed claim")
    elif r.get("paired_rounds"):
        # both times from the interleaved rounds, and original / best == the speedup printed
        clock = "CPU time under the Triton interpreter, not GPU time" if r["interpreted"] else f"GPU time on {r['gpu']}"
        lo, hi = r["speedup_ci"]
        print(f"  original {r['baseline_ms']:.4g} ms -> best {r['best_ms']:.4g} ms "
              f"({r['paired_rounds']} interleaved rounds; {clock})")
        print(f"  speedup {r['speedup']:.3f}x (95% CI {lo:.3f}-{hi:.3f}); {r['evaluations']} evaluations in "
              f"{r['seconds']:.1f} s")
    else:
        print(f"  {r['evaluations']} evaluations in {r['seconds']:.1f} s")
    if r["strategy_path"]:
        print(f"  path: {' -> '.join(r['strategy_path'])}")
    for w in r.get("warnings", []):
        print(f"  warning: {w}")
    diff = r["diff"] or r.get("unverified_diff", "")
    if show_diff and diff:
        print()
        print(diff, end="")
    elif r["diff"] and not r.get("applied"):
        print("  (--diff shows the change" + (", --apply writes it)" if r.get("applicable") else ")"))

"""``kernelband optimize-all PATH``: optimize every kernel with a harness under PATH.

One session per kernel (the `optimize` search and verdict), scheduled over the workers
(--executor, --workers: one kernel per GPU at a time). A progress line per kernel on
stderr, a summary table (or --json) on stdout. Resumable: a kernel whose result is stored
for the exact source, harness and settings is not run again (--force runs it anyway).
Your files are never modified: each verified edit is written as a patch file into --out
(improved ones at the top, correct-only ones from the CPU interpreter under
correct-only/); apply one with `git apply` or `patch -p1` from PATH.

Exit codes: 0 every kernel with a harness ran, 1 some kernel could not be run,
2 bad usage (one line on stderr), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ..json_types import JsonObject
from ..options import OPTIMIZE, add_arguments, add_task_arguments
from .common import EXIT_OK, EXIT_VERDICT, UsageError, print_json, stop_on_signals
from .executor_args import executor_from_args

if TYPE_CHECKING:
    from ..session_config import SessionConfig


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "optimize-all",
        help="optimize every kernel with a harness under a directory (patch files out)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", help="directory (or one file) to scan for @triton.jit kernels with a harness")
    p.add_argument(
        "--out",
        default="kernelband-patches",
        help="directory for the patch files (default: %(default)s; created if needed)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--force", action="store_true", help="run every kernel again, even those with a stored result")
    p.add_argument("--no-store", action="store_true", help="do not read or write .kernelband/ (nothing to resume)")
    # the optimize command's session flags: the same names, defaults, ranges and help, from
    # kernelband/options.py (--device, --seeds, --timeout, the budget, generator, search,
    # verdict and executor options); a budget is per kernel (one session each)
    add_task_arguments(p)
    add_arguments(p, OPTIMIZE)
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace, config: SessionConfig) -> JsonObject:
    """What a stored result must match to be reused (besides the texts and the task)."""
    d = config.to_dict()
    d["generator_options"] = {k: v for k, v in config.generator_options.items() if k != "api_key"}
    d["executor"] = args.executor
    return d


def run(args: argparse.Namespace) -> int:
    from ..batch import BatchRun, discover, summary_table
    from ..store import Store, find_workspace
    from .optimize_cmd import _config

    root = Path(args.path)
    if not root.exists():
        raise UsageError(f"{args.path}: no such file or directory")
    if args.seeds < 3:
        raise UsageError("--seeds must be at least 3")
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    if args.device.startswith("cuda:"):
        raise UsageError(
            "optimize-all spreads kernels over every GPU: use --device auto or cuda, and "
            "CUDA_VISIBLE_DEVICES to choose GPUs"
        )
    config = _config(args)
    out_dir = Path(args.out).resolve()
    jobs = discover(str(root), args.device, args.seeds, args.timeout, exclude=str(out_dir))
    if not jobs:
        raise UsageError(f"{args.path}: no @triton.jit kernels found")
    executor = executor_from_args(args)
    store_path = None if args.no_store else str(Store.for_workspace(find_workspace(root)).path)
    stop = threading.Event()
    stop_on_signals(stop, "the current evaluations")  # and no new kernel starts
    runnable = sum(1 for j in jobs if j.task is not None)
    print(
        f"kernelband: {len(jobs)} kernel(s) under {args.path}, {runnable} with a harness; patches into {out_dir}",
        file=sys.stderr,
        flush=True,
    )
    batch = BatchRun(
        jobs,
        executor,
        config,
        store_path,
        out_dir,
        _settings(args, config),
        device=args.device,
        on_progress=lambda line: print(line, file=sys.stderr, flush=True),
        stop=stop,
        force=args.force,
    )
    try:
        rows = batch.run()
    finally:
        executor.close()
    if args.json:
        print_json({"path": os.path.abspath(args.path), "out": str(out_dir), "kernels": [r.to_dict() for r in rows]})
    else:
        print(summary_table(rows))
    if stop.is_set():
        return 130
    return EXIT_VERDICT if any(r.status == "error" for r in rows) else EXIT_OK

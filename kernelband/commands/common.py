"""Helpers shared by the subcommands: input reading, kernel selection, exit codes."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from types import FrameType
from typing import Optional

from ..detect import DetectionResult, detect, read_source, strip_bom
from ..json_types import JsonValue
from ..model import KernelInfo, Task
from ..redact import clean, needs_scrub, scrub

EXIT_OK = 0
EXIT_VERDICT = 1
EXIT_USAGE = 2


def stop_on_signals(stop: threading.Event, current: str) -> None:
    """First SIGINT/SIGTERM sets ``stop``: what runs ends after ``current`` and reports the
    best so far. A second SIGINT aborts."""

    def handler(signum: int, frame: Optional[FrameType]) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        print(f"\nkernelband: stopping after {current} (Ctrl-C again to abort)", file=sys.stderr)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


class UsageError(Exception):
    """Bad usage or unreadable input: reported in one line, exit code 2."""


def read_module(path: str, stdin_source: bool = False) -> tuple[str, str]:
    """(absolute path, text). With stdin_source the text comes from standard input
    (the editor's unsaved buffer) while the path still locates imports and the store."""
    abspath = os.path.abspath(path)
    if stdin_source:
        return abspath, strip_bom(sys.stdin.read())
    try:
        return abspath, read_source(abspath)  # utf-8 with or without a BOM, as Python reads it
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected a Python file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read ({e})") from None


def detect_or_fail(path: str, source: str, fork: bool = False) -> DetectionResult:
    """``fork``: see detect (only a single-threaded command with nothing else to do)."""
    result = detect(source, path, fork=fork)
    if result.error:
        raise UsageError(f"{path}:{result.error.line}:{result.error.col + 1}: does not parse: {result.error.message}")
    return result


def pick_kernel(result: DetectionResult, path: str, name: Optional[str]) -> KernelInfo:
    if not result.kernels:
        raise UsageError(f"{path}: no @triton.jit kernels found")
    if name is None:
        if len(result.kernels) == 1:
            return result.kernels[0]
        names = ", ".join(k.name for k in result.kernels)
        raise UsageError(f"{path}: several kernels ({names}); choose one with --kernel")
    k = result.kernel(name)
    if k is None:
        names = ", ".join(k.name for k in result.kernels)
        raise UsageError(f"{path}: no kernel named {name!r} (found: {names})")
    return k


def print_json(obj: JsonValue, one_line_each: Optional[str] = None) -> None:
    """JSON on stdout, secrets redacted and messages capped (kernelband/redact.py).
    Indented; or, with ``one_line_each`` naming a list of ``obj``, that list one item a
    line (a 1,200-kernel ``list --json``: the indenting encoder is pure Python, 5x slower).
    The text of ``obj`` as it is, when it shows that ``scrub`` would change nothing
    (``needs_scrub``: walking 50,000 strings was a tenth of that listing); else of ``scrub(obj)``."""
    text = _json_text(obj, one_line_each)
    if needs_scrub(text):
        text = _json_text(scrub(obj), one_line_each)
    sys.stdout.write(text)


def _json_text(obj: JsonValue, one_line_each: Optional[str]) -> str:
    rows = obj.get(one_line_each) if one_line_each and isinstance(obj, dict) else None
    if not isinstance(obj, dict) or not isinstance(rows, (list, tuple)):  # a tuple: a list once scrubbed
        return json.dumps(obj, indent=2, default=str) + "\n"
    head = json.dumps({k: v for k, v in obj.items() if k != one_line_each}, default=str)
    items = ",\n".join(json.dumps(r, default=str) for r in rows)
    return f"{head[:-1]}{', ' if len(head) > 2 else ''}{json.dumps(one_line_each)}: [\n{items}\n]}}\n"


def add_task_arguments(p: argparse.ArgumentParser) -> None:
    """Options every job command shares (check, optimize, profile)."""
    p.add_argument("file", help="Python file with the kernel")
    p.add_argument("--kernel", "-k", help="kernel name (optional when the file has one kernel)")
    p.add_argument(
        "--harness",
        help="one harness function for both timing and correctness, or path/to/file.py:function "
        "(default: discovered: every bench_*/benchmark_*/harness_*/test_* that reaches the "
        "kernel checks correctness; a bench_* one times)",
    )
    p.add_argument("--timing-harness", help="which discovered harness is the timing workload (default: bench_* first)")
    from ..options import add_task_arguments as add_option_arguments  # here: `list` needs none of options.py

    add_option_arguments(p)  # --device, --seeds, --timeout: kernelband/options.py
    p.add_argument(
        "--stdin-source", action="store_true", help="read the module text from stdin (unsaved editor buffer)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def build_task(args: argparse.Namespace) -> tuple[Task, KernelInfo]:
    """Resolve file, kernel and harness into a Task, or raise UsageError saying why not."""
    from ..harness import find_harness

    path, source = read_module(args.file, getattr(args, "stdin_source", False))
    result = detect_or_fail(args.file, source)
    kernel = pick_kernel(result, args.file, args.kernel)
    choice = find_harness(
        path, source, kernel.name, explicit=args.harness, result=result, timing=getattr(args, "timing_harness", None)
    )
    if not choice.found:
        raise UsageError(f"{args.file}: no harness for {kernel.name}: {choice.reason}")
    task = Task(
        module_path=path,
        source=source,
        kernel=kernel.name,
        harness=choice.name or "",
        harness_path=choice.path,
        device=args.device,
        seeds=session_seeds(args.seeds),
        timeout_s=args.timeout,
        check_harnesses=list(choice.checks),
    )
    return task, kernel


def session_seeds(count: int) -> list[int]:
    """``count`` seeds for the correctness runs, drawn anew for each job: a variant cannot
    know which inputs it will be checked on. ``KERNELBAND_SEEDS=fixed`` gives 0, 1, 2...
    (to reproduce a run)."""
    import os
    import secrets

    if os.environ.get("KERNELBAND_SEEDS") == "fixed":
        return list(range(count))
    seeds: list[int] = []
    while len(seeds) < count:
        s = secrets.randbelow(1 << 31)
        if s not in seeds:
            seeds.append(s)
    return seeds


class StderrLog:
    """Progress notes for humans on stderr (never stdout: it may carry JSON)."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(clean(msg), file=sys.stderr, flush=True)

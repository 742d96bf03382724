"""``kernelband profile FILE --kernel NAME [--tier 1|2|3]``: where does the kernel's
time go? Tier 1: compile metadata and occupancy; tier 2 (default): time, bytes and
FLOPs against the device's measured peaks; tier 3: Nsight Compute counters.

A tier that cannot be had here (no compiled binary under the interpreter, no ncu,
no counter permission) is reported, once, and the others still are. The profile is
stored in the workspace's .kernelband/ for the editor's hover.

Exit codes: 0 profiled, 2 bad usage, or a kernel / harness / device that cannot be used.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from ..evaluate import Evaluator, SetupError
from ..session import job_workdir
from ..events import EventEmitter, JobError, Log, ProfileReady, Started, jsonl_sink
from ..harness import harness_hash
from ..profile.schema import DeviceFacts, Profile
from ..redact import clean
from ..store import ProfileKey, Store
from .common import EXIT_OK, EXIT_USAGE, StderrLog, UsageError, add_task_arguments, build_task, print_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile",
        help="profile a kernel in tiers and diagnose its bottleneck",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_task_arguments(p)
    p.add_argument(
        "--tier",
        type=int,
        choices=(1, 2, 3),
        default=2,
        help="1 static, 2 + timing/bytes/FLOPs (default), 3 + Nsight Compute counters",
    )
    p.add_argument("--events", choices=("jsonl",), help="write typed JSON-lines events to stdout (for editors)")
    p.add_argument(
        "--refresh", action="store_true", help="re-measure the device's peaks and re-run ncu (ignore caches)"
    )
    p.add_argument("--no-store", action="store_true", help="do not read or write .kernelband/ in the workspace")
    p.set_defaults(func=run)


def profile_task(task: Any, tier: int, store: Any = None, log: Any = None, refresh: bool = False) -> Profile:
    """Profile the task's original kernel at a tier (device facts cached in the store)."""
    from ..worker.counters import add_counters
    from ..profile.device import cached_or_measure

    log = log or (lambda msg: None)
    with job_workdir() as workdir, Evaluator(task, workdir=workdir) as evaluator:
        info = evaluator.start()
        if info.interpreted:
            log(f"device: {info.device_name}: times are CPU times; no GPU peaks, binaries or counters")
        else:

            def measure() -> DeviceFacts:
                log(f"measuring {info.device_name}'s copy bandwidth and matrix rates (once per device)...")
                return evaluator.device_facts()

            evaluator.facts = cached_or_measure(store, info.device_name, info.triton_version, measure, refresh=refresh)
        evaluator.prepare(time_it=False)
        profile = evaluator.profile(None, tier)
    if profile is None:
        raise SetupError("the worker returned no profile (kernelband.profile could not be imported there)")
    if tier >= 3 and not info.interpreted:
        log("collecting Nsight Compute counters...")
        profile = add_counters(
            profile, task, store=store, gpu=info.device_name, triton_version=info.triton_version, refresh=refresh
        )
    profile = replace(
        profile, file=task.module_path, harness=task.harness, gpu=info.device_name, triton_version=info.triton_version
    )
    if store is not None:
        store.put_profile(
            ProfileKey(task.source_hash, harness_hash(task), info.device_name, info.triton_version, task.kernel),
            profile,
            file=task.module_path,
        )
    return profile


def run(args: argparse.Namespace) -> int:
    from ..profile.ncu import announce_once
    from ..profile.render import render_table

    emitter = EventEmitter()
    events = args.events == "jsonl"
    if events:
        emitter.add_sink(jsonl_sink(sys.stdout))
    quiet = args.json or events
    log = StderrLog(quiet=quiet)
    try:
        task, _ = build_task(args)
    except UsageError as e:
        if events:
            emitter.emit(JobError(message=str(e), kind="usage"))
        raise
    if events:
        emitter.emit(Started(kernel=task.kernel, file=task.module_path, source_hash=task.source_hash, tier=args.tier))
    store = None if args.no_store else Store.for_file(task.module_path)
    try:
        profile = profile_task(task, args.tier, store, log=log, refresh=args.refresh)
    except SetupError as e:
        if events:
            emitter.emit(JobError(message=str(e), kind="setup"))
        print(f"kernelband: {' | '.join(x for x in clean(str(e)).splitlines() if x.strip())}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if store is not None:
            store.close()
    reason = profile.unavailable.get("counters")
    if args.tier >= 3 and reason and not profile.interpreted:
        if events:
            emitter.emit(Log(level="warning", message=f"counters unavailable: {reason}"))
        else:
            announce_once(reason, lambda m: print(f"kernelband: {m}", file=sys.stderr))
    if events:
        emitter.emit(ProfileReady(profile))
    elif args.json:
        print_json(profile.to_dict())
    else:
        print(render_table(profile))
    return EXIT_OK

"""``kernelband check FILE --kernel NAME --variant OTHER.py``: is a hand-written variant
correct, and how much faster is it? Exit 0 when it passes, 1 when it does not.

The original already ran cleanly in ``prepare``, so a failure of the interleaved
re-measurement (the variant stops passing, crashes or hangs there) is the variant's:
it is a failed verdict (exit 1, status timeout/crashed/runtime_error), not exit 2."""
from __future__ import annotations

import argparse

from ..evaluate import Evaluator, SetupError
from ..model import Status, Variant
from ..worker.client import WorkerError
from .common import EXIT_OK, EXIT_VERDICT, StderrLog, UsageError, add_task_arguments, build_task, print_json, read_module


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="evaluate a variant module against the original kernel")
    add_task_arguments(p)
    p.add_argument("--variant", required=True, help="the variant: a complete copy of the module with the kernel changed")
    p.add_argument("--rounds", type=int, default=10, help="interleaved A/B rounds for the speedup's confidence interval")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    task, _ = build_task(args)
    variant_source = read_module(args.variant)[1]
    if args.rounds < 2:
        raise UsageError("--rounds must be at least 2")
    log = StderrLog(quiet=args.json)
    out: dict = {"file": task.module_path, "kernel": task.kernel, "harness": task.harness, "variant": args.variant}
    with Evaluator(task) as evaluator:
        info = evaluator.start()
        log(f"device: {info.device_name}, triton {info.triton_version}")
        try:
            base = evaluator.prepare()
        except SetupError as e:
            raise UsageError(str(e)) from None
        out["interpreted"] = base.interpreted
        out["baseline_ms"] = base.timing.median_ms if base.timing else None
        out["clock"] = base.timing.clock if base.timing else None
        if base.weak_harness:
            log(f"warning: weak harness: {base.weak_reason}")
            out["weak_harness"] = base.weak_reason
        try:
            ev = evaluator.evaluate(Variant(variant_source, generator="user"))
        except SetupError as e:  # the worker could not be restarted
            raise UsageError(str(e)) from None
        out.update(status=ev.status.value, message=ev.message, errors=ev.errors.to_dict() if ev.errors else None,
                   variant_ms=ev.time_ms)
        if ev.ok:
            log("re-measuring original and variant interleaved...")
            _paired(evaluator, Variant(variant_source, generator="user"), args.rounds, out)
    if args.json:
        print_json(out)
    else:
        _print_human(out)
    return EXIT_OK if out["status"] == "ok" else EXIT_VERDICT


_PAIRED_FAILURE = {"timeout": Status.TIMEOUT, "crashed": Status.CRASHED, "error": Status.RUNTIME_ERROR}


def _paired(evaluator: Evaluator, variant: Variant, rounds: int, out: dict) -> None:
    """The speedup with its CI, or a failed verdict saying why it could not be measured."""
    try:
        paired = evaluator.paired_timing(variant, rounds=rounds)
    except (WorkerError, SetupError) as e:
        kind = e.kind if isinstance(e, WorkerError) else "crashed"
        first = (str(e).strip().splitlines() or [kind])[0]
        out.update(status=_PAIRED_FAILURE.get(kind, Status.RUNTIME_ERROR).value,
                   message=f"passed correctness, but the interleaved re-measurement failed ({kind}): {first}")
        StderrLog()(f"error: {out['message']}")
        return
    out.update(speedup=paired.speedup, speedup_ci=[paired.ci_low, paired.ci_high],
               paired_baseline_ms=paired.baseline_ms, paired_variant_ms=paired.variant_ms, rounds=paired.rounds)


def _print_human(out: dict) -> None:
    clock = "CPU time under the Triton interpreter, not GPU time" if out.get("interpreted") else "GPU time"
    print(f"{out['kernel']}: {out['status']}  {out['message']}")
    if out.get("baseline_ms") is not None:
        print(f"  original: {out['baseline_ms']:.4g} ms ({clock})")
    if out.get("speedup") is not None:
        lo, hi = out["speedup_ci"]
        print(f"  variant:  {out['paired_variant_ms']:.4g} ms; speedup {out['speedup']:.3f}x "
              f"(95% CI {lo:.3f}-{hi:.3f}, {out['rounds']} interleaved rounds)")

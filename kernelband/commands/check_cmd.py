"""``kernelband check FILE --kernel NAME --variant OTHER.py``: is a hand-written variant
correct, and is it faster?

The variant is screened, then checked against the original on every seed; a correct
variant and the original are then re-measured interleaved (A B A B ...) for a speedup
with a 95% confidence interval. The verdict follows the one rule optimize and the editor
use (kernelband/verdict.py): "improved" needs the CI's lower bound above --min-speedup.
Under the Triton interpreter (no GPU) a correct variant is "verified_correct": its speed
cannot be measured without a GPU, so nothing is re-measured and no speedup is printed,
unless --cpu-tuning asks for the CPU-time ratio as the verdict.

The original already ran cleanly in ``prepare``, so a failure of the interleaved
re-measurement (the variant stops passing, crashes or hangs there) is the variant's: a
failed verdict (exit 1, status timeout/crashed/runtime_error), not exit 2.

Exit codes: 0 the variant is correct (faster or not: see "verdict"), 1 it is not
(mismatch, rejected, crashed, timeout, or its re-measurement failed), 2 bad usage, or an
original / harness / device that cannot be used (one line on stderr).
"""
from __future__ import annotations

import argparse
from typing import Any

from ..evaluate import Evaluator, SetupError
from ..session import job_workdir
from ..model import Status, Variant
from ..options import CHECK, add_arguments
from ..verdict import NO_GPU_NOTE, consistent_times, decide_verdict
from ..worker.client import WorkerError
from .common import EXIT_OK, EXIT_VERDICT, StderrLog, UsageError, add_task_arguments, build_task, print_json, read_module


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="evaluate a variant module against the original kernel",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_task_arguments(p)
    p.add_argument("--variant", required=True, help="the variant: a complete copy of the module with the kernel changed")
    add_arguments(p, CHECK)  # --rounds, --min-speedup, --cpu-tuning: kernelband/options.py
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    task, _ = build_task(args)
    variant_source = read_module(args.variant)[1]
    log = StderrLog(quiet=args.json)
    out: dict[str, Any] = {"file": task.module_path, "kernel": task.kernel, "harness": task.harness,
                           "variant": args.variant}
    with job_workdir() as workdir, Evaluator(task, workdir=workdir) as evaluator:
        info = evaluator.start()
        log(f"device: {info.device_name}, triton {info.triton_version}")
        if not info.interpreted:  # the judge's roofline check needs the GPU's measured peaks
            from ..session_setup import device_facts

            evaluator.facts = device_facts(evaluator, None, info.device_name, info.triton_version) or {}
        try:
            base = evaluator.prepare()
        except SetupError as e:
            raise UsageError(str(e)) from None
        out.update(interpreted=base.interpreted, clock=base.timing.clock if base.timing else None,
                   speed_claim=not base.interpreted, paired=False)
        if base.weak_harness:
            log(f"warning: weak harness: {base.weak_reason}")
            out["weak_harness"] = base.weak_reason
        try:
            ev = evaluator.evaluate(Variant(variant_source, generator="user"))
        except SetupError as e:  # the worker could not be restarted
            raise UsageError(str(e)) from None
        out.update(status=ev.status.value, message=ev.message, errors=ev.errors.to_dict() if ev.errors else None)
        if ev.ok and base.interpreted and not args.cpu_tuning:
            out.update(verdict=decide_verdict(None, interpreted=True).status,
                       message=f"{ev.message + '; ' if ev.message else ''}correct; {NO_GPU_NOTE}")
        elif ev.ok:
            from ..verification import sanitizer_refusal

            refusal, report = sanitizer_refusal(evaluator, Variant(variant_source, generator="user"), log)
            out["sanitizer"] = report
            if refusal is not None:  # the same list as optimize's finalist: memory errors refuse it
                out.update(status=Status.MISMATCH.value, message=f"the variant {refusal}")
            else:
                log("re-measuring original and variant interleaved...")
                _paired(evaluator, Variant(variant_source, generator="user"), args, out)
    if args.json:
        print_json(out)
    else:
        _print_human(out)
    return EXIT_OK if out["status"] == "ok" else EXIT_VERDICT


_PAIRED_FAILURE = {"timeout": Status.TIMEOUT, "crashed": Status.CRASHED, "error": Status.RUNTIME_ERROR}


def _paired(evaluator: Evaluator, variant: Variant, args: argparse.Namespace, out: dict[str, Any]) -> None:
    """The speedup with its CI and verdict, or a failed verdict saying why it could not be measured."""
    try:
        paired = evaluator.paired_timing(variant, rounds=args.rounds)
    except (WorkerError, SetupError) as e:
        kind = e.kind if isinstance(e, WorkerError) else "crashed"
        first = (str(e).strip().splitlines() or [kind])[0]
        out.update(status=_PAIRED_FAILURE.get(kind, Status.RUNTIME_ERROR).value,
                   message=f"passed correctness, but the interleaved re-measurement failed ({kind}): {first}")
        StderrLog()(f"error: {out['message']}")
        return
    ci = (paired.ci_low, paired.ci_high)
    baseline_ms, variant_ms, noise = consistent_times(paired.baseline_ms, paired.variant_ms, paired.speedup, ci)
    verdict = decide_verdict(paired.ci_low, interpreted=bool(out.get("interpreted")), cpu_tuning=args.cpu_tuning,
                             min_speedup=args.min_speedup)
    # one pair of times, both from the interleaved rounds, consistent with the speedup beside them
    out.update(paired=True, baseline_ms=baseline_ms, variant_ms=variant_ms, speedup=paired.speedup,
               speedup_ci=list(ci), paired_medians_ms=[paired.baseline_ms, paired.variant_ms], rounds=paired.rounds,
               verdict=verdict.status, speed_claim=verdict.speed_claim, min_speedup=args.min_speedup)
    if noise:
        out.setdefault("warnings", []).append(noise)


def _print_human(out: dict[str, Any]) -> None:
    print(f"{out['kernel']}: {out['status']}" + (f" ({out['verdict']})" if out.get("verdict") else "")
          + f"  {out['message']}")
    if not out.get("paired"):
        return
    clock = ("CPU time under the Triton interpreter (--cpu-tuning), not GPU time" if out.get("interpreted")
             else "GPU time")
    lo, hi = out["speedup_ci"]
    print(f"  original {out['baseline_ms']:.4g} ms -> variant {out['variant_ms']:.4g} ms "
          f"({out['rounds']} interleaved rounds; {clock})")
    print(f"  speedup {out['speedup']:.3f}x (95% CI {lo:.3f}-{hi:.3f}); 'improved' needs the lower bound above "
          f"{max(1.0, out['min_speedup']):.3f}x")
    for w in out.get("warnings", []):
        print(f"  warning: {w}")

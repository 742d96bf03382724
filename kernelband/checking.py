"""Checking one hand-written variant against the original: the CheckOutcome ``kernelband
check --json`` prints. The editor's re-verification and the agent tools' ``check_variant`` run
that command, so this is the one code path behind every check verdict.

In order: the static screen (no worker is started for a variant it rejects), the
original's preparation, every check of the trust layer (the judge, DESIGN section 6), on
a GPU compute-sanitizer memcheck and racecheck of a correct variant and its calls past
int32 offsets where the GPU has the memory (as the optimize finalist gets), then the
interleaved re-measurement. Under the Triton interpreter (no GPU) a correct
variant is ``verified_correct``: nothing is re-measured and no speed is claimed, unless
``cpu_tuning`` asks for the CPU-time ratio as the verdict.

The answer says what was checked (``checked``: seeds, harnesses, the checks a pass
requires, whether memcheck ran and why not) so a reader, an agent above all, can tell a
verdict from a weak one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from .check_outcome import CheckOutcome, CheckScope
from .evaluate import Evaluator, SetupError, screen_task
from .json_types import JsonObject
from .model import Status, Task, Variant
from .session_setup import device_facts
from .verdict import NO_GPU_NOTE, consistent_times, decide_verdict
from .verification import SANITIZER, WIDE, run_verification
from .worker.client import WorkerError
from .worker.requests import ErrorKind
from .workdirs import job_workdir

# What a variant must pass, in the judge's order (kernelband/worker/judge.py). Each holds
# on every harness under every seed; the first that fails is the verdict.
TRUST_CHECKS: tuple[str, ...] = (
    "static screen: no new imports, dunder or dynamic attribute access, or patched modules",
    "outputs match: returned values, every tensor the launches wrote, the harness's locals",
    "inputs the original only reads stay unchanged",
    "no new stream, no thread left running, no replaced torch/triton function, no stale results",
    "precision: error vs a float64 rerun of the original at most 4x the original's",
    "precision consistency: every output at every seed within what the original's own error allows",
    "inputs beyond the harness: calls the judge derives (other sizes, strides, dtypes, special values), "
    "every buffer canary-padded",
    "Triton does the work: with the variant's launches neutralised its outputs change",
    "launches read only what the original's launches or harness had, fresh memory or constants",
    "two runs of one seed give the same bits where the original's do",
    "frozen replay of the timed launches reproduces the references; no Python hook beside a replay",
    "the harness still gives the references after timing",
    "the time is not above the measured roofline of the launches' traffic",
    "on a GPU: compute-sanitizer memcheck and racecheck",
    "on a GPU with the memory: calls past int32 offsets (a tensor over 2**31 elements), the original the oracle",
)
Log = Callable[[str], None]


@dataclass(frozen=True)
class CheckOptions:
    rounds: int  # interleaved rounds of the re-measurement
    min_speedup: float
    cpu_tuning: bool = False


NOT_CORRECT = "the variant did not pass correctness"  # why a check scope's steps have not run yet


def check_scope(task: Task) -> CheckScope:
    """What a pass of this task means: seeds, harnesses (``harness`` times), the checks;
    each verification step's report (``memcheck``, ``wide``) says whether it ran (set when
    it does, or why it did not)."""
    checks = [h for h in task.check_harnesses if h != task.harness]
    return CheckScope(
        seeds=list(task.seeds),
        harness=task.harness,
        harnesses=[task.harness, *checks],
        checks=list(TRUST_CHECKS),
        memcheck=SANITIZER.not_run(NOT_CORRECT),
        wide=WIDE.not_run(NOT_CORRECT),
    )


def checked_block(task: Task) -> JsonObject:
    """``check_scope`` as optimize's Result keeps it (``checked``, one of its extra keys)."""
    return check_scope(task).to_dict()


def check_variant(
    task: Task, variant_source: str, variant_label: str, options: CheckOptions, log: Optional[Log] = None
) -> CheckOutcome:
    """What the check prints. Raises SetupError when the original, its harness or the
    worker cannot be used (the CLI's exit 2)."""
    log = log or (lambda _msg: None)
    variant = Variant(variant_source, generator="user")
    reason = screen_task(task, variant.source)
    if reason:  # rejected before anything runs: the same screen the worker path applies
        return _outcome(task, variant_label, Status.REJECTED, reason)
    with job_workdir() as workdir, Evaluator(task, workdir=workdir) as evaluator:
        info = evaluator.start()
        log(f"device: {info.device_name}, triton {info.triton_version}")
        if not info.interpreted:  # the judge's roofline check needs the GPU's measured peaks
            evaluator.facts = device_facts(evaluator, None, info.device_name, info.triton_version)
        base = evaluator.prepare()
        if base.weak_harness:
            log(f"warning: weak harness: {base.weak_reason}")
        ev = evaluator.evaluate(variant)
        for note in ev.notes:
            log(f"note: {note}")
        out = _outcome(task, variant_label, ev.status, ev.message)
        out.errors, out.speed_claim = ev.errors, not base.interpreted
        out.interpreted, out.deterministic = base.interpreted, base.deterministic
        out.clock = base.timing.clock if base.timing else None
        out.weak_harness = base.weak_reason if base.weak_harness else None
        if not ev.ok:
            return out
        if _verification_refuses(evaluator, variant, out, log):
            return out
        if base.interpreted and not options.cpu_tuning:
            out.verdict = decide_verdict(None, interpreted=True).status
            out.message = f"{ev.message + '; ' if ev.message else ''}correct; {NO_GPU_NOTE}"
            return out
        log("re-measuring original and variant interleaved...")
        _paired(evaluator, variant, options, out, log)
    return out


def _outcome(task: Task, variant_label: str, status: Status, message: str) -> CheckOutcome:
    return CheckOutcome(
        file=task.module_path,
        kernel=task.kernel,
        harness=task.harness,
        variant=variant_label,
        checked=check_scope(task),
        status=status,
        message=message,
    )


def _verification_refuses(evaluator: Evaluator, variant: Variant, out: CheckOutcome, log: Log) -> bool:
    """The verification steps of a correct variant (``verification.STEPS``: on a GPU,
    compute-sanitizer, then the calls past int32 offsets), as optimize's finalist gets
    them: what no comparison can see. The first refusal is the verdict (compute-sanitizer's
    a runtime error, a wrong result past int32 offsets that result's status)."""
    outcome = run_verification(
        evaluator, variant, log, warn=lambda m: log(f"warning: {m}"), note=lambda m: log(f"note: {m}")
    )
    out.checked.record(outcome.reports)
    if not outcome.interpreted:  # the full report beside its summary (``sanitizer``), where it ran
        out.sanitizer = outcome.report(SANITIZER)
    if outcome.refusal is None:
        return False
    assert outcome.status is not None
    out.status, out.message = outcome.status, f"passed every comparison, but {outcome.refusal}"
    return True


_PAIRED_FAILURE = {ErrorKind.TIMEOUT: Status.TIMEOUT, ErrorKind.CRASHED: Status.CRASHED}


def _paired(evaluator: Evaluator, variant: Variant, options: CheckOptions, out: CheckOutcome, log: Log) -> None:
    """The speedup with its CI and verdict, or a failed verdict saying why it could not be
    measured (the original ran cleanly in prepare, so the failure is the variant's)."""
    try:
        paired = evaluator.paired_timing(variant, rounds=options.rounds)
    except (WorkerError, SetupError) as e:
        kind = e.kind if isinstance(e, WorkerError) else ErrorKind.CRASHED
        first = (str(e).strip().splitlines() or [kind.value])[0]
        out.status = _PAIRED_FAILURE.get(kind, Status.RUNTIME_ERROR)
        out.message = f"passed correctness, but the interleaved re-measurement failed ({kind}): {first}"
        log(f"error: {out.message}")
        return
    ci = (paired.ci_low, paired.ci_high)
    baseline_ms, variant_ms, noise = consistent_times(paired.baseline_ms, paired.variant_ms, paired.speedup, ci)
    verdict = decide_verdict(
        paired.ci_low, interpreted=bool(out.interpreted), cpu_tuning=options.cpu_tuning, min_speedup=options.min_speedup
    )
    # one pair of times, both from the interleaved rounds, consistent with the speedup beside them
    out.paired, out.baseline_ms, out.variant_ms, out.speedup = True, baseline_ms, variant_ms, paired.speedup
    out.speedup_ci, out.paired_medians_ms, out.rounds = ci, (paired.baseline_ms, paired.variant_ms), paired.rounds
    out.verdict, out.speed_claim, out.min_speedup = verdict.status, verdict.speed_claim, options.min_speedup
    if noise:
        out.warnings.append(noise)

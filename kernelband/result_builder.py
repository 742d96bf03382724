"""From a finished search to the session's Result (kernelband.model.Result).

The fastest pool member and the original are re-measured interleaved (one block after
the other where two runs of the harness do not fit on the GPU together, which the Result
then says) for a speedup with a 95% confidence interval; kernelband/verdict.py says what
that interval means.
Under the interpreter (no CPU tuning) nothing is re-measured: the winner is
``verified_correct``, with no speed claim. On a GPU the finalist first runs under
compute-sanitizer memcheck, then the calls past int32 offsets (``verification.STEPS``)
before it is re-measured. A winner whose re-measurement fails is not a verified
speedup: the Result stays ``no_improvement``, with its id and diff kept aside. With a
second worker free (several GPUs), those steps run there while the primary re-measures:
the same results as one after the other, a refusal first.
"""

from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Union

from .checking import checked_block
from .evaluate import SetupError
from .executor.base import Evaluator
from .model import HistoryEntry, PairedTiming, Result, ResultStatus, Task
from .session_config import SessionConfig
from .verdict import NO_GPU_NOTE, consistent_times, decide_verdict
from .verification import SANITIZER, STEPS, StepReport, not_run_reports, run_verification
from .worker.client import WorkerError
from .worker.requests import ErrorKind

if TYPE_CHECKING:  # the search modules load when a search runs
    from .search.base import Candidate

SEQUENTIAL_NOTE = (
    "the original and the best variant were re-measured one after the other, not interleaved: two runs "
    "of this harness do not fit on the GPU together (the CI pairs the two blocks' samples in order)"
)


def unified_diff(original: str, new: str, path: str) -> str:
    name = Path(path).name
    return "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}"
        )
    )


@dataclass
class SearchOutcome:
    """What the search loop hands over: its pool's original and best, and its accounts."""

    session_id: str
    stop_reason: str
    original: Candidate
    best: Candidate
    strategy_path: list[str]
    evaluations: int
    seconds: float
    tokens: int
    dollars: float
    history: list[HistoryEntry]
    warnings: list[str]  # the session's own list: notes added here show in both
    gpu: str = ""
    triton_version: str = ""
    baseline_bottleneck: Optional[str] = None
    overshoot: Optional[str] = None  # the last LLM request went past a token/dollar budget


class ResultBuilder:
    """Turns a SearchOutcome into a Result; re-measures through the session's evaluator."""

    def __init__(
        self,
        task: Task,
        config: SessionConfig,
        evaluator: Evaluator,
        warn: Callable[[str], None],
        log: Callable[[str], object],
        spare: Optional[Evaluator] = None,
    ) -> None:
        self.task = task
        self.config = config
        self.evaluator = evaluator
        self.spare = spare  # another prepared worker (its own GPU), free: the verification runs there
        self.warn = warn  # a Result warning and a log event, once per note
        self.log = log  # an info log event

    def build(self, out: SearchOutcome) -> Result:
        original, best = out.original, out.best
        interpreted = bool(self.evaluator.interpreted)
        result = Result(
            status=ResultStatus.NO_IMPROVEMENT,
            kernel=self.task.kernel,
            file=self.task.module_path,
            session_id=out.session_id,
            original_hash=self.task.source_hash,
            baseline_ms=original.time_ms,
            best_ms=original.time_ms,
            speedup=1.0,
            speedup_ci=[1.0, 1.0],
            speed_claim=not interpreted,
            applicable=False,
            min_speedup=self.config.min_speedup,
            evaluations=out.evaluations,
            interpreted=interpreted,
            clock="cpu-interpreter" if interpreted else "cuda-events",
            gpu=out.gpu,
            triton_version=out.triton_version,
            search=self.config.search,
            generator=self.config.generator,
            strategy_path=[],
            diff="",
            best_source=self.task.source,
            best_variant_id=original.id,
            seconds=round(out.seconds, 3),
            tokens=out.tokens,
            cost_usd=round(out.dollars, 6),
            stop_reason=out.stop_reason,
            message="",
            warnings=out.warnings,
            history=out.history,
            phase_seconds=phase_totals(out.history),
            worker_restarts=self.evaluator.worker_restarts,
            baseline_bottleneck=out.baseline_bottleneck,
        )
        # what a pass meant (seeds, harnesses, checks, memcheck): `checked` as `kernelband check` reports it
        result.extra["checked"] = checked_block(self.task)
        if out.overshoot:
            self.warn(out.overshoot)
        if best is original:
            self._record(result, not_run_reports("no variant passed correctness"))
            result.message = f"no faster correct variant found in {out.evaluations} evaluations ({out.stop_reason})"
            return result
        if interpreted and not self.config.cpu_tuning:
            return self._correct_only(result, best, out)
        if self.spare is not None and not interpreted:
            return self._verified_beside_paired(result, best, out, self.spare)
        if self._verification_refused(result, best):
            return result
        self.log("re-measuring the best variant and the original...")
        try:
            paired = self.evaluator.paired_timing(best.variant, rounds=self.config.paired_rounds)
        except (WorkerError, SetupError) as e:  # SetupError: the worker could not be restarted for it
            return self._unverified(result, best, e)
        return self._paired_verdict(result, best, out, paired)

    def _verified_beside_paired(self, result: Result, best: Candidate, out: SearchOutcome, spare: Evaluator) -> Result:
        """The finalist's verification steps on the spare worker (its GPU) while the primary
        re-measures it on its own: each GPU runs one thing; the verdict is decided as in the
        serial order (a refusal wins over any timing). A spare that cannot finish hands the
        steps it did not run back to the primary."""
        doing = " and ".join(step.doing for step in STEPS)
        self.log(f"checking the best variant {doing} on another worker while re-measuring it and the original...")
        reports: dict[str, StepReport] = {}

        def verify() -> None:
            try:
                run_verification(spare, best.variant, reports=reports)
            except Exception:  # noqa: BLE001 - e.g. a Ray actor lost twice: the primary runs the rest
                pass

        thread = threading.Thread(target=verify, daemon=True, name="kb-verify")
        thread.start()
        paired: Optional[PairedTiming] = None
        failed: Optional[Union[WorkerError, SetupError]] = None
        try:
            paired = self.evaluator.paired_timing(best.variant, rounds=self.config.paired_rounds)
        except (WorkerError, SetupError) as e:
            failed = e
        thread.join()
        if self._verification_refused(result, best, reports):
            return result
        if failed is not None:
            return self._unverified(result, best, failed)
        assert paired is not None
        return self._paired_verdict(result, best, out, paired)

    def _found(self, result: Result, best: Candidate, out: SearchOutcome) -> None:
        result.search_best_ms, result.search_baseline_ms = best.time_ms, out.original.time_ms
        result.strategy_path = list(out.strategy_path)
        result.diff = unified_diff(self.task.source, best.variant.source, self.task.module_path)
        result.best_source = best.variant.source
        result.best_variant_id = best.id

    def _verification_refused(
        self, result: Result, best: Candidate, reports: Optional[dict[str, StepReport]] = None
    ) -> bool:
        """On a GPU, the finalist's verification steps (``verification.STEPS``): compute-
        sanitizer memcheck and racecheck (out-of-bounds accesses and races no comparison can
        see), then the calls past int32 offsets (a tensor over 2**31 elements: too large for
        every candidate of the search). A refusal keeps the result at no_improvement.
        ``reports``: the steps already run (on a spare worker)."""
        outcome = run_verification(self.evaluator, best.variant, self.log, reports, warn=self.warn, note=self.log)
        self._record(result, outcome.reports)
        if outcome.refused_by is None:
            return False
        self.warn(f"the best candidate {outcome.refusal}")
        result.unverified_variant_id = best.id
        if outcome.refused_by is SANITIZER:  # the Result's `memcheck`: the full run that refused it
            result.memcheck = outcome.report(SANITIZER)
        result.message = f"the best candidate {outcome.refusal}: not reported"
        return True

    @staticmethod
    def _record(result: Result, reports: dict[str, StepReport]) -> None:
        """Each step's report in ``checked``, in a few words, as `kernelband check` prints it."""
        checked = result.extra["checked"]
        assert isinstance(checked, dict)  # checked_block's, set before any step reports
        for key, report in reports.items():
            checked[key] = report.summary()

    def _correct_only(self, result: Result, best: Candidate, out: SearchOutcome) -> Result:
        """Interpreter, no CPU tuning asked: the variant is verified correct and nothing is
        said about its speed (no re-measurement: CPU times would only invite a claim)."""
        self._found(result, best, out)
        self._record(result, run_verification(self.evaluator, best.variant).reports)  # under the interpreter: none runs
        result.status = ResultStatus.VERIFIED_CORRECT
        result.best_ms, result.speedup, result.speedup_ci = best.time_ms, None, None
        via = " -> ".join(result.strategy_path) or "a stored variant"
        result.message = (
            f"a correct variant (via {via}) passed every check; {NO_GPU_NOTE}: no speed claim. "
            "Run on a GPU to measure it, or pass --cpu-tuning to rank and apply by CPU time"
        )
        return result

    def _paired_verdict(self, result: Result, best: Candidate, out: SearchOutcome, paired: PairedTiming) -> Result:
        verdict = decide_verdict(
            paired.ci_low,
            interpreted=self.evaluator.interpreted,
            cpu_tuning=self.config.cpu_tuning,
            min_speedup=self.config.min_speedup,
        )
        base_ms, best_ms, noise = consistent_times(
            paired.baseline_ms, paired.variant_ms, paired.speedup, (paired.ci_low, paired.ci_high)
        )
        self._found(result, best, out)
        result.baseline_ms, result.best_ms, result.speedup = base_ms, best_ms, paired.speedup
        result.speedup_ci = [paired.ci_low, paired.ci_high]
        result.paired_rounds, result.paired_medians_ms = paired.rounds, [paired.baseline_ms, paired.variant_ms]
        result.status, result.speed_claim, result.applicable = verdict.status, verdict.speed_claim, verdict.applicable
        if noise:
            self.warn(noise)
        if paired.order == "sequential":
            self.warn(SEQUENTIAL_NOTE)
        ci = f"{paired.speedup:.3f}x (95% CI {paired.ci_low:.3f}-{paired.ci_high:.3f})"
        cpu = " in CPU-interpreter time (--cpu-tuning; not a GPU speedup)" if self.evaluator.interpreted else ""
        if verdict.status == ResultStatus.IMPROVED:
            result.message = f"{ci} faster{cpu} via {' -> '.join(result.strategy_path) or 'a stored variant'}"
        else:
            result.message = (
                f"best candidate measured {ci}{cpu} on re-measurement: not a verified speedup "
                f"(the CI's lower bound must exceed {max(1.0, self.config.min_speedup):.3f}x)"
            )
        return result

    def _unverified(self, result: Result, best: Candidate, e: Union[WorkerError, SetupError]) -> Result:
        """The winner failed its re-measurement: a speedup that cannot be re-measured is not
        verified, so the Result stays no_improvement (its id, diff and search time are kept)."""
        kind = e.kind if isinstance(e, WorkerError) else ErrorKind.ERROR
        failure = f"the final re-measurement of the best candidate failed ({kind}: {e})"
        self.warn(failure)
        # best_* stay the original's: nothing verified to apply
        result.search_best_ms = best.time_ms
        result.unverified_variant_id = best.id
        result.unverified_diff = unified_diff(self.task.source, best.variant.source, self.task.module_path)
        assert result.baseline_ms is not None  # the original's search time (build)
        result.message = (
            f"search found a candidate at {result.baseline_ms / best.time_ms:.2f}x, but {failure}: "
            "not a verified speedup"
        )
        return result


def phase_totals(history: list[HistoryEntry]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for entry in history:
        for k, v in (entry.get("phases") or {}).items():
            totals[k] = round(totals.get(k, 0.0) + v, 4)
    return totals

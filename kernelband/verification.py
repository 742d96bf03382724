"""What every verdict path runs after a candidate's checks, so that ``optimize`` (for its
finalist), ``check``, the editor's re-verify and the agent tools (both run ``check``) hold
a variant to the same list: on a GPU, compute-sanitizer's memcheck (out-of-bounds
accesses) and racecheck (shared-memory hazards) over its correctness harnesses, then the
calls past int32 offsets (a tensor over 2**31 elements, where the device has the memory:
too large to run for every candidate of a search).

``STEPS`` is that list, in order; ``run_verification`` runs it on an evaluator (or takes
the reports a spare worker made) and says which step refused the variant first. The
callers only say what a verdict looks like on their side (a check's status, a Result's
message): a new step is one more entry in ``STEPS`` (and, for ``check --json`` to print
its report, a CheckScope field named by its key).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, Optional, Protocol, TypeVar, cast

from .json_types import JsonObject
from .model import SanitizerReport, Status, WideReport

if TYPE_CHECKING:  # kept light: no evaluator import at run time
    from .executor.base import Evaluator
    from .model import Variant

MEMCHECK_ON_INTERPRETER = "GPU only: the Triton interpreter has no device memory for compute-sanitizer to check"
WIDE_ON_INTERPRETER = "GPU only: a call past 2**31 elements is far beyond what the Triton interpreter runs"

Say = Callable[[str], object]


class StepReport(Protocol):
    """What a step's report (a plain dataclass of model.py, built by the judge) offers."""

    @property
    def ran(self) -> bool: ...

    @property
    def refused(self) -> bool: ...

    @property
    def reason(self) -> str: ...

    @property
    def left_unchecked(self) -> str: ...

    def summary(self) -> JsonObject: ...


R = TypeVar("R", bound=StepReport)


@dataclass(frozen=True)
class VerificationStep(Generic[R]):
    """One step of the list: how it runs on an evaluator and how its outcome is worded."""

    key: str  # its report's key in ``checked`` (and a CheckScope field of that name)
    name: str  # the step as a later step's not-run reason names it
    doing: str  # what it does to the variant, in a log line ("under compute-sanitizer memcheck")
    announce: str  # logged before it runs
    run: Callable[[Evaluator, Variant], R]
    not_run: Callable[[str], R]  # its report of a run that did not happen, saying why
    refusal: Callable[[R], str]  # why a report that refused refuses the variant
    status: Callable[[R], Status]  # a check's status when it refuses
    on_interpreter: str  # why it does not run under the Triton interpreter
    unchecked: str  # what a run that could not happen on a GPU leaves unchecked (its reason follows)
    warns: bool  # that is a warning (else a note)

    def check(
        self, evaluator: Evaluator, variant: Variant, log: Optional[Say] = None, report: Optional[R] = None
    ) -> tuple[Optional[str], R]:
        """(why the variant is refused, the report) after this step alone; (None, report)
        when it passed or could not run here (the report says why). ``report``: a run
        already made (on a spare worker). Under the interpreter nothing is asked of the
        judge: a CPU session's verdicts are as they were."""
        if evaluator.interpreted:
            return None, self.not_run(self.on_interpreter)
        if report is None:
            if log is not None:
                log(self.announce)
            report = self.run(evaluator, variant)
        return (self.refusal(report) if report.refused else None), report


def _sanitizer_refusal(report: SanitizerReport) -> str:
    finding = "; ".join(report.findings) or f"exit code {report.exit_code}"
    return f"fails compute-sanitizer {report.tool}: {finding}"


SANITIZER: VerificationStep[SanitizerReport] = VerificationStep(
    key="memcheck",
    name="compute-sanitizer",
    doing="under compute-sanitizer memcheck",
    announce="checking the variant under compute-sanitizer (memcheck, racecheck)...",
    run=lambda evaluator, variant: evaluator.sanitize(variant),
    not_run=SanitizerReport.not_run,
    refusal=_sanitizer_refusal,
    # out-of-bounds accesses and races no comparison can see: the variant's runtime error
    status=lambda _report: Status.RUNTIME_ERROR,
    on_interpreter=MEMCHECK_ON_INTERPRETER,
    unchecked="out-of-bounds accesses and races not checked",
    warns=True,
)

WIDE: VerificationStep[WideReport] = VerificationStep(
    key="wide",
    name="the calls past int32 offsets",
    doing="on calls past int32 offsets",
    announce="checking the variant on calls past int32 offsets (a tensor over 2**31 elements)...",
    run=lambda evaluator, variant: evaluator.wide_calls(variant),
    not_run=WideReport.not_run,
    refusal=lambda report: f"fails on a call past int32 offsets: {report.message}",
    status=lambda report: report.status or Status.MISMATCH,
    # skipped for want of memory, or an original that does not handle them: a note, not a warning
    on_interpreter=WIDE_ON_INTERPRETER,
    unchecked="calls past int32 offsets not checked",
    warns=False,
)

STEPS: tuple[VerificationStep[Any], ...] = (SANITIZER, WIDE)


def not_run_after(step: VerificationStep[Any]) -> str:
    """A later step's reason once ``step`` refused the variant: nothing is left to decide."""
    return f"not run: {step.name} refused the variant first"


def not_run_reports(reason: str) -> dict[str, StepReport]:
    """Every step's report of a run that did not happen for ``reason``, by key."""
    return {step.key: step.not_run(reason) for step in STEPS}


@dataclass
class VerificationOutcome:
    """The list's reports by step key (in ``STEPS`` order), and the first refusal."""

    reports: dict[str, StepReport] = field(default_factory=dict)
    interpreted: bool = False  # nothing ran: the Triton interpreter has no GPU to run it on
    refused_by: Optional[VerificationStep[Any]] = None
    refusal: Optional[str] = None  # why: the words of the step that refused

    def report(self, step: VerificationStep[R]) -> R:
        """``step``'s report, as its own type."""
        return cast(R, self.reports[step.key])

    @property
    def status(self) -> Optional[Status]:
        """A check's status for the refusal (None: nothing refused the variant)."""
        if self.refused_by is None:
            return None
        return self.refused_by.status(self.reports[self.refused_by.key])


def run_verification(
    evaluator: Evaluator,
    variant: Variant,
    log: Optional[Say] = None,
    reports: Optional[dict[str, StepReport]] = None,
    *,
    warn: Optional[Say] = None,
    note: Optional[Say] = None,
) -> VerificationOutcome:
    """Each step of ``STEPS`` in order on ``evaluator``; the first that refuses the variant
    decides, and the later ones are reported as not run (what they could add changes no
    verdict). ``log`` gets each step's announcement; a step that could not run on a GPU is
    said through ``warn`` or ``note`` (by the step's ``warns``; both default to ``log``).

    ``reports``: the runs a spare worker already made, by step key, taken as they are; each
    step run here is added to it as it ends, so that a spare cut short by an exception
    leaves what it finished for the primary's call, which runs the rest."""
    if evaluator.interpreted:
        return VerificationOutcome({s.key: s.not_run(s.on_interpreter) for s in STEPS}, interpreted=True)
    made = reports if reports is not None else {}
    outcome = VerificationOutcome()
    for step in STEPS:
        if outcome.refused_by is not None:
            outcome.reports[step.key] = step.not_run(not_run_after(outcome.refused_by))
            continue
        refusal, report = step.check(evaluator, variant, log, made.get(step.key))
        made[step.key] = outcome.reports[step.key] = report
        if refusal is not None:
            outcome.refused_by, outcome.refusal = step, refusal
        elif not report.ran or report.left_unchecked:
            say = (warn if step.warns else note) or log
            if say is not None:
                say(f"{step.unchecked}: {report.reason}" if not report.ran else report.left_unchecked)
    return outcome

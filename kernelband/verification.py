"""What every verdict path runs after a candidate's checks, so that ``optimize`` (for its
finalist), ``check``, the editor's re-verify and the agent tools (both run ``check``) hold
a variant to the same list: on a GPU, compute-sanitizer's memcheck (out-of-bounds
accesses) and racecheck (shared-memory hazards) over its correctness harnesses, then the
calls past int32 offsets (a tensor over 2**31 elements, where the device has the memory:
too large to run for every candidate of a search)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from .model import NO_GPU_SANITIZER, SanitizerReport, WideReport

if TYPE_CHECKING:  # kept light: no evaluator import at run time
    from .executor.base import Evaluator
    from .model import Variant

WIDE_ON_INTERPRETER = "GPU only: a call past 2**31 elements is far beyond what the Triton interpreter runs"
WIDE_AFTER_SANITIZER = "not run: compute-sanitizer refused the variant first"


def sanitizer_refusal(evaluator: Evaluator, variant: Variant, log: Optional[Callable[[str], object]] = None,
                      report: Optional[SanitizerReport] = None) -> tuple[Optional[str], SanitizerReport]:
    """(why the variant is refused, the report) after its sanitizer run; (None, report)
    when it passed or could not run here (the report then says why). ``report``: a run
    already made (on a spare worker)."""
    if evaluator.interpreted:
        return None, SanitizerReport.not_run(NO_GPU_SANITIZER)
    if report is None:
        if log is not None:
            log("checking the variant under compute-sanitizer (memcheck, racecheck)...")
        report = evaluator.sanitize(variant)
    if not report.refused:
        return None, report
    finding = "; ".join(report.findings) or f"exit code {report.exit_code}"
    return f"fails compute-sanitizer {report.tool}: {finding}", report


def wide_refusal(evaluator: Evaluator, variant: Variant, log: Optional[Callable[[str], object]] = None,
                 report: Optional[WideReport] = None) -> tuple[Optional[str], WideReport]:
    """(why the variant is refused, the report) after its calls past int32 offsets; (None,
    report) when it passed or they could not run here (the report says why: the
    interpreter, the device's memory, an original that does not handle them). ``report``:
    a run already made (on a spare worker). Under the interpreter nothing is asked of the
    judge: a CPU session's verdicts are as they were."""
    if evaluator.interpreted:
        return None, WideReport.not_run(WIDE_ON_INTERPRETER)
    if report is None:
        if log is not None:
            log("checking the variant on calls past int32 offsets (a tensor over 2**31 elements)...")
        report = evaluator.wide_calls(variant)
    if not report.refused:
        return None, report
    return f"fails on a call past int32 offsets: {report.message}", report

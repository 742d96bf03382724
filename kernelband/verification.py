"""What every verdict path runs after a candidate's checks, so that ``optimize`` (for its
finalist), ``check``, the editor's re-verify and the agent tools (both run ``check``) hold
a variant to the same list: on a GPU, compute-sanitizer's memcheck (out-of-bounds
accesses) and racecheck (shared-memory hazards) over its correctness harnesses."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:  # kept light: no evaluator import at run time
    from .executor.base import Evaluator
    from .model import Variant


def sanitizer_refusal(evaluator: Evaluator, variant: Variant, log: Optional[Callable[[str], object]] = None,
                      report: Optional[dict[str, Any]] = None) -> tuple[Optional[str], dict[str, Any]]:
    """(why the variant is refused, the report) after its sanitizer run; (None, report)
    when it passed or could not run here (the report then says why). ``report``: a run
    already made (on a spare worker)."""
    if evaluator.interpreted:
        return None, {"ran": False, "ok": True, "reason": "no GPU: the interpreter has no compute-sanitizer"}
    if report is None:
        if log is not None:
            log("checking the variant under compute-sanitizer (memcheck, racecheck)...")
        report = evaluator.sanitize(variant)
    if not report.get("ran") or report.get("ok"):
        return None, report
    finding = "; ".join(report.get("findings") or []) or f"exit code {report.get('exit_code')}"
    return f"fails compute-sanitizer {report.get('tool', 'memcheck')}: {finding}", report

"""The verification steps after a candidate's checks (kernelband/verification.py ``STEPS``):
one ordered list that both verdict paths run (``check``, and optimize's finalist on its
primary worker or on a spare beside the re-measurement). The first step that refuses the
variant decides; the later ones are reported as not run and never asked of the judge.

The reports are the plain dataclasses the judge builds, so a worker that answers given
reports drives the ordering; the real Evaluator answers them through a judge's replies
where the request it sends matters."""
from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from kernelband import result_builder, verification
from kernelband.check_outcome import CheckOutcome, CheckScope
from kernelband.checking import _verification_refuses, check_scope, checked_block
from kernelband.decode import MalformedMessage
from kernelband.evaluate import Evaluator
from kernelband.model import PAST_INT32, PairedTiming, ResultStatus, SanitizerReport, Status, Task, Variant, WideReport
from kernelband.result_builder import ResultBuilder, SearchOutcome
from kernelband.search.base import Candidate
from kernelband.session import SessionConfig
from kernelband.verification import (MEMCHECK_ON_INTERPRETER, SANITIZER, STEPS, WIDE, WIDE_ON_INTERPRETER,
                                     VerificationStep, run_verification)
from kernelband.worker.requests import Sanitize, WideCalls

TASK = Task(module_path="/x/k.py", source="# o\n", kernel="k", harness="bench_k", device="cuda")
VARIANT = Variant("# v\n", id="b")
CLEAN = SanitizerReport(ran=True, ok=True, tool="racecheck", tools=("memcheck", "racecheck"))
OUT_OF_BOUNDS = SanitizerReport(ran=True, ok=False, findings=("Invalid __global__ write of size 4 bytes",))
PASSED = WideReport(ran=True, calls=("k(655363x4096 float32)",))
WRAPS = WideReport(ran=True, ok=False, calls=("k(655363x4096 float32)",), message="outputs differ: x")
AFTER_SANITIZER = "not run: compute-sanitizer refused the variant first"
SANITIZER_LOG = "checking the variant under compute-sanitizer (memcheck, racecheck)..."
WIDE_LOG = "checking the variant on calls past int32 offsets (a tensor over 2**31 elements)..."


class _Worker:
    """A worker that answers each verification step with a given report (or raises on the
    one named by ``fails``) and keeps what it was asked, in order."""

    worker_restarts, baseline, lanes = 0, None, 1

    def __init__(self, sanitizer: SanitizerReport = CLEAN, wide: WideReport = PASSED, interpreted: bool = False,
                 fails: str = "", extra: Optional[WideReport] = None) -> None:
        self.sanitizer, self.wide, self.extra_report = sanitizer, wide, extra
        self.interpreted, self.fails = interpreted, fails
        self.calls: list[str] = []

    def _answer(self, call: str, report: Any) -> Any:
        self.calls.append(call)
        if call == self.fails:
            raise RuntimeError("actor lost twice")
        return report

    def sanitize(self, variant: Variant) -> SanitizerReport:
        return self._answer("sanitize", self.sanitizer)

    def wide_calls(self, variant: Variant, min_elements: int = PAST_INT32) -> WideReport:
        return self._answer("wide", self.wide)

    def extra(self, variant: Variant) -> WideReport:
        return self._answer("extra", self.extra_report)

    def paired_timing(self, variant: Variant, rounds: int = 10) -> PairedTiming:
        self.calls.append("paired")
        return PairedTiming(2.0, 1.0, 2.0, 1.9, 2.1, rounds, "cuda-events")


def _check(worker: Any) -> tuple[bool, CheckOutcome, list[str]]:
    """What ``check`` makes of a correct variant's verification on ``worker``."""
    out = CheckOutcome(file=TASK.module_path, kernel="k", harness="bench_k", variant="v.py",
                       checked=check_scope(TASK), status=Status.OK, message="")
    logged: list[str] = []
    refused = _verification_refuses(worker, VARIANT, out, logged.append)
    return refused, out, logged


def _optimize(primary: _Worker, spare: Optional[_Worker] = None) -> tuple[Any, list[str], list[str]]:
    """The Result of a search whose finalist is ``VARIANT``: (result, warnings, log lines)."""
    original = Candidate(id="o", variant=Variant(source="# o\n", id="o"), time_ms=2.0)
    best = Candidate(id="b", variant=VARIANT, time_ms=1.0, parent_id="o")
    outcome = SearchOutcome(session_id="s", stop_reason="budget", original=original, best=best,
                            strategy_path=["tiling"], evaluations=2, seconds=1.0, tokens=0, dollars=0.0, history=[],
                            warnings=[])
    warnings: list[str] = []
    logged: list[str] = []
    result = ResultBuilder(TASK, SessionConfig(), primary, warnings.append, logged.append,  # type: ignore[arg-type]
                           spare=spare).build(outcome)  # type: ignore[arg-type]
    return result, warnings, logged


# --------------------------------------------------------------------------- the list itself
def test_the_list_is_compute_sanitizer_then_the_calls_past_int32_offsets():
    assert STEPS == (SANITIZER, WIDE) and [s.key for s in STEPS] == ["memcheck", "wide"]
    # each step has its place in what both callers print: a CheckScope field, a key of `checked`
    assert all(s.key in CheckScope.__dataclass_fields__ and s.key in checked_block(TASK) for s in STEPS)


def test_every_step_runs_in_order_when_none_refuses():
    worker, logged = _Worker(), []
    outcome = run_verification(worker, VARIANT, logged.append)  # type: ignore[arg-type]
    assert worker.calls == ["sanitize", "wide"] and logged == [SANITIZER_LOG, WIDE_LOG]
    assert list(outcome.reports) == ["memcheck", "wide"] and outcome.reports == {"memcheck": CLEAN, "wide": PASSED}
    assert outcome.refused_by is None and outcome.refusal is None and outcome.status is None


def test_after_a_refusal_the_later_steps_are_not_run():
    worker = _Worker(sanitizer=OUT_OF_BOUNDS)
    outcome = run_verification(worker, VARIANT)  # type: ignore[arg-type]
    assert worker.calls == ["sanitize"]
    assert outcome.reports == {"memcheck": OUT_OF_BOUNDS, "wide": WideReport.not_run(AFTER_SANITIZER)}
    assert outcome.refused_by is SANITIZER and outcome.status == Status.RUNTIME_ERROR
    assert outcome.refusal == "fails compute-sanitizer memcheck: Invalid __global__ write of size 4 bytes"


@pytest.mark.parametrize("status, says", [(None, Status.MISMATCH), (Status.CRASHED, Status.CRASHED)])
def test_a_wrong_result_past_int32_offsets_is_the_last_steps_refusal(status, says):
    wrong = WideReport(ran=True, ok=False, status=status, message="outputs differ: x")
    outcome = run_verification(_Worker(wide=wrong), VARIANT)  # type: ignore[arg-type]
    assert outcome.refused_by is WIDE and outcome.status == says
    assert outcome.refusal == "fails on a call past int32 offsets: outputs differ: x"


def test_a_step_that_could_not_run_refuses_nothing_and_the_next_one_runs():
    skipped_sanitizer = SanitizerReport.not_run("compute-sanitizer not found")
    skipped_wide = WideReport.not_run("takes 10.13 GiB, more than 1/4 of the GPU's free memory")
    worker, said = _Worker(sanitizer=skipped_sanitizer, wide=skipped_wide), []
    outcome = run_verification(worker, VARIANT, lambda m: said.append(("log", m)),  # type: ignore[arg-type]
                               warn=lambda m: said.append(("warn", m)), note=lambda m: said.append(("note", m)))
    assert worker.calls == ["sanitize", "wide"] and outcome.refused_by is None
    assert said == [("log", SANITIZER_LOG),
                    ("warn", "out-of-bounds accesses and races not checked: compute-sanitizer not found"),
                    ("log", WIDE_LOG),
                    ("note", f"calls past int32 offsets not checked: {skipped_wide.reason}")]


def test_under_the_interpreter_nothing_is_asked_and_nothing_is_said():
    worker, logged = _Worker(sanitizer=OUT_OF_BOUNDS, wide=WRAPS, interpreted=True), []
    outcome = run_verification(worker, VARIANT, logged.append)  # type: ignore[arg-type]
    assert worker.calls == [] and logged == [] and outcome.interpreted and outcome.refused_by is None
    assert outcome.reports == {"memcheck": SanitizerReport.not_run(MEMCHECK_ON_INTERPRETER),
                               "wide": WideReport.not_run(WIDE_ON_INTERPRETER)}


def test_a_spares_reports_are_taken_and_what_it_did_not_finish_runs_here():
    spare, reports = _Worker(fails="wide"), {}
    with pytest.raises(RuntimeError):
        run_verification(spare, VARIANT, reports=reports)  # type: ignore[arg-type]
    assert spare.calls == ["sanitize", "wide"] and reports == {"memcheck": CLEAN}
    primary, logged = _Worker(), []
    outcome = run_verification(primary, VARIANT, logged.append, reports)  # type: ignore[arg-type]
    assert primary.calls == ["wide"] and logged == [WIDE_LOG]
    assert outcome.reports == {"memcheck": CLEAN, "wide": PASSED}


# --------------------------------------------------------------------------- check
def _real_evaluator(replies: dict[type, Any]) -> tuple[Evaluator, list[str]]:
    """The session's Evaluator whose judge answers each request type with its reply (the
    wire form); the second item lists the requests it was sent, in order."""
    sent: list[str] = []

    def send(request: Any, _timeout: float) -> Any:
        sent.append(type(request).__name__)
        return json.loads(json.dumps(replies[type(request)].to_dict()))

    ev = Evaluator.__new__(Evaluator)
    ev.client = SimpleNamespace(info=SimpleNamespace(interpreted=False), send=send)  # type: ignore[assignment]
    ev._ensure_worker = lambda: None  # type: ignore[method-assign]
    ev._deadline = lambda *_a: 1.0  # type: ignore[method-assign]
    return ev, sent


def test_check_sends_no_wide_request_after_a_sanitizer_refusal():
    ev, sent = _real_evaluator({Sanitize: OUT_OF_BOUNDS, WideCalls: PASSED})
    refused, out, logged = _check(ev)
    assert refused and sent == ["Sanitize"] and logged == [SANITIZER_LOG]
    assert out.status == Status.RUNTIME_ERROR and out.sanitizer == OUT_OF_BOUNDS
    assert out.message == ("passed every comparison, but fails compute-sanitizer memcheck: "
                           "Invalid __global__ write of size 4 bytes")
    assert out.checked.wide == WideReport.not_run(AFTER_SANITIZER)
    assert out.to_dict()["checked"]["wide"] == {"ran": False, "reason": AFTER_SANITIZER}


def test_check_runs_both_steps_in_order_and_a_wrong_wide_result_is_the_verdict():
    ev, sent = _real_evaluator({Sanitize: CLEAN, WideCalls: WRAPS})
    refused, out, logged = _check(ev)
    assert refused and sent == ["Sanitize", "WideCalls"] and logged == [SANITIZER_LOG, WIDE_LOG]
    assert out.status == Status.MISMATCH and out.checked.wide == WRAPS
    assert out.checked.memcheck == out.sanitizer == CLEAN
    assert out.message == "passed every comparison, but fails on a call past int32 offsets: outputs differ: x"
    ev, sent = _real_evaluator({Sanitize: CLEAN, WideCalls: PASSED})
    refused, out, _ = _check(ev)
    assert not refused and sent == ["Sanitize", "WideCalls"] and out.status == Status.OK


def test_check_under_the_interpreter_records_why_neither_step_ran():
    worker = _Worker(interpreted=True)
    refused, out, logged = _check(worker)
    assert not refused and worker.calls == [] and logged == [] and out.sanitizer is None
    assert out.checked.memcheck == SanitizerReport.not_run(MEMCHECK_ON_INTERPRETER)
    assert out.checked.wide == WideReport.not_run(WIDE_ON_INTERPRETER)


# --------------------------------------------------------------------------- optimize's finalist
@pytest.mark.parametrize("on_spare", [False, True], ids=["primary", "spare"])
def test_optimize_stops_after_a_sanitizer_refusal_on_either_worker(on_spare):
    primary = _Worker(sanitizer=OUT_OF_BOUNDS)
    spare = _Worker(sanitizer=OUT_OF_BOUNDS) if on_spare else None
    result, warnings, _ = _optimize(primary, spare)
    assert primary.calls == (["paired"] if on_spare else ["sanitize"])
    assert spare is None or spare.calls == ["sanitize"]
    assert result.status == ResultStatus.NO_IMPROVEMENT and result.unverified_variant_id == "b"
    assert result.memcheck == OUT_OF_BOUNDS
    assert result.extra["checked"]["wide"] == {"ran": False, "reason": AFTER_SANITIZER}
    refusal = "the best candidate fails compute-sanitizer memcheck: Invalid __global__ write of size 4 bytes"
    assert warnings == [refusal] and result.message == f"{refusal}: not reported"


@pytest.mark.parametrize("on_spare", [False, True], ids=["primary", "spare"])
def test_optimize_runs_the_calls_past_int32_offsets_after_a_clean_sanitizer(on_spare):
    primary = _Worker(wide=WRAPS)
    spare = _Worker(wide=WRAPS) if on_spare else None
    result, warnings, _ = _optimize(primary, spare)
    assert primary.calls == (["paired"] if on_spare else ["sanitize", "wide"])
    assert spare is None or spare.calls == ["sanitize", "wide"]
    assert result.status == ResultStatus.NO_IMPROVEMENT and result.unverified_variant_id == "b"
    assert result.memcheck is None  # the Result's `memcheck` is compute-sanitizer's refusal only
    assert result.extra["checked"]["memcheck"] == {"ran": True, "ok": True, "findings": []}
    assert result.extra["checked"]["wide"] == WRAPS.summary()
    assert warnings == ["the best candidate fails on a call past int32 offsets: outputs differ: x"]


def test_a_spare_that_fails_midway_hands_the_rest_to_the_primary():
    primary, spare = _Worker(), _Worker(fails="wide")
    result, _, logged = _optimize(primary, spare)
    assert spare.calls == ["sanitize", "wide"] and primary.calls == ["paired", "wide"]
    assert SANITIZER_LOG not in logged and WIDE_LOG in logged  # the spare's memcheck was taken as it was
    assert logged[0] == ("checking the best variant under compute-sanitizer memcheck and on calls past int32 offsets "
                         "on another worker while re-measuring it and the original...")
    assert result.status == ResultStatus.IMPROVED and result.extra["checked"]["wide"] == PASSED.summary()


def test_a_third_step_is_one_more_entry_in_the_list(monkeypatch):
    """Nothing in the callers names a step's place: a step added between the two runs
    after the sanitizer, and its refusal leaves the calls past int32 offsets not run. (The
    printed record needs a place for its report too, a CheckScope field: stood in for here
    by the optimize Result's `checked` block with that key.)"""
    extra: VerificationStep[WideReport] = VerificationStep(
        key="extra", name="the extra step", doing="on the extra step", announce="checking the extra step...",
        run=lambda evaluator, variant: evaluator.extra(variant),  # type: ignore[attr-defined]
        not_run=WideReport.not_run,
        refusal=lambda report: f"fails the extra step: {report.message}", status=lambda _r: Status.MISMATCH,
        on_interpreter="GPU only", unchecked="the extra step not checked", warns=False)
    block = {**checked_block(TASK), "extra": None}
    monkeypatch.setattr(result_builder, "checked_block", lambda _task: dict(block))
    monkeypatch.setattr(verification, "STEPS", (SANITIZER, extra, WIDE))
    refusing = WideReport(ran=True, ok=False, message="y")
    primary = _Worker(extra=refusing)
    result, warnings, logged = _optimize(primary)
    assert primary.calls == ["sanitize", "extra"] and logged[:2] == [SANITIZER_LOG, "checking the extra step..."]
    assert result.extra["checked"]["extra"] == refusing.summary()
    assert result.extra["checked"]["wide"] == {"ran": False,
                                               "reason": "not run: the extra step refused the variant first"}
    assert warnings == ["the best candidate fails the extra step: y"] and result.unverified_variant_id == "b"
    assert result.memcheck is None


@pytest.mark.parametrize("report, says", [(SanitizerReport, "malformed sanitizer report"),
                                          (WideReport, "malformed wide-calls report")])
def test_each_report_keeps_the_shared_fields_first_and_decodes_as_its_own_type(report, says):
    assert [f.name for f in dataclasses.fields(report)][:3] == ["ran", "ok", "reason"]
    assert report.not_run("why") == report(ran=False, reason="why") and not report.not_run("why").refused
    decoded = report.from_wire({"ran": True, "ok": False})
    assert type(decoded) is report and decoded.refused
    with pytest.raises(MalformedMessage, match=f"^{says}: ran must be bool, got int"):
        report.from_wire({"ran": 1})


def test_reports_of_two_steps_never_compare_equal():
    assert SanitizerReport.not_run("why") != WideReport.not_run("why")

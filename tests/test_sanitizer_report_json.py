"""The compute-sanitizer report as the CLI prints it (``kernelband check --json``'s
``sanitizer`` and ``checked.memcheck``, ``optimize --json``'s ``memcheck`` and
``checked.memcheck``) and as the agent tools answer it: the judge's real op runs over a
fake compute-sanitizer, its reply crosses the pipe as JSON, and every key and value that
reaches the output is pinned here."""
from __future__ import annotations

import json
import shutil
import time
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernelband.agent.reports import optimize_report
from kernelband.check_outcome import CheckOutcome
from kernelband.checking import _verification_refuses, check_scope
from kernelband.evaluate import Evaluator
from kernelband.model import PairedTiming, Result, Status, Task, Variant, WideReport
from kernelband.profile.schema import DeviceFacts
from kernelband.result_builder import ResultBuilder, SearchOutcome
from kernelband.search.base import Candidate
from kernelband.session import SessionConfig
from kernelband.worker import judge_memcheck
from kernelband.worker.client import WorkerError, _result
from kernelband.worker.jobs import JobEnd, JobEndKind, JobFailed
from kernelband.worker.requests import ErrorKind, Reply, Sanitize, WideCalls, encode_reply

INVALID_WRITE = ("========= Invalid __global__ write of size 4 bytes\n"
                 "=========     at axpy_kernel+0x1d0\n========= ERROR SUMMARY: 1 error\n")
CLEAN_MEMCHECK = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
CLEAN_RACECHECK = "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
RACE = "========= Error: Race reported between Write access and Read access\n========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"
# the calls past int32 offsets, which run after a clean sanitizer: passed
WIDE_PASSED = WideReport(ran=True, calls=("k(655363x4096 float32)",))
SANITIZER_LOG = "checking the variant under compute-sanitizer (memcheck, racecheck)..."
WIDE_LOG = "checking the variant on calls past int32 offsets (a tensor over 2**31 elements)..."

TASK = Task(module_path="/x/k.py", source="# o\n", kernel="k", harness="bench_k", device="cuda",
            check_harnesses=["bench_k", "test_k"])


class _FakeSanitizerJob:
    """A variant job under compute-sanitizer: writes the tool's log and exits with its code."""

    runs: dict[str, tuple[str, Any]] = {}  # tool -> (log text, exit code, or how its job ended: "timeout")

    def __init__(self, job: Any, *, wrapper: list[str], **_: Any) -> None:
        assert wrapper[1:4] == ["-m", "kernelband.worker.sandbox", "--whole"], wrapper  # the tool in the sandbox
        self.dir = tempfile.mkdtemp(prefix="kernelband-variant-")  # the job's directory, the tool's cwd
        self.tool = wrapper[wrapper.index("--tool") + 1]
        self.log = Path(self.dir) / wrapper[wrapper.index("--log-file") + 1]
        self.proc = SimpleNamespace(wait=lambda timeout: self.runs[self.tool][1])

    def start(self, _device: Any) -> None:
        self.log.write_text(self.runs[self.tool][0])

    def frames(self) -> Any:
        if self.runs[self.tool][1] in ("timeout", "crashed"):  # the job ended without its done frame
            raise JobFailed(JobEnd(JobEndKind(self.runs[self.tool][1]), "no frame in 60 s"))
        return iter(())

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(autouse=True, params=["one at a time", "side by side"])
def tools_together(request, monkeypatch):
    """Every report here, with the tools run one after the other and side by side: the
    verdict and the report are the same either way."""
    together = request.param == "side by side"
    monkeypatch.setattr(judge_memcheck, "tools_fit_together", lambda _judge: together)
    return together


def _judge_reply(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, runs: dict[str, tuple[str, int]],
                 gpu: bool = True) -> Any:
    """The judge's sanitize op on a fake compute-sanitizer, as the session reads its reply line."""
    monkeypatch.setattr(judge_memcheck, "gpu", lambda: gpu)
    monkeypatch.setattr(judge_memcheck, "find_compute_sanitizer", lambda: "/cuda/bin/compute-sanitizer")
    monkeypatch.setattr(judge_memcheck, "VariantJob", _FakeSanitizerJob)
    monkeypatch.setattr(_FakeSanitizerJob, "runs", runs)
    judge = SimpleNamespace(require_task=lambda: TASK, workdir=tmp_path, ref=SimpleNamespace(writes={}), on_log=None)
    answer = judge_memcheck.sanitize(judge, Sanitize(source="# v\n"))  # type: ignore[arg-type]
    return _result(json.loads(json.dumps(encode_reply(1, Reply(result=answer)), default=str)))


def _evaluator(reply: Any) -> Evaluator:
    """The session's Evaluator whose judge answers ``reply`` to the sanitize op (or raises
    it), and a passed run to the calls past int32 offsets."""
    def send(request: Any, _timeout: float) -> Any:
        if isinstance(request, WideCalls):
            return json.loads(json.dumps(WIDE_PASSED.to_dict()))
        assert isinstance(request, Sanitize)
        if isinstance(reply, Exception):
            raise reply
        return reply

    ev = Evaluator.__new__(Evaluator)
    ev.client = SimpleNamespace(info=SimpleNamespace(interpreted=False), send=send)  # type: ignore[assignment]
    ev._ensure_worker = lambda: None  # type: ignore[method-assign]
    ev._deadline = lambda *_a: 1.0  # type: ignore[method-assign]
    return ev


class _Finalist:
    """The primary worker at the end of a search: the real Evaluator's sanitize, a 2x paired timing."""

    interpreted, worker_restarts, baseline, lanes = False, 0, None, 1

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self.facts = DeviceFacts()

    def sanitize(self, variant: Variant) -> Any:
        return self.evaluator.sanitize(variant)

    def wide_calls(self, variant: Variant) -> WideReport:
        return WIDE_PASSED

    def paired_timing(self, variant: Variant, rounds: int = 10) -> PairedTiming:
        return PairedTiming(2.0, 1.0, 2.0, 1.9, 2.1, rounds, "cuda-events")


def _outputs(reply: Any) -> dict[str, Any]:
    """What `check --json`, `optimize --json` and the agent's optimize report say of ``reply``."""
    check = CheckOutcome(file=TASK.module_path, kernel="k", harness="bench_k", variant="v.py",
                         checked=check_scope(TASK), status=Status.OK, message="")
    before, logged = check.to_dict(), []
    refused = _verification_refuses(_evaluator(reply), Variant("# v\n", id="v"), check, logged.append)
    printed_check = check.to_dict()  # what changed in the printed object: the memcheck, maybe the verdict
    out = {k: v for k, v in printed_check.items() if k != "checked" and before.get(k) != v}
    out["checked"] = {k: printed_check["checked"][k] for k in ("memcheck", "wide")}
    original = Candidate(id="o", variant=Variant(source="# o\n", id="o"), time_ms=2.0)
    best = Candidate(id="b", variant=Variant(source="# v\n", id="b"), time_ms=1.0, parent_id="o")
    outcome = SearchOutcome(session_id="s", stop_reason="budget", original=original, best=best, strategy_path=["tiling"],
                            evaluations=2, seconds=1.0, tokens=0, dollars=0.0, history=[], warnings=[])
    warnings: list[str] = []
    result = ResultBuilder(TASK, SessionConfig(), _Finalist(_evaluator(reply)), warnings.append,  # type: ignore[arg-type]
                           lambda _m: None).build(outcome)
    printed = json.loads(json.dumps(result.to_dict()))
    again = Result.from_dict(printed).to_dict()  # read back (the editor, the agent, the store)
    assert again == printed
    agent = optimize_report(Result.from_dict(printed), "k.py", "kernelband://results")
    return {"check": {"refused": refused, "out": out, "log": logged},
            "optimize": {k: printed.get(k) for k in ("status", "memcheck", "checked", "message", "unverified_variant_id")}
            | {"has_memcheck_key": "memcheck" in printed, "warnings": warnings},
            "agent_memcheck": json.loads(json.dumps(agent.checked.memcheck.__dict__)) if agent.checked else None}


MEMCHECK_FAILS = {
    # a refused variant is not run on the calls past int32 offsets: nothing left to decide
    "check": {"refused": True, "log": [SANITIZER_LOG],
              "out": {"checked": {"memcheck": {"ran": True, "ok": False, "findings": [
                  "Invalid __global__ write of size 4 bytes", "ERROR SUMMARY: 1 error"]},
                  "wide": {"ran": False, "reason": "not run: compute-sanitizer refused the variant first"}},
                      "sanitizer": {"ran": True, "ok": False, "tool": "memcheck", "exit_code": 86, "job": "ok",
                                    "findings": ["Invalid __global__ write of size 4 bytes", "ERROR SUMMARY: 1 error"],
                                    "harnesses": ["test_k"], "tools": ["memcheck"]},
                      "status": "runtime_error",
                      "message": "passed every comparison, but fails compute-sanitizer memcheck: Invalid __global__ "
                                 "write of size 4 bytes; ERROR SUMMARY: 1 error"}},
    "optimize": {"status": "no_improvement",
                 "memcheck": {"ran": True, "ok": False, "tool": "memcheck", "exit_code": 86, "job": "ok",
                              "findings": ["Invalid __global__ write of size 4 bytes", "ERROR SUMMARY: 1 error"],
                              "harnesses": ["test_k"], "tools": ["memcheck"]},
                 "checked": {"seeds": [0, 1, 2], "harness": "bench_k", "harnesses": ["bench_k", "test_k"],
                             "checks": None,
                             "memcheck": {"ran": True, "ok": False, "findings": [
                                 "Invalid __global__ write of size 4 bytes", "ERROR SUMMARY: 1 error"]},
                             "wide": {"ran": False, "reason": "not run: compute-sanitizer refused the variant first"}},
                 "message": "the best candidate fails compute-sanitizer memcheck: Invalid __global__ write of size 4 "
                            "bytes; ERROR SUMMARY: 1 error: not reported",
                 "unverified_variant_id": "b", "has_memcheck_key": True,
                 "warnings": ["the best candidate fails compute-sanitizer memcheck: Invalid __global__ write of size 4 "
                              "bytes; ERROR SUMMARY: 1 error"]},
    "agent_memcheck": {"ran": True, "ok": False, "findings": ["Invalid __global__ write of size 4 bytes",
                                                              "ERROR SUMMARY: 1 error"], "reason": ""},
}


def _without_checks(outputs: dict[str, Any]) -> dict[str, Any]:
    """The list of trust checks has its own tests: not pinned here."""
    checked = outputs["optimize"]["checked"]
    assert isinstance(checked["checks"], list) and checked["checks"]
    checked["checks"] = None
    return outputs


def test_a_memcheck_finding(monkeypatch, tmp_path):
    reply = _judge_reply(monkeypatch, tmp_path, {"memcheck": (INVALID_WRITE, 86), "racecheck": (CLEAN_RACECHECK, 0)})
    assert _without_checks(_outputs(reply)) == MEMCHECK_FAILS


def test_a_racecheck_finding_after_a_clean_memcheck(monkeypatch, tmp_path):
    reply = _judge_reply(monkeypatch, tmp_path, {"memcheck": (CLEAN_MEMCHECK, 0), "racecheck": (RACE, 86)})
    race = ["Error: Race reported between Write access and Read access",
            "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"]
    report = {"ran": True, "ok": False, "tool": "racecheck", "exit_code": 86, "job": "ok", "findings": race,
              "harnesses": ["test_k"], "tools": ["memcheck", "racecheck"]}
    outputs = _without_checks(_outputs(reply))
    assert outputs["check"]["out"]["sanitizer"] == report and outputs["optimize"]["memcheck"] == report
    assert outputs["check"]["out"]["checked"]["memcheck"] == {"ran": True, "ok": False, "findings": race}
    assert outputs["check"]["out"]["message"] == f"passed every comparison, but fails compute-sanitizer racecheck: {'; '.join(race)}"
    assert outputs["agent_memcheck"] == {"ran": True, "ok": False, "findings": race, "reason": ""}


def test_both_tools_clean(monkeypatch, tmp_path):
    reply = _judge_reply(monkeypatch, tmp_path, {"memcheck": (CLEAN_MEMCHECK, 0), "racecheck": (CLEAN_RACECHECK, 0)})
    outputs = _without_checks(_outputs(reply))
    assert outputs["check"] == {"refused": False, "log": [SANITIZER_LOG, WIDE_LOG],
                                "out": {"checked": {"memcheck": {"ran": True, "ok": True, "findings": []},
                                                    "wide": WIDE_PASSED.summary()},
                                        "sanitizer": {"ran": True, "ok": True, "tool": "racecheck", "exit_code": 0,
                                                      "job": "ok", "findings": [], "harnesses": ["test_k"],
                                                      "tools": ["memcheck", "racecheck"]}}}
    assert outputs["optimize"]["status"] == "improved" and not outputs["optimize"]["has_memcheck_key"]
    assert outputs["optimize"]["checked"]["memcheck"] == {"ran": True, "ok": True, "findings": []}
    assert outputs["agent_memcheck"] == {"ran": True, "ok": True, "findings": [], "reason": ""}


@pytest.mark.parametrize("cause, reason", [
    ("no gpu", "no GPU: the interpreter has no compute-sanitizer"),
    ("judge error", "memcheck could not run: the op raised"),
])
def test_not_run(monkeypatch, tmp_path, cause, reason):
    reply = (_judge_reply(monkeypatch, tmp_path, {}, gpu=False) if cause == "no gpu"
             else WorkerError(ErrorKind.ERROR, "the op raised"))
    outputs = _without_checks(_outputs(reply))
    assert outputs["check"] == {"refused": False, "out": {"checked": {"memcheck": {"ran": False, "reason": reason},
                                                                      "wide": WIDE_PASSED.summary()},
                                                          "sanitizer": {"ran": False, "ok": True, "reason": reason}},
                                "log": [SANITIZER_LOG, f"warning: out-of-bounds accesses and races not checked: {reason}",
                                        WIDE_LOG]}
    assert outputs["optimize"]["status"] == "improved" and not outputs["optimize"]["has_memcheck_key"]
    assert outputs["optimize"]["checked"]["memcheck"] == {"ran": False, "reason": reason}
    assert outputs["optimize"]["warnings"] == [f"out-of-bounds accesses and races not checked: {reason}"]
    assert outputs["agent_memcheck"] == {"ran": False, "ok": None, "findings": [], "reason": reason}


@pytest.mark.parametrize("memcheck, says", [
    (("", 1), "job: ok; exit code 1; no summary in its log"),
    (("========= COMPUTE-SANITIZER\n", 0), "job: ok; exit code 0; no summary in its log; its log ends: 'COMPUTE-SANITIZER'"),
    ((CLEAN_MEMCHECK, 3), "job: ok; exit code 3; its summary in its log; its log ends: 'ERROR SUMMARY: 0 errors'"),
])
def test_a_run_that_did_not_finish_is_not_clean(monkeypatch, tmp_path, memcheck, says):
    """Abuse of a quiet log: compute-sanitizer that could not write its log, stopped early,
    or whose target exited abnormally found nothing because it checked nothing. Its report
    is "not run" (a warning on the result, as on a machine without the tool), never clean,
    and racecheck is not asked after it."""
    reply = _judge_reply(monkeypatch, tmp_path, {"memcheck": memcheck, "racecheck": (CLEAN_RACECHECK, 0)})
    reason = f"compute-sanitizer memcheck did not finish a run of the harnesses ({says})"
    outputs = _without_checks(_outputs(reply))
    assert outputs["check"]["out"]["sanitizer"] == {"ran": False, "ok": True, "reason": reason}
    assert outputs["optimize"]["checked"]["memcheck"] == {"ran": False, "reason": reason}
    assert outputs["optimize"]["warnings"] == [f"out-of-bounds accesses and races not checked: {reason}"]


@pytest.mark.parametrize("error", [
    "Error: No attachable process found. compute-sanitizer timed-out.",
    "Error: Target application terminated before first instrumented API call",
])
def test_the_tools_own_error_is_not_a_clean_run(monkeypatch, tmp_path, error):
    """compute-sanitizer that could not attach to its target still ends with a zero summary
    and the target's exit code 0: its own error line says it checked nothing."""
    log = f"========= COMPUTE-SANITIZER\n========= {error}\n========= ERROR SUMMARY: 0 errors\n"
    reply = _judge_reply(monkeypatch, tmp_path, {"memcheck": (log, 0), "racecheck": (CLEAN_RACECHECK, 0)})
    outputs = _without_checks(_outputs(reply))
    reason = f"compute-sanitizer memcheck did not check the harnesses: {error}"
    assert outputs["check"]["out"]["sanitizer"] == {"ran": False, "ok": True, "reason": reason}
    # a race report starts with "Error:" too, and stays a finding
    race = _judge_reply(monkeypatch, tmp_path, {"memcheck": (CLEAN_MEMCHECK, 0), "racecheck": (RACE, 86)})
    assert _without_checks(_outputs(race))["optimize"]["memcheck"]["ok"] is False


@pytest.mark.parametrize("reply, says", [
    ({"ran": True, "ok": "no"}, "malformed sanitizer report: ok must be bool"),
    ({"ran": True, "ok": False, "verdict": "x"}, "malformed sanitizer report: unknown field(s) 'verdict'"),
    ({"ok": True}, "malformed sanitizer report: missing required field 'ran'"),
    (["ran"], "malformed sanitizer report: the body must be an object"),
])
def test_a_reply_that_does_not_decode_is_a_one_line_protocol_error(reply, says):
    report = _evaluator(reply).sanitize(Variant("# v\n", id="v"))
    assert not report.ran and report.reason.startswith(f"memcheck could not run: {says}")
    assert "\n" not in report.reason


def test_a_stored_report_that_does_not_decode_reads_as_none():
    assert Result.from_dict({"status": "no_improvement", "memcheck": {"ran": "yes"}}).memcheck is None


class _TimedSanitizerJob(_FakeSanitizerJob):
    """A tool's job that takes a while, saying when it ran."""

    spans: list[tuple[str, float, float]] = []

    def __init__(self, job: Any, **kwargs: Any) -> None:
        super().__init__(job, **kwargs)
        self.proc = SimpleNamespace(wait=self._wait)

    def start(self, device: Any) -> None:
        self.began = time.monotonic()
        super().start(device)

    def _wait(self, timeout: float) -> int:
        time.sleep(0.4)
        self.spans.append((self.tool, self.began, time.monotonic()))
        return self.runs[self.tool][1]


def test_the_tools_run_side_by_side_only_when_they_fit(monkeypatch, tmp_path, tools_together):
    """Side by side, both tools' runs are under way at once; one at a time, the second
    starts after the first ended (and a memcheck finding leaves racecheck unasked)."""
    monkeypatch.setattr(_TimedSanitizerJob, "spans", [])
    monkeypatch.setattr(judge_memcheck, "VariantJob", _TimedSanitizerJob)
    monkeypatch.setattr(judge_memcheck, "gpu", lambda: True)
    monkeypatch.setattr(judge_memcheck, "find_compute_sanitizer", lambda: "/cuda/bin/compute-sanitizer")
    monkeypatch.setattr(_FakeSanitizerJob, "runs", {"memcheck": (CLEAN_MEMCHECK, 0), "racecheck": (CLEAN_RACECHECK, 0)})
    judge = SimpleNamespace(require_task=lambda: TASK, workdir=tmp_path, ref=SimpleNamespace(writes={}), on_log=None)
    report = judge_memcheck._sanitize(judge, Sanitize(source="# v\n"))  # type: ignore[arg-type]
    assert report.ok and report.tools == ("memcheck", "racecheck")
    spans = sorted(_TimedSanitizerJob.spans, key=lambda s: s[1])
    assert [s[0] for s in spans] == ["memcheck", "racecheck"] or tools_together
    overlap = spans[1][1] < spans[0][2]
    assert overlap == tools_together


@pytest.mark.parametrize("peak, free, together", [
    (0, 100 << 30, False),  # the original's peak unknown: one at a time
    (4 << 30, 100 << 30, True),
    (40 << 30, 80 << 30, False),  # two 40 GiB runs and the margin do not fit in 80 GiB
    (39 << 30, 80 << 30, True),
])
def test_side_by_side_needs_the_memory_for_every_tool(monkeypatch, peak, free, together):
    monkeypatch.undo()  # the real gate, not the fixture's
    monkeypatch.setattr(judge_memcheck.torch.cuda, "mem_get_info", lambda: (free, 141 << 30))
    judge = SimpleNamespace(ref=SimpleNamespace(cuda_peak=peak))
    assert judge_memcheck.tools_fit_together(judge) is together  # type: ignore[arg-type]


UNFINISHED = "shared-memory races not checked: racecheck did not finish in 60 s"


def test_racecheck_past_its_time_leaves_memchecks_verdict_and_a_warning(monkeypatch, tmp_path):
    """racecheck instruments every shared-memory access (86 s a launch of the matmul
    example's harness): past its time after a clean memcheck, memcheck's verdict stands and
    the races are reported unchecked, a warning on the result, never clean."""
    reply = _judge_reply(monkeypatch, tmp_path, {"memcheck": (CLEAN_MEMCHECK, 0), "racecheck": ("", "timeout")})
    outputs = _without_checks(_outputs(reply))
    sanitizer = outputs["check"]["out"]["sanitizer"]
    assert sanitizer["ran"] and sanitizer["ok"] and sanitizer["tools"] == ["memcheck"]
    assert sanitizer["unfinished"] == UNFINISHED
    assert outputs["check"]["refused"] is False and f"warning: {UNFINISHED}" in outputs["check"]["log"]
    assert outputs["optimize"]["status"] == "improved" and UNFINISHED in outputs["optimize"]["warnings"]
    assert outputs["optimize"]["checked"]["memcheck"] == {"ran": True, "ok": True, "findings": [], "unfinished": UNFINISHED}
    assert outputs["agent_memcheck"] == {"ran": True, "ok": True, "findings": [], "reason": UNFINISHED}


@pytest.mark.parametrize("runs, says", [
    # memcheck past its time: nothing checked, never partial credit
    ({"memcheck": ("", "timeout"), "racecheck": (CLEAN_RACECHECK, 0)}, "compute-sanitizer memcheck did not finish"),
    # racecheck crashed (not its time): its run says nothing, the whole report is not run
    ({"memcheck": (CLEAN_MEMCHECK, 0), "racecheck": ("", "crashed")}, "compute-sanitizer racecheck did not finish"),
])
def test_only_racecheck_past_its_time_is_partial(monkeypatch, tmp_path, runs, says):
    """Abuse of the partial report: a variant that hangs memcheck, or crashes racecheck's
    run, gets no clean memcheck out of it."""
    reply = _judge_reply(monkeypatch, tmp_path, runs)
    outputs = _without_checks(_outputs(reply))
    sanitizer = outputs["check"]["out"]["sanitizer"]
    assert sanitizer["ran"] is False and sanitizer["reason"].startswith(says), sanitizer


def test_a_race_found_in_time_still_refuses(monkeypatch, tmp_path):
    reply = _judge_reply(monkeypatch, tmp_path, {"memcheck": (CLEAN_MEMCHECK, 0), "racecheck": (RACE, 86)})
    assert _without_checks(_outputs(reply))["check"]["refused"] is True

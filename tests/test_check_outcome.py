"""CheckOutcome, what ``kernelband check --json`` prints: printed and read back unchanged,
decoded once at the receiving end (the language server's job pipe), and a malformed
object refused there in one line that names what is wrong."""
from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.check_outcomes import CHECK_GPU_PAIRED, CHECK_OK_INTERPRETED
from kernelband.check_outcome import CheckOutcome
from kernelband.decode import MalformedMessage
from kernelband.model import ResultStatus, SanitizerReport, Status
from kernelband_lsp.jobio import take_output
from kernelband_lsp.jobmodel import CHECK, Job, JobSpec


@pytest.mark.parametrize("printed", [CHECK_OK_INTERPRETED, CHECK_GPU_PAIRED], ids=["interpreted", "gpu-paired"])
def test_read_back_it_prints_the_same_object(printed):
    outcome = CheckOutcome.from_dict(json.loads(json.dumps(printed)))
    assert outcome.to_dict() == printed
    assert outcome.to_dict()["checked"] == printed["checked"]


def test_fields_are_typed():
    gpu = CheckOutcome.from_dict(CHECK_GPU_PAIRED)
    assert gpu.status is Status.OK and gpu.ok and gpu.verdict is ResultStatus.IMPROVED
    assert gpu.speedup_ci == (1.35, 1.45) and gpu.rounds == 10 and gpu.errors is not None and gpu.errors.total == 10
    assert isinstance(gpu.sanitizer, SanitizerReport) and gpu.sanitizer.tools == ("memcheck", "racecheck")
    assert gpu.checked.memcheck == SanitizerReport.not_run("GPU only: ...") and gpu.warnings == ["noisy"]


def test_a_rejected_variant_prints_its_keys_in_the_order_it_always_did():
    rejected = {**{k: CHECK_OK_INTERPRETED[k] for k in ("file", "kernel", "harness", "variant", "checked")},
                "status": "rejected", "message": "variant imports os", "errors": None, "speed_claim": False,
                "paired": False}
    outcome = CheckOutcome.from_dict(rejected)
    assert outcome.interpreted is None and outcome.errors is None
    assert list(outcome.to_dict().items()) == list(rejected.items())


def test_keys_this_version_does_not_know_are_kept():
    outcome = CheckOutcome.from_dict({**CHECK_OK_INTERPRETED, "newer": {"x": 1}})
    assert outcome.extra == {"newer": {"x": 1}} and outcome.to_dict()["newer"] == {"x": 1}


def _without(key: str) -> dict[str, Any]:
    return {k: v for k, v in CHECK_OK_INTERPRETED.items() if k != key}


MALFORMED = [
    (["status", "ok"], "the body must be an object, got list"),
    (_without("status"), "missing required field(s) 'status'"),
    (_without("errors"), "missing required field(s) 'errors'"),
    ({"status": "ok"}, "missing required field(s) 'file', 'kernel', 'harness', 'variant', 'checked', 'message'"),
    ({**CHECK_OK_INTERPRETED, "status": "great"}, "status must be 'ok' or 'compile_error'"),
    ({**CHECK_OK_INTERPRETED, "verdict": "faster"}, "verdict must be 'improved' or"),
    ({**CHECK_OK_INTERPRETED, "status": 0}, "status must be 'ok'"),
    ({**CHECK_OK_INTERPRETED, "speed_claim": 1}, "speed_claim must be bool, got int"),
    ({**CHECK_OK_INTERPRETED, "speedup": "1.4"}, "speedup must be float or null, got str"),
    ({**CHECK_OK_INTERPRETED, "speedup_ci": [1.0]}, "speedup_ci must be a list [float, float]"),
    ({**CHECK_OK_INTERPRETED, "message": None}, "message must be str, got NoneType"),
    ({**CHECK_OK_INTERPRETED, "errors": {"total": "ten"}}, "errors.total must be int, got str"),
    ({**CHECK_OK_INTERPRETED, "checked": {**CHECK_OK_INTERPRETED["checked"], "seeds": ["a"]}},
     "checked.seeds[0] must be int, got str"),
    ({**CHECK_OK_INTERPRETED, "checked": {**CHECK_OK_INTERPRETED["checked"], "memcheck": {"ran": "yes"}}},
     "checked.memcheck.ran must be bool, got str"),
    ({**CHECK_OK_INTERPRETED, "sanitizer": {"ran": True, "verdict": "x"}}, "unknown field(s) 'verdict' in sanitizer"),
    ({**CHECK_OK_INTERPRETED, "warnings": "noisy"}, "warnings must be a list of str, got str"),
]


@pytest.mark.parametrize("body, says", MALFORMED, ids=[says[:40] for _, says in MALFORMED])
def test_a_malformed_report_is_one_line_naming_what_is_wrong(body, says):
    with pytest.raises(MalformedMessage) as e:
        CheckOutcome.from_dict(body)
    assert str(e.value).startswith(f"malformed check report: {says}"), str(e.value)
    assert "\n" not in str(e.value)


def _check_job(printed: str) -> Job:
    job = Job(id="j1", spec=JobSpec(kind=CHECK, path="/ws/k.py", kernel="k", source=""))
    job.stdout_other = printed.splitlines()
    return job


def test_the_server_decodes_the_printed_check_once():
    job = _check_job(json.dumps(CHECK_GPU_PAIRED, indent=2))
    assert take_output(job) and isinstance(job.check, CheckOutcome) and job.error is None
    assert job.check.to_dict() == CHECK_GPU_PAIRED


def test_a_malformed_check_fails_its_job_in_one_line():
    job = _check_job(json.dumps({**CHECK_OK_INTERPRETED, "status": "great"}, indent=2))
    assert not take_output(job) and job.check is None
    assert job.error is not None and job.error.startswith("malformed check report: status must be 'ok'")
    assert "\n" not in job.error

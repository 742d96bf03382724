"""The original's references beyond the harness made while the first candidates start
(kernelband/worker/judge_derivation.py): on a GPU with room, prepare returns before the
original's derived calls have run, and a candidate waits for them only before its checks
after its timing. ``KERNELBAND_DERIVE=background`` takes that path under the interpreter.

What would abuse it: a candidate that reaches those checks before the references exist
(it must be checked on them all the same, not on none), and an original whose derived
calls cannot be run at all (no candidate may then pass unchecked beyond the harness)."""
from __future__ import annotations

import threading

import pytest
from helpers.kernels import CORRECT_BEYOND as CORRECT, SCALE, SLOW_BEYOND, WRONG_BEYOND, prepared_evaluator, sleeping_beyond

from kernelband.evaluate import SetupError
from kernelband.model import Status, Variant
from kernelband.worker.judge_core import Reference
from kernelband.worker.judge_derivation import OriginalUnusable, wait_for_references

@pytest.fixture
def background(monkeypatch):
    monkeypatch.setenv("KERNELBAND_DERIVE", "background")


def test_a_candidate_that_arrives_before_the_references_is_checked_on_them(tmp_path, background):
    assert SLOW_BEYOND.count("time.sleep") == 1 and WRONG_BEYOND != SLOW_BEYOND != CORRECT
    ev = prepared_evaluator(tmp_path, "slow_beyond", SLOW_BEYOND, "scale_kernel", "harness_scale")
    try:
        assert ev.baseline is not None and ev.baseline.derived_calls > 0  # the deadline allows for the wait
        wrong = ev.evaluate(Variant(WRONG_BEYOND), time_it=False)
        assert wrong.status == Status.MISMATCH and "beyond the harness" in wrong.message, wrong.message
        assert wrong.phases.get("wait_for_references", 0.0) > 0.1, wrong.phases  # it did arrive first
        right = ev.evaluate(Variant(CORRECT), time_it=False)
        assert right.ok and "calls beyond the harness" in right.message, right.message
    finally:
        ev.close()


def test_a_candidates_checks_on_the_harness_run_before_the_references_exist(tmp_path, background, monkeypatch):
    """Only the calls beyond the harness need the derivation's references: a candidate's
    other seeds, neutralised launches and re-check after timing are judged while the
    derivation still runs (its frames come before ``derive.done``), and the calls beyond
    after it."""
    import json

    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("KERNELBAND_TRACE", str(trace))
    ev = prepared_evaluator(tmp_path, "slow_beyond", SLOW_BEYOND, "scale_kernel", "harness_scale")
    try:
        right = ev.evaluate(Variant(CORRECT), time_it=False)
        assert right.ok and "calls beyond the harness" in right.message, right.message
    finally:
        ev.close()
    marks = [json.loads(line) for line in trace.read_text().splitlines()]
    done = next(m["t"] for m in marks if m["what"] == "derive.done")
    job = [m for m in marks if m["what"] == "job.request" and m.get("trusted") is False][0]["job"]
    frames = [m for m in marks if m["what"] == "job.frame" and m.get("job") == job and m.get("kind") == "outputs"]
    harness = [m["t"] for m in frames if m.get("frame")]  # "harness_scale seed S check|neutral"
    beyond = [m["t"] for m in frames if not m.get("frame") and m["t"] > max(harness)]  # (the replay's is unlabelled)
    assert len(harness) >= 4 and beyond, frames  # the kept run, seed 1, the neutral run, the re-check
    assert max(harness) < done < min(beyond), (harness, done, beyond)
    # the derivation's phases, for reading a GPU trace: its job, its frames, their judging
    phases = [m["what"] for m in marks if m["what"].startswith("derive.")]
    assert phases == ["derive.start", "derive.job", "derive.frames", "derive.absorbed", "derive.done"], phases
    assert next(m for m in marks if m["what"] == "derive.job")["frames_on"] == "host"  # the interpreter's


@pytest.mark.slow  # the original's process dies on a call, twice over: about a minute interpreted
def test_notes_of_a_derivation_after_prepare_reach_the_evaluations(tmp_path, background):
    """The calls the original's process dies on are dropped with a note, as before prepare
    returned: the note comes with the evaluations that follow."""
    dies = SCALE.replace("    x = tl.load(x_ptr + offs, mask=mask)\n",
                         "    far = tl.where(n > 4096, 100000000000, 0)\n"
                         "    x = tl.load(x_ptr + offs + far, mask=mask)\n")
    ev = prepared_evaluator(tmp_path, "dies", dies, "scale_kernel", "harness_scale")
    try:
        assert "process fails on it" not in ev.baseline.message  # not known yet
        ok = ev.evaluate(Variant(dies.replace("x * factor", "factor * x")), time_it=False)
        assert ok.ok and "calls beyond the harness" in ok.message, ok.message
        assert any("process fails on it" in n for n in ok.notes), ok.notes
        wrong = ev.evaluate(Variant(dies.replace("x * factor", "x * factor + (x > 100.0)")), time_it=False)
        assert wrong.status == Status.MISMATCH and "beyond the harness" in wrong.message, wrong.message
    finally:
        ev.close()


@pytest.mark.slow  # the derivation's deadline is waited out (about a minute)
def test_no_candidate_passes_when_the_originals_derived_calls_cannot_run(tmp_path, background):
    """The original hangs on every call beyond the harness: its derivation times out after
    prepare returned. A candidate is then neither passed unchecked beyond the harness nor
    refused as if it were wrong: the evaluation ends the search (SetupError), saying why."""
    hangs = sleeping_beyond(3600)
    ev = prepared_evaluator(tmp_path, "hangs", hangs, "scale_kernel", "harness_scale", timeout_s=1.0)
    try:
        with pytest.raises(SetupError, match="^the original kernel could not be run on inputs beyond its harness") \
                as e:
            ev.evaluate(Variant(hangs.replace("x * factor", "factor * x")), time_it=False)
        assert "OriginalUnusable" not in str(e.value), e.value  # the kind said it: the class is not in the words
    finally:
        ev.close()


def test_waiting_candidates_get_the_failure_not_a_pass():
    """Unit: the wait returns only final references, and raises where they failed."""
    from types import SimpleNamespace

    ref = Reference(derived_failure="the original kernel could not be run on inputs beyond its harness (timeout)")
    judge = SimpleNamespace(ref=ref, require_task=lambda: SimpleNamespace(timeout_s=0.01))
    released = threading.Timer(0.2, ref.derived_ready.set)
    released.start()
    with pytest.raises(OriginalUnusable, match="beyond its harness"):
        wait_for_references(judge)  # type: ignore[arg-type]
    ok = Reference()
    ok.derived_ready.set()
    assert wait_for_references(SimpleNamespace(ref=ok, require_task=lambda: SimpleNamespace(timeout_s=1.0))) is ok  # type: ignore[arg-type]


# the original's harness, slow after its first run: the derivation, started at that run,
# has its frames before the reference job has finished
SLOW_AFTER_FIRST_RUN = "import time\n" + SCALE.replace(
    "def harness_scale():\n", "_RUNS = []\n\n\ndef harness_scale():\n    _RUNS.append(1)\n"
    "    if len(_RUNS) == 2:\n        time.sleep(8.0)\n")


def test_an_early_derivation_judges_its_frames_only_once_the_references_are_final(tmp_path, background, monkeypatch):
    """The derivation starts at the original's first run of the harness, while its reference
    job goes on; frames that come before prepare has made the references final (moved to
    the GPU, or kept on the host) wait for them, so that the derived references are judged
    beside the final ones, and a candidate is checked on them all the same."""
    import json

    assert SLOW_AFTER_FIRST_RUN.count("time.sleep") == 1
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("KERNELBAND_TRACE", str(trace))
    ev = prepared_evaluator(tmp_path, "slow_after_first", SLOW_AFTER_FIRST_RUN, "scale_kernel", "harness_scale",
                            seeds=(0,))
    try:
        wrong_beyond = SLOW_AFTER_FIRST_RUN.replace("x * factor, mask=mask)", "x * factor + (n != 4096), mask=mask)")
        wrong = ev.evaluate(Variant(wrong_beyond), time_it=False)
    finally:
        ev.close()
    marks = [json.loads(line) for line in trace.read_text().splitlines()]

    def at(what: str) -> float:
        return next(m["t"] for m in marks if m["what"] == what)

    reference_job = next(m["job"] for m in marks if m["what"] == "job.request" and m.get("trusted"))
    reference_frames = [m["t"] for m in marks if m["what"] == "job.frame" and m.get("job") == reference_job]
    assert at("derive.start") < max(reference_frames)  # started while the reference job ran
    assert at("derive.frames") < at("judge.references_final") <= at("derive.absorbed")
    assert wrong.status == Status.MISMATCH and "beyond the harness" in wrong.message, wrong.message

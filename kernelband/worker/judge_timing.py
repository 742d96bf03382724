"""The judge's timing ops beyond a candidate's evaluation: the paired A B A B
re-measurement of the winner against the original (``paired``), the original timed as a
candidate is (``retime``), and a profile of the original or of a variant (``profile``).
Each runs one variant job and follows its frames (``_follow``)."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Optional, TypeVar


from ..json_types import JsonObject
from ..profile.schema import Profile
from .compare import compare_outputs
from .gpu_lock import gpu_lock
from .jobs import Frame, JobFailed, VariantJob
from .judge_core import JudgeCore, Lane, deadline_s, gpu, sample_step
from .messages import (
    ErrorFrame,
    FrameMeta,
    Mark,
    ProfileFrame,
    ProfileStep,
    ReplayCheck,
    ReplayOutputs,
    Run,
    RunOutputs,
    SampleFrame,
    Samples,
    SamplesFrame,
    Step,
    Time,
    TimingFrame,
)
from .observe import comparable
from .requests import Paired, ProfileRun, Retime
from .stats import median_timing, paired_statistics

# Tests only: make the paired re-measurement fail with this text (frozen replays leave a
# correct variant no way to fail it, yet the CLI's handling of that failure is tested).
_TEST_PAIRED_FAILURE_ENV = "KERNELBAND_TEST_PAIRED_FAILURE"
_TEST_PAIRED_ORDER_ENV = "KERNELBAND_TEST_PAIRED_ORDER"


R = TypeVar("R")


def _follow(job: VariantJob, failed: str, on_frame: Callable[[Frame[FrameMeta]], Optional[R]]) -> Optional[R]:
    """Feed the job's frames to ``on_frame`` until it returns a result (then that
    result); None when the frames end first. A job that dies ends in RuntimeError
    ("<failed> (<how>): ..."); the job is closed either way."""
    try:
        for frame in job.frames():
            got = on_frame(frame)
            if got is not None:
                return got
    except JobFailed as e:
        raise RuntimeError(f"{failed} ({e.end.kind}): {e}") from None
    finally:
        job.close()
    return None


def _error(frame: Frame[FrameMeta], message: str) -> None:
    if isinstance(frame.meta, ErrorFrame):
        raise RuntimeError(f"{message}: {frame.meta.message}")


def _checked_outputs(judge: JudgeCore, frame: Frame[FrameMeta]) -> bool:
    """A run's outputs, or a replay's where replays of the original reproduce it: both must match the references."""
    return isinstance(frame.meta, RunOutputs) or (isinstance(frame.meta, ReplayOutputs) and judge.ref.replay_valid)


def _must_match(ref: Any, frame: Frame[FrameMeta], message: str, tree: Any = None) -> None:
    """An outputs frame that does not reproduce ``ref`` ends the op: "<message>: why"."""
    verdict = compare_outputs(ref, comparable(frame.tree) if tree is None else tree)
    if not verdict.ok:
        raise RuntimeError(f"{message}: {verdict.message}")


def _reference_of(judge: JudgeCore) -> Any:
    task = judge.require_task()
    return judge.ref.outputs[(task.harness, task.seeds[0])]


def _kept_run(module: str, harness: str, seed: int) -> list[Step]:
    """A checked run of ``module`` kept for replays, then its replay check."""
    return [Run(module, harness, seed, "check", keep=module), ReplayCheck(module)]


def _kept_and_checked(judge: JudgeCore, job: VariantJob, key: str, what: str) -> None:
    """Read a job's kept run and its replay check (up to the mark): both must reproduce the
    references."""
    ref = _reference_of(judge)
    for frame in job.until_mark():
        _error(frame, f"{what} no longer passes")
        if _checked_outputs(judge, frame):
            _must_match(ref, frame, f"{what} no longer passes in the paired run", comparable(frame.tree))


def paired(judge: JudgeCore, req: Paired) -> JsonObject:
    """The winner against the original, each in its own process: interleaved rounds with
    the reference lane under one exclusive GPU turn (as every candidate was timed in the
    search), or, where two runs do not fit on the GPU, the original's block of samples and
    then the winner's, one process after the other."""
    judge.require_task()  # raises when no task was prepared
    simulated = os.environ.get(_TEST_PAIRED_FAILURE_ENV)
    if simulated:  # tests only: the failure path of a re-measurement, which real variants no longer reach
        raise RuntimeError(simulated)
    rounds, vid = req.rounds, req.variant_id
    forced = os.environ.get(_TEST_PAIRED_ORDER_ENV)
    lane = judge.lane if (judge.lane is not None and judge.lane.alive and forced != "sequential") else None
    try:
        if lane is not None:
            return _paired_with_lane(judge, lane, req.source, rounds, f"variant {vid}")
        return _paired_in_sequence(judge, req.source, rounds, f"variant {vid}")
    except JobFailed as e:
        raise RuntimeError(f"paired timing failed ({e.end.kind}): {e}") from None


def _paired_with_lane(judge: JudgeCore, lane: Lane, source: str, rounds: int, what: str) -> JsonObject:
    task = judge.require_task()
    steps = [*_kept_run("v", task.harness, task.seeds[0]), Mark()]
    job = judge.job({"v": source}, steps, 2 + rounds, trusted=False, interactive=True)
    try:
        _kept_and_checked(judge, job, "v", what)
        a_ms: list[float] = []
        b_ms: list[float] = []
        clock = ""
        with lane.lock, gpu_lock(exclusive=True) if gpu() else contextlib.nullcontext():
            for r in range(max(rounds, 2)):
                for who in ("v", "o") if r % 2 == 0 else ("o", "v"):
                    if who == "o":
                        ms, clock = lane.sample(True, deadline_s(task.timeout_s, 1), paired=True)
                        a_ms.append(ms)
                    else:
                        job.command([sample_step("v", True, paired=True)], deadline_s(task.timeout_s, 1))
                        frame = job.next_frame()
                        _error(frame, f"{what} failed while timed")
                        if not isinstance(frame.meta, SampleFrame):
                            raise RuntimeError(f"{what} answered a timing request with a {frame.kind} frame")
                        b_ms.append(frame.meta.ms)
        return paired_statistics(a_ms, b_ms, clock, "interleaved").to_dict()
    finally:
        job.close()


def _paired_in_sequence(judge: JudgeCore, source: str, rounds: int, what: str) -> JsonObject:
    task = judge.require_task()
    blocks: dict[str, list[float]] = {}
    clock = ""
    for key, module_source, trusted, label in (("o", task.source, True, "the original"), ("v", source, False, what)):
        steps = [*_kept_run(key, task.harness, task.seeds[0]), Samples(key, rounds), Mark()]
        job = judge.job({key: module_source}, steps, 2 + rounds, trusted=trusted, interactive=True)
        try:
            ref = _reference_of(judge)
            for frame in job.until_mark():
                _error(frame, f"{label} no longer passes")
                if _checked_outputs(judge, frame):
                    _must_match(ref, frame, f"{label} no longer passes in the paired run", comparable(frame.tree))
                if isinstance(frame.meta, SamplesFrame):
                    blocks[key], clock = frame.meta.ms, frame.meta.clock
        finally:
            job.close()
    if "o" not in blocks or "v" not in blocks:
        raise RuntimeError("paired timing ended without a result")
    return paired_statistics(blocks["o"], blocks["v"], clock, "sequential").to_dict()


def retime(judge: JudgeCore, req: Retime) -> JsonObject:
    """The original's time as candidates are timed: samples of the reference lane, or
    (without one) a fresh process's kept run, replay check and frozen replays."""
    task = judge.require_task()
    lane = judge.lane
    if lane is not None and lane.alive:
        samples = []
        clock = ""
        with lane.lock:
            for _ in range(5 if gpu() else 2):
                ms, clock = lane.sample(False, deadline_s(task.timeout_s, 1))
                samples.append(ms)
        return {"timing": median_timing(samples, clock, len(judge.ref.launches)).to_dict()}
    steps = [*_kept_run("o", task.harness, task.seeds[0]), Time("o")]
    ref = _reference_of(judge)
    job = judge.job({"o": task.source}, steps, 3, trusted=True)

    def on_frame(frame: Frame[FrameMeta]) -> Optional[JsonObject]:
        _error(frame, "the original no longer runs")
        if isinstance(frame.meta, RunOutputs):
            _must_match(ref, frame, "the original no longer gives its references")
        return {"timing": frame.meta.timing.to_dict()} if isinstance(frame.meta, TimingFrame) else None

    out = _follow(job, "re-timing the original failed", on_frame)
    if out is None:
        raise RuntimeError("re-timing the original ended without a timing")
    return out


def profile(judge: JudgeCore, req: ProfileRun) -> JsonObject:
    """Profile the original (source None) or a variant at a tier."""
    task = judge.require_task()
    source = req.source or task.source
    variant = req.source is not None
    steps: list[Step] = [
        Run("m", task.harness, task.seeds[0], "check", keep="m"),
        Time("m"),
        ProfileStep("m", source, req.tier, req.facts),
    ]
    job = judge.job({"m": source}, steps, 3, trusted=not variant)
    out: JsonObject = {}

    def on_frame(frame: Frame[FrameMeta]) -> None:
        _error(frame, "cannot profile")
        if frame.kind == "outputs" and variant:
            _must_match(_reference_of(judge), frame, "cannot profile a failing variant")
        if isinstance(frame.meta, TimingFrame):
            out["timing"] = frame.meta.timing.to_dict()
        if isinstance(frame.meta, ProfileFrame):  # checked here, where it leaves the variant process
            prof = Profile.from_wire(frame.meta.profile)
            out["profile"] = prof.to_dict() if prof else None

    _follow(job, "profiling failed", on_frame)
    return out

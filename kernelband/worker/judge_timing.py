"""The judge's timing ops beyond a candidate's evaluation: the paired A B A B
re-measurement of the winner against the original (``paired``), the original timed as a
candidate is (``retime``), and a profile of the original or of a variant (``profile``).
Each runs one variant job and follows its frames (``_follow``)."""
from __future__ import annotations

import os
from typing import Any, Callable, Optional

import torch

from .compare import compare_outputs
from .jobs import Frame, JobFailed, VariantJob
from .judge_core import GPU_MARGIN_BYTES, JudgeCore, gpu
from .judge_original import decoded_bytes
from .stats import paired_statistics

# Tests only: make the paired re-measurement fail with this text (frozen replays leave a
# correct variant no way to fail it, yet the CLI's handling of that failure is tested).
_TEST_PAIRED_FAILURE_ENV = "KERNELBAND_TEST_PAIRED_FAILURE"
_TEST_PAIRED_ORDER_ENV = "KERNELBAND_TEST_PAIRED_ORDER"


def _follow(job: VariantJob, failed: str, on_frame: Callable[[Frame], Optional[Any]]) -> Optional[Any]:
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


def _error(frame: Frame, message: str) -> None:
    if frame.kind == "error":
        raise RuntimeError(f"{message}: {frame.meta.get('message')}")


def _must_match(ref: Any, frame: Frame, message: str) -> None:
    """An outputs frame that does not reproduce ``ref`` ends the op: "<message>: why"."""
    verdict = compare_outputs(ref, frame.tree)
    if not verdict.ok:
        raise RuntimeError(f"{message}: {verdict.message}")


def _reference_of(judge: JudgeCore) -> Any:
    task = judge.require_task()
    return judge.ref.outputs[(task.harness, task.seeds[0])]


def _kept_run(module: str, harness: str, seed: int) -> list[dict[str, Any]]:
    """A checked run of ``module`` kept for replays, then its replay check."""
    return [{"op": "run", "module": module, "harness": harness, "seed": seed, "mode": "check", "keep": module},
            {"op": "replay_check", "key": module}]


def paired_order(judge: JudgeCore) -> str:
    """"interleaved" when two kept runs of the harness fit on the GPU with room for the
    judge to decode one frame of outputs beside them (the original's measured peak twice,
    its outputs once, a margin), else "sequential", one kept run at a time: GPU memory
    stays at one run plus one copy of the outputs, and the outputs are compared on the
    GPU, not on the host. The 32 GiB layernorm interleaved held 65 GiB on the GPU and
    decoded the variant's 16 GiB frames on the host (34.7 GiB there, 43 s per compare).
    Tests force either with KERNELBAND_TEST_PAIRED_ORDER."""
    forced = os.environ.get(_TEST_PAIRED_ORDER_ENV)
    if forced in ("interleaved", "sequential"):
        return forced
    if not gpu() or judge.ref.cuda_peak <= 0:
        return "interleaved"
    free, _ = torch.cuda.mem_get_info()
    outputs = decoded_bytes(_reference_of(judge))
    return "interleaved" if 2 * judge.ref.cuda_peak + outputs + GPU_MARGIN_BYTES <= free else "sequential"


def _paired_steps(task: Any, rounds: int, order: str) -> list[dict[str, Any]]:
    if order == "interleaved":
        return [*_kept_run("o", task.harness, task.seeds[0]), *_kept_run("v", task.harness, task.seeds[0]),
                {"op": "paired", "a": "o", "b": "v", "rounds": rounds}]
    # one run kept at a time: the original's block of samples, then the variant's
    return [*_kept_run("o", task.harness, task.seeds[0]), {"op": "samples", "key": "o", "rounds": rounds},
            {"op": "release", "key": "o"},
            *_kept_run("v", task.harness, task.seeds[0]), {"op": "samples", "key": "v", "rounds": rounds}]


def paired(judge: JudgeCore, req: dict[str, Any]) -> dict[str, Any]:
    """Original and candidate in one fresh process, both replay-checked, timed A B A B
    (or in sequence: ``paired_order``)."""
    task = judge.require_task()
    simulated = os.environ.get(_TEST_PAIRED_FAILURE_ENV)
    if simulated:  # tests only: the failure path of a re-measurement, which real variants no longer reach
        raise RuntimeError(simulated)
    rounds = int(req.get("rounds", 10))
    order = paired_order(judge)
    steps = _paired_steps(task, rounds, order)
    ref, vid = _reference_of(judge), req.get("variant_id")
    job = judge.job({"o": task.source, "v": req["source"]}, steps, 4 + rounds, trusted=False)
    blocks: dict[str, list[float]] = {}

    def on_frame(frame: Frame) -> Optional[dict[str, Any]]:
        _error(frame, f"variant {vid} no longer passes")
        if frame.kind == "outputs" and (frame.meta.get("mode") != "replay" or judge.ref.replay_valid):
            _must_match(ref, frame, f"variant {vid} no longer passes in the paired run")
        if frame.kind == "paired":
            return paired_statistics(frame.meta["a_ms"], frame.meta["b_ms"], frame.meta["clock"]).to_dict()
        if frame.kind == "samples" and order == "sequential":
            blocks[str(frame.meta.get("key"))] = [float(x) for x in frame.meta.get("ms") or []]
            if "o" in blocks and "v" in blocks:
                return paired_statistics(blocks["o"], blocks["v"], frame.meta["clock"], order).to_dict()
        return None

    out = _follow(job, "paired timing failed", on_frame)
    if out is None:
        raise RuntimeError("paired timing ended without a result")
    return out


def retime(judge: JudgeCore, req: dict[str, Any]) -> dict[str, Any]:
    """Time the original exactly as a candidate's timing step runs (a fresh process, a
    kept run, its replay check, then frozen replays), without re-running every check:
    the baseline that per-candidate ratios divide by."""
    task = judge.require_task()
    steps = [*_kept_run("o", task.harness, task.seeds[0]), {"op": "time", "key": "o"}]
    ref = _reference_of(judge)
    job = judge.job({"o": task.source}, steps, 3, trusted=True)

    def on_frame(frame: Frame) -> Optional[dict[str, Any]]:
        _error(frame, "the original no longer runs")
        if frame.kind == "outputs" and frame.meta.get("mode") != "replay":
            _must_match(ref, frame, "the original no longer gives its references")
        return {"timing": frame.meta["timing"]} if frame.kind == "timing" else None

    out = _follow(job, "re-timing the original failed", on_frame)
    if out is None:
        raise RuntimeError("re-timing the original ended without a timing")
    return out


def profile(judge: JudgeCore, req: dict[str, Any]) -> dict[str, Any]:
    """Profile the original (source None) or a variant at a tier."""
    task = judge.require_task()
    source = req.get("source") or task.source
    variant = req.get("source") is not None
    steps = [{"op": "run", "module": "m", "harness": task.harness, "seed": task.seeds[0], "mode": "check", "keep": "m"},
             {"op": "time", "key": "m"},
             {"op": "profile", "key": "m", "tier": int(req.get("tier", 2)), "facts": req.get("facts") or {},
              "source": source}]
    job = judge.job({"m": source}, steps, 3, trusted=not variant)
    out: dict[str, Any] = {}

    def on_frame(frame: Frame) -> None:
        _error(frame, "cannot profile")
        if frame.kind == "outputs" and variant:
            _must_match(_reference_of(judge), frame, "cannot profile a failing variant")
        if frame.kind == "timing":
            out["timing"] = frame.meta["timing"]
        if frame.kind == "profile":
            out["profile"] = frame.meta.get("profile")

    _follow(job, "profiling failed", on_frame)
    return out

"""The judge's ``evaluate`` op: run a candidate in a variant process and judge each frame
it sends against the Reference (the checks of DESIGN section 6, listed in judge.py); the
first check that fails is the verdict."""
from __future__ import annotations

import time
from typing import Any

from ..model import Evaluation, LaunchRecord, Status, Timing
from . import checks
from .compare import compare_outputs, describe
from .jobs import Frame, JobFailed
from .judge_core import JudgeCore, add_phase, count_runs, timed_frames, timed_steps


class Verdict(Exception):
    """A check failed: the evaluation ends with this status and message."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


def candidate_steps(judge: JudgeCore, time_it: bool, tier: int, facts: dict[str, Any], source: str) -> list[dict[str, Any]]:
    task, skipped = judge.require_task(), judge.ref.skipped
    s0, rest = task.seeds[0], task.seeds[1:]
    harnesses = judge.harnesses()
    steps: list[dict[str, Any]] = []
    for h in harnesses[1:]:
        steps += [{"op": "run", "module": "v", "harness": h, "seed": s, "mode": "check"} for s in task.seeds
                  if (h, s) not in skipped]
    steps += [{"op": "run", "module": "v", "harness": task.harness, "seed": s, "mode": "check"} for s in rest
              if (task.harness, s) not in skipped]
    steps += [{"op": "run", "module": "v", "harness": h, "seed": s0, "mode": "neutral"} for h in harnesses]
    steps.append({"op": "run", "module": "v", "harness": task.harness, "seed": s0, "mode": "check", "keep": "v"})
    steps += timed_steps("v", time_it, tier, facts, source)
    steps.append({"op": "run", "module": "v", "harness": task.harness, "seed": s0, "mode": "check", "again": True})
    return steps


def evaluate(judge: JudgeCore, req: dict[str, Any]) -> dict[str, Any]:
    ev = Evaluation(status=Status.OK, interpreted=judge.interpreted, variant_id=req.get("variant_id") or "variant")
    steps = candidate_steps(judge, bool(req.get("time", True)), int(req.get("profile_tier", 0)), req.get("facts") or {},
                            req["source"])
    t0 = time.perf_counter()
    job = judge.job({"v": req["source"]}, steps, count_runs(steps), trusted=False)
    worst = None
    try:
        for frame in timed_frames(job, ev.phases, t0):
            t_judge = time.perf_counter()
            worst = judge_frame(judge, frame, ev, worst)
            add_phase(ev.phases, "judge", time.perf_counter() - t_judge)
        ev.errors = worst
        ev.message = f"matches the original on {checked_runs(judge)} ({describe(worst)})"
    except Verdict as v:
        ev.status, ev.message = v.status, v.args[0]
        ev.errors = worst if v.status != Status.MISMATCH else (ev.errors or worst)
        ev.timing = None
    except JobFailed as e:
        ev.status = Status.TIMEOUT if e.end.kind == "timeout" else Status.CRASHED
        tail = [l for l in e.end.stderr_tail.splitlines() if l.strip()][-3:]
        ev.message = str(e) + (f" (last output: {' | '.join(tail)})" if tail else "")
        ev.timing = None
    finally:
        job.close()
        ev.phases.update(job.timeline_phases())
    ev.phases["variant_process_total"] = round(time.perf_counter() - t0, 6)
    if job.strays_killed:
        ev.message += f"; {job.strays_killed} leftover process(es) of the variant killed"
    return ev.to_dict()


def checked_runs(judge: JudgeCore) -> str:
    """Which harnesses ran under which seeds, for the verdict's message."""
    task = judge.require_task()
    skipped = {h for h, _ in judge.ref.skipped}
    if not skipped:
        return f"seeds {task.seeds} of {', '.join(judge.harnesses())}"
    parts = [f"{h} (seed {task.seeds[0]} only: outputs too large for every seed's reference)" if h in skipped
             else f"{h} (seeds {task.seeds})" for h in judge.harnesses()]
    return ", ".join(parts)


def judge_frame(judge: JudgeCore, frame: Frame, ev: Evaluation, worst: Any) -> Any:
    """Judge one frame (raises Verdict on a failed check); returns the worst error
    statistics of the outputs compared so far."""
    task, ref, meta = judge.require_task(), judge.ref, frame.meta
    if frame.kind == "error":
        raise Verdict(*_error_verdict(meta))
    if frame.kind == "timing":
        ev.timing = Timing.from_dict(meta["timing"])
        return worst
    if frame.kind == "profile":
        ev.profile = meta.get("profile")
        return worst
    if frame.kind != "outputs":
        return worst
    mode = meta.get("mode")
    if mode == "replay":
        if ref.replay_valid:
            verdict = compare_outputs(ref.outputs[(task.harness, task.seeds[0])], frame.tree)
            if not verdict.ok:
                raise Verdict(Status.REJECTED, "trust: a replay of the timed launches does not reproduce the "
                                               f"outputs ({verdict.message}): the timing would not be of the checked work")
        return worst
    if mode == "neutral":
        _check_neutral(judge, meta["harness"], meta, frame.tree)
        return worst
    stats = _judge_outputs(judge, frame, ev)
    return stats if worst is None or stats.rel_l2 >= worst.rel_l2 else worst


def _judge_outputs(judge: JudgeCore, frame: Frame, ev: Evaluation) -> Any:
    """A checked run of the candidate: it launches the kernel, has no side effect the
    original lacks, matches the reference and is as precise; its error statistics."""
    task, meta = judge.require_task(), frame.meta
    h, seed = meta["harness"], int(meta["seed"])
    where = f"{h}, seed {seed}"
    launches = [LaunchRecord.from_dict(x) for x in meta.get("launches", [])]
    if task.kernel not in {l.kernel for l in launches}:
        seen = ", ".join(sorted({l.kernel for l in launches})) or "no Triton kernel"
        raise Verdict(Status.REJECTED, f"the variant never launches {task.kernel} in {h} (it launched: {seen}); "
                                       "a torch fallback is not a kernel")
    _check_side_effects(judge, meta, where)
    verdict = compare_outputs(judge.ref.outputs[(h, seed)], frame.tree)
    if not verdict.ok:
        ev.errors = verdict.stats
        prefix = "after timing, " if meta.get("again") else ""
        raise Verdict(Status.MISMATCH, f"{prefix}{where}: {verdict.message}")
    if h == task.harness and seed == task.seeds[0] and not meta.get("again"):
        ev.launches = launches
    _check_precision(judge, h, seed, frame.tree)
    return verdict.stats


def _check_side_effects(judge: JudgeCore, meta: dict[str, Any], where: str) -> None:
    ref = judge.ref
    for kernel, names in (meta.get("written") or {}).items():
        allowed = ref.writes.get(kernel)
        if allowed is None:
            continue
        extra = [n for n in names if n not in allowed]
        if extra:
            raise Verdict(Status.REJECTED, f"trust: {where}: {kernel} writes its argument {extra[0]}, which the "
                                           "original only reads (inputs must stay unchanged)")
    changed = [c for c in meta.get("changed_inputs") or [] if c not in ref.changed_inputs]
    if changed:
        raise Verdict(Status.REJECTED, f"trust: {where}: the input {changed[0]} was modified outside the kernel's "
                                       "outputs; the original leaves it unchanged")
    if meta.get("stale") and not ref.stale:
        raise Verdict(Status.REJECTED, f"trust: {where}: the result returned by the previous call "
                                       f"({meta['stale'][0]}) changed when the wrapper was called again "
                                       "(a shared output buffer)")
    streams = set(meta.get("streams") or []) - ref.streams
    if streams:
        raise Verdict(Status.REJECTED, f"trust: {where}: launches on a CUDA stream the original does not use")


def _check_neutral(judge: JudgeCore, h: str, meta: dict[str, Any], tree: Any) -> None:
    if meta.get("error"):
        return  # the harness notices that nothing was computed: the launches matter
    ref = judge.ref
    if ref.neutral_raised.get(h):
        raise Verdict(Status.REJECTED, f"trust: {h}: with its Triton launches neutralised the variant still passes "
                                       "the harness's own checks, which fail for the original: Triton does not "
                                       "produce the result")
    task = judge.require_task()
    reason = checks.unproduced(ref.outputs[(h, task.seeds[0])], ref.masks.get(h, {}), tree)
    if reason:
        raise Verdict(Status.REJECTED, f"trust: {h}: {reason}")


def _check_precision(judge: JudgeCore, h: str, seed: int, tree: Any) -> None:
    task, ref = judge.require_task(), judge.ref
    high = ref.high.get(h)
    if not high or seed != task.seeds[0] or not isinstance(tree, dict):
        return
    for key, values in high.items():
        outs = tree.get("written", {}).get(key, [])
        for j, value in enumerate(values):
            if value is None or j >= len(outs):
                continue
            reason = checks.precision_reason(f"{key}[{j}]", outs[j].dtype, ref.high_error[(h, key, j)],
                                             checks.error_against(value, outs[j]))
            if reason:
                raise Verdict(Status.MISMATCH, f"precision: {h}, seed {seed}: {reason}")


def _error_verdict(meta: dict[str, Any]) -> tuple[Status, str]:
    phase, message = meta.get("phase"), str(meta.get("message", ""))
    where = f"{meta['harness']}, seed {meta['seed']}: " if meta.get("harness") is not None else ""
    if phase == "tampered":
        return Status.REJECTED, f"trust: {message}"
    if phase == "assert":
        return Status.MISMATCH, f"{where}the harness's own check failed: {message}"
    if phase in ("import", "compile"):
        prefix = "does not import: " if meta.get("step") is None else where
        return Status.COMPILE_ERROR, f"{prefix}{message}"
    suffix = " (CUDA context corrupted: the variant process was replaced)" if meta.get("fatal") else ""
    return Status.RUNTIME_ERROR, f"{where}{message}{suffix}"

"""The original's references beyond the harness: its derived calls (``judge_derived`` draws
them and judges a candidate's) run in a process of the original's own, with two canaries
and, for an autotuned kernel, once per config on the special values. A call that takes
that process down is dropped and the others run again in a fresh one.

Where the GPU has room for that process beside the candidates' (``in_background``), it
runs while the first candidates start: a candidate needs these references only for its
checks after its timing (``wait_for_references``), and on a GPU the derived calls took
a median 2.5 s and up to 15 s of the time before the first verdict
(benchmarks/results/eval_speed/h200x2_49e942d). Elsewhere (the interpreter, a harness
that fills the GPU) prepare waits for them, as a candidate would.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Optional, Union

import torch

from ..trace import mark
from . import warm
from .call_spec import DerivedCall
from .deadlines import JOB_START_S, deadline_s
from .derived import ATTEMPTS, CANARIES, MAX_CALL_BYTES, call_bytes, describe_call
from .derived_run import MAX_CONFIG_TWINS, TWIN_FLAVOURS
from .jobs import Frame, JobEndKind, JobFailed
from .judge_core import (
    GPU_MARGIN_BYTES,
    JudgeCore,
    Reference,
    gpu,
    lane_bytes,
    note_run_seconds,
    original_setup_message,
)
from .judge_derived import absorb_original
from .messages import Derived, DerivedOutputs, ErrorFrame, Mark, Step
from .observe import materialize
from .warm_ahead import ahead_threads

DERIVE_ENV = "KERNELBAND_DERIVE"  # "background", "before" (prepare waits) or "auto"
TWINS_FAILED = -1  # a failed run's index when the config twins (not a call) broke the process
# what the derivation's process may hold on the GPU: a call's canary-padded tensors, its
# float32 twin, the context
PROCESS_BYTES = 4 * MAX_CALL_BYTES + GPU_MARGIN_BYTES
# errors after which a process's CUDA context is unusable: every later call fails the same way
CONTEXT_ERRORS = (
    "illegal memory access",
    "misaligned address",
    "device-side assert",
    "unspecified launch failure",
    "illegal instruction",
    "AcceleratorError",
    "CUDA error: an illegal",
)

Frames = dict[tuple[str, int], Frame[DerivedOutputs]]
# the part of the GPU's free memory the derivation's frames may take: a quarter beside a
# search's candidates (``in_background``)
FRAMES_SHARE = 4


class OriginalUnusable(Exception):
    """The original cannot serve as a reference beyond its harness (its derived calls could
    not be run at all): every evaluation would fail the same way, so the search stops."""


def in_background(judge: JudgeCore, lanes: int) -> bool:
    """Whether the derivation runs beside the candidates: on a GPU whose free memory holds
    its process besides ``lanes`` candidates' runs of the harness (``candidate_lanes``'s
    allowance each); not under the interpreter, whose candidates run one at a time."""
    wanted = os.environ.get(DERIVE_ENV, "auto")
    if wanted in ("background", "before"):
        return wanted == "background"
    if not gpu():
        return False
    free, _ = torch.cuda.mem_get_info()
    return lanes * lane_bytes(judge.ref) + PROCESS_BYTES <= 0.8 * free


def planned_runs(calls: list[DerivedCall]) -> int:
    """Harness-run deadlines the derivation may take in all (every attempt, the twins too)."""
    return ATTEMPTS * _attempt_runs(calls, twins=True)


def _attempt_runs(calls: list[DerivedCall], twins: bool) -> int:
    """One attempt's harness-run deadlines: both canaries of every call, and with
    ``twins`` its special-values calls once per config (half of them, on average)."""
    special = sum(c.flavour in TWIN_FLAVOURS for c in calls) if twins else 0
    return len(CANARIES) * len(calls) + special * MAX_CONFIG_TWINS // 2


def start(judge: JudgeCore, calls: list[DerivedCall]) -> threading.Thread:
    """The derivation in a thread of the judge; ``judge.ref`` (this prepare's Reference, even
    after a later prepare replaced it) says when it is done."""
    ref = judge.ref
    ref.derive_started = time.monotonic()  # before the thread runs: prepare asks at once
    thread = threading.Thread(target=derive, args=(judge, ref, calls), daemon=True, name="kernelband-derive")
    thread.start()
    return thread


def derive(judge: JudgeCore, ref: Reference, calls: list[DerivedCall], keep_cache: bool = False) -> None:
    """Run the original's derived calls and keep in ``ref`` the ones it handles (``derived``),
    notes on the ones dropped, or why none could be run (``derived_failure``); however it
    ends, ``ref.derived_ready`` is set. ``keep_cache``: its compiled kernels seed the
    candidates' caches (only while no candidate is reading them)."""
    t0 = time.perf_counter()
    ref.derive_started = ref.derive_started or time.monotonic()
    mark("derive.start", calls=len(calls))
    try:
        ref.derived, ref.derived_notes, ref.derived_failure = original_references(judge, ref, calls, keep_cache)
    except Exception as e:  # noqa: BLE001 - a derivation that breaks must still release the candidates
        ref.derived = []
        ref.derived_failure = f"the original's calls beyond the harness could not be run ({type(e).__name__}: {e})"
    finally:
        ref.derived_s = round(time.perf_counter() - t0, 6)
        mark("derive.done", kept=len(ref.derived), failed=bool(ref.derived_failure))
        ref.derived_ready.set()


POLL_S = 0.25  # how often a waiting candidate looks at the derivation's progress


def wait_for_references(judge: JudgeCore, while_waiting: Optional[Callable[[Reference], None]] = None) -> Reference:
    """The Reference once its derived references are final (a candidate's checks beyond the
    harness need them); OriginalUnusable where they could not be made. ``while_waiting``
    is called every ``POLL_S`` until then (a candidate starts its sibling there)."""
    ref = judge.ref
    task = judge.require_task()
    limit = time.monotonic() + ATTEMPTS * JOB_START_S + deadline_s(task.timeout_s, ref.derivation_runs)
    while not ref.derived_ready.wait(min(POLL_S, max(limit - time.monotonic(), 0.0))):
        if time.monotonic() >= limit:
            raise OriginalUnusable("the original's calls beyond the harness did not finish within their deadline")
        if while_waiting is not None:
            while_waiting(ref)
    if ref.derived_failure:
        raise OriginalUnusable(ref.derived_failure)
    return ref


def dropped_note(dropped: list[str], kept: int) -> list[str]:
    if not dropped:
        return []
    return [
        f"{len(dropped)} of {len(dropped) + kept} calls beyond the harness are not checked (the original does not "
        f"handle them): {dropped[0]}"
    ]


References = list[tuple[DerivedCall, Any]]  # (derived call, the original's outputs)


def original_references(
    judge: JudgeCore,
    ref: Reference,
    calls: list[DerivedCall],
    keep_cache: bool = False,
    siblings: int = warm.DERIVATION_SIBLINGS,
    frames_share: int = FRAMES_SHARE,
) -> tuple[References, list[str], str]:
    """(the calls the original handles with its outputs, notes on the ones dropped, why
    none could be run or "") of the original's runs of ``calls``; ``ref`` takes their run
    seconds. ``frames_share``: the part of the GPU's free memory its frames may take
    (``frames_device``). ``siblings``: processes compiling the calls ahead (each builds a call's
    inputs: none for calls of gigabytes)."""
    crashed: list[str] = []
    twins = True
    for _ in range(ATTEMPTS):
        outcome = _run(judge, ref, calls, twins, keep_cache, siblings, frames_share)
        if isinstance(outcome, str):
            return [], [], outcome
        if isinstance(outcome, dict):
            # the traces of the table at f1e2e02 showed 7-14 s between the job's last frame
            # and the references on four kernels: these marks split that time
            mark("derive.frames", frames=len(outcome))
            ref.references_final.wait()  # where prepare still moves them (an early start)
            kept, dropped = absorb_original(judge, calls, outcome)
            mark("derive.absorbed", kept=len(kept))
            return kept, dropped_note(crashed + dropped, len(kept)), ""
        index, why = outcome
        if index == TWINS_FAILED:  # the config twins took the process down: again without them
            twins = False
            continue
        crashed.append(
            f"{describe_call(calls[index]) if 0 <= index < len(calls) else 'a call'}: "
            f"the original's process fails on it ({why})"
        )
        calls = calls_without(calls, index)
        if not calls:  # nothing left to run: no fresh process for it
            break
    first = crashed[0] if crashed else "its config twins"
    return (
        [],
        [f"the original's process fails on {len(crashed)} calls beyond the harness: none are checked ({first})"],
        "",
    )


def calls_without(calls: list[DerivedCall], index: int) -> list[DerivedCall]:
    """``calls`` less the one at ``index`` (and an aliased call whose twin it was), each
    aliased call's ``twin`` renumbered to where its twin now stands."""
    keep = [i for i, c in enumerate(calls) if i != index and c.twin != index]
    position = {old: new for new, old in enumerate(keep)}
    return [c if (c := calls[i]).twin is None else replace(c, twin=position[c.twin]) for i in keep]


def _run(
    judge: JudgeCore,
    ref: Reference,
    calls: list[DerivedCall],
    twins: bool,
    keep_cache: bool,
    siblings: int = warm.DERIVATION_SIBLINGS,
    frames_share: int = FRAMES_SHARE,
) -> Union[Frames, tuple[int, str], str]:
    """The frames of the original's derived calls in a fresh process of it (both canaries;
    with ``twins``, its special-values calls again once per autotune config, keyed
    ``twin_key``); else (the index of the call its process died on or whose frame broke the
    protocol, how; TWINS_FAILED where the twins did it), or why the original cannot be run."""
    from .judge_derived import twin_key

    task = judge.require_task()
    # the second canary's calls find every kernel compiled by the first's
    steps: list[Step] = [Derived(calls, "o", "a", warm_threads=ahead_threads(judge.on_gpu)), Derived(calls, "o", "b")]
    special = sum(c.flavour in TWIN_FLAVOURS for c in calls) if twins else 0
    if special:
        steps.append(Derived(calls, "o", "a", configs=True))
    frames: Frames = {}
    device = frames_device(judge, calls, len(steps), frames_share)
    mark("derive.job", calls=len(calls), frames_on=device or "host")
    job = judge.job({"o": task.source}, steps + [Mark()], _attempt_runs(calls, twins), trusted=True)
    # the first call is compiled by the job itself; the others by siblings meanwhile
    warming = warm.start(judge, job, calls[1:], "o", siblings)
    try:
        for frame in job.until_mark():
            if isinstance(frame.meta, ErrorFrame):
                if special and all((w, i) in frames for w in CANARIES for i in range(len(calls))):
                    return TWINS_FAILED, frame.meta.message[:160]
                return original_setup_message(task, frame.meta)
            note_run_seconds(ref, frame)
            if isinstance(frame.meta, DerivedOutputs):
                meta = frame.meta
                ref.derived_calls_s += meta.seconds
                key = (meta.which if meta.config is None else twin_key(meta.config), meta.index)
                frames[key] = Frame(meta, materialize(frame.tree, device))
        broken = first_context_error(frames, len(calls))
        if broken is not None:  # every later call in that process fails too: drop this one, run again
            return broken
        if any(any(m in (f.meta.error or "") for m in CONTEXT_ERRORS) for f in frames.values()):
            return TWINS_FAILED, "a CUDA error that breaks its context"
        if keep_cache:
            judge.keep_trusted_cache(job)
        return frames
    except JobFailed as e:
        # the process died, or its frames broke off mid-call: that call is dropped; a hang
        # is not one call's fault
        if e.end.kind not in (JobEndKind.CRASHED, JobEndKind.PROTOCOL, JobEndKind.MALFORMED):
            return f"the original kernel could not be run on inputs beyond its harness ({e.end.kind}): {e}"
        for which in CANARIES:
            missing = [i for i in range(len(calls)) if (which, i) not in frames]
            if missing:
                return missing[0], str(e).splitlines()[0][:160] if str(e) else e.end.kind.value
        if special:
            return TWINS_FAILED, e.end.kind.value
        return len(calls), e.end.kind.value
    finally:
        warm.close(warming)
        job.close()


def frames_device(
    judge: JudgeCore, calls: list[DerivedCall], runs_per_call: int, share: int = FRAMES_SHARE
) -> Optional[str]:
    """Where the derivation keeps its frames until they are judged (``absorb_original``):
    on the GPU where 1/``share`` of its free memory holds them all (their canaries and the
    wrapper's own allocations counted as much again), so that the judge's splits, masks
    and comparisons run there; else on the host (on the host they took up to 11.6 s of a
    derivation: benchmarks/results/eval_speed/h200_7425702, matmul_rowmajor_fp16)."""
    if judge.ref_device != "cuda":
        return None
    wanted = 2 * runs_per_call * sum(call_bytes(c) for c in calls) + GPU_MARGIN_BYTES
    free, _ = torch.cuda.mem_get_info()
    return "cuda" if wanted <= free // share else None


def first_context_error(frames: Frames, n: int) -> Union[tuple[int, str], None]:
    """(the call, how) of the first derived call, in the order they ran (canary "a" for
    every call, then "b"), that raised an error that breaks the process's CUDA context."""
    for which in CANARIES:
        for i in range(n):
            frame = frames.get((which, i))
            error = (frame.meta.error or "") if frame is not None else ""
            if any(marker in error for marker in CONTEXT_ERRORS):
                return i, f"a CUDA error that breaks its context: {error.splitlines()[0][:140]}"
    return None

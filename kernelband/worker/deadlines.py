"""The one deadline rule of an evaluation (no torch: the session imports it too).

A variant job that may run the harness ``runs`` times gets start-up time (interpreter,
imports, sandbox, CUDA context, compilation) plus one run timeout per run; the session
waits for the judge's reply a little longer than the jobs of its request can take, so a
hung variant is reported by the judge (a ``timeout`` verdict) before the session gives
up on the judge itself.
"""
from __future__ import annotations

from typing import Any, Iterable

JOB_START_S = 30.0
REPLY_SLACK_S = 30.0


def deadline_s(run_timeout_s: float, runs: int) -> float:
    """Seconds a variant job may take when it runs the harness ``runs`` times."""
    return JOB_START_S + run_timeout_s * max(runs, 1)


def reply_deadline_s(run_timeout_s: float, runs: int, jobs: int = 1) -> float:
    """Seconds the session waits for a reply whose request runs ``jobs`` such jobs."""
    return jobs * deadline_s(run_timeout_s, runs) + REPLY_SLACK_S


def evaluation_runs(harness: str, check_harnesses: Iterable[str], seeds: int, derived_calls: int = 0) -> int:
    """Harness runs in one evaluation: every harness under every seed, the neutralised
    runs, the replay check, the timing and the re-check after it, and each call beyond the
    harness (the judge's job deadline counts them too: the session must not give up first)."""
    harnesses = 1 + len([h for h in check_harnesses if h != harness])
    return harnesses * (seeds + 2) + 4 + derived_calls


def request_deadline_s(task: Any, extra_runs: int = 0, jobs: int = 1, derived_calls: int = 0) -> float:
    """Seconds the session (local or through Ray) waits for a request about ``task`` (a
    model.Task) that runs one evaluation's harness runs plus ``extra_runs``."""
    runs = evaluation_runs(task.harness, task.check_harnesses, len(task.seeds), derived_calls) + extra_runs
    return reply_deadline_s(task.timeout_s, runs, jobs)

"""The one deadline rule of an evaluation (no torch: the session imports it too).

A variant job that may run the harness ``runs`` times gets start-up time (interpreter,
imports, sandbox, CUDA context, compilation) plus one run timeout per run; the session
waits for the judge's reply a little longer than the jobs of its request can take, so a
hung variant is reported by the judge (a ``timeout`` verdict) before the session gives
up on the judge itself.
"""

from __future__ import annotations

from typing import Any, Iterable

from .derived import ATTEMPTS, CANARIES, MAX_CALLS_RECORDED  # light: torch only inside its functions

JOB_START_S = 30.0
REPLY_SLACK_S = 30.0


def deadline_s(run_timeout_s: float, runs: int) -> float:
    """Seconds a variant job may take when it runs the harness ``runs`` times."""
    return JOB_START_S + run_timeout_s * max(runs, 1)


SEARCH_RUN_FLOOR_S = 20.0
SEARCH_RUN_FACTOR = 10.0


def search_run_timeout_s(run_timeout_s: float, slowest_original_run_s: float) -> float:
    """Seconds one run of a search's candidate may take: ten times the original's slowest
    run (its compile included), at least 20 s, at most the run timeout. A candidate that
    slow cannot be the faster one, and a hung one frees its lane in a minute, not in an
    hour of the whole evaluation's deadline."""
    return min(run_timeout_s, max(SEARCH_RUN_FLOOR_S, SEARCH_RUN_FACTOR * slowest_original_run_s))


def reply_deadline_s(run_timeout_s: float, runs: int, jobs: int = 1) -> float:
    """Seconds the session waits for a reply whose request runs ``jobs`` such jobs."""
    return jobs * deadline_s(run_timeout_s, runs) + REPLY_SLACK_S


def evaluation_runs(harness: str, check_harnesses: Iterable[str], seeds: int, derived_calls: int = 0) -> int:
    """Harness runs in one evaluation: every harness under every seed, the neutralised
    runs, the replay check, the timing and the re-check after it, and each call beyond the
    harness (the judge's job deadline counts them too: the session must not give up first)."""
    harnesses = 1 + len([h for h in check_harnesses if h != harness])
    return harnesses * (seeds + 2) + 4 + derived_calls


JUDGE_START_S = 120.0  # a fresh judge's start-up, until it answers ``hello`` (client.WorkerClient)
DEVICE_FACTS_S = 600.0  # measuring the device's facts (bandwidth, peak rates) once
SANITIZE_RUN_S = 300.0  # each compute-sanitizer tool's job (judge_memcheck)
# racecheck's job, at most: it instruments every shared-memory access (the matmul example's
# 4096x4096 harness ran 86 s a launch under it, against 0.6 s under memcheck); past this it
# is reported unfinished and memcheck's verdict stands
RACECHECK_RUN_S = 60.0
SANITIZE_EXIT_S = 60.0  # and the wait for that tool's process to exit after its last frame
# harness-run deadlines of the wide op (judge_wide): each recorded call run by the original
# once per canary in each of its attempts, then once by the variant
WIDE_RUNS = MAX_CALLS_RECORDED * (ATTEMPTS * len(CANARIES) + 1)
SANITIZE_TOOLS = 2  # memcheck, then racecheck (judge_memcheck.TOOLS)


def request_deadline_s(op: str, task: Any, derived_calls: int = 0, rounds: int = 10) -> float:
    """Seconds the session waits for the judge's reply to ``op`` (a judge op, worker/requests.py)
    about ``task`` (a model.Task); ``derived_calls``: the baseline's calls beyond the harness,
    ``rounds``: a paired re-measurement's rounds. The one rule for the local and Ray evaluators."""
    timeout = task.timeout_s
    if op == "prepare":  # one evaluation's runs, the original's timing and its lane's samples
        runs = evaluation_runs(task.harness, task.check_harnesses, len(task.seeds), derived_calls)
        return reply_deadline_s(timeout, runs + 4)
    if op == "evaluate":
        return reply_deadline_s(
            timeout, evaluation_runs(task.harness, task.check_harnesses, len(task.seeds), derived_calls)
        )
    if op == "retime":  # a kept run, its replay check and the timing
        return reply_deadline_s(timeout, 3)
    if op == "paired":  # two jobs at most (the original's block, then the variant's)
        return reply_deadline_s(timeout, 2 + max(rounds, 2), jobs=2)
    if op == "profile":  # a run, its timing and the profile's runs
        return reply_deadline_s(timeout, 4)
    if op == "sanitize":
        return SANITIZE_TOOLS * (SANITIZE_RUN_S + SANITIZE_EXIT_S) + REPLY_SLACK_S
    if op == "wide":  # the original's attempts at both canaries, then the variant's: each call a run
        return reply_deadline_s(timeout, WIDE_RUNS)
    if op == "device_facts":
        return DEVICE_FACTS_S
    raise ValueError(f"no deadline rule for the judge op {op!r}")


def call_deadline_s(op: str, task: Any, derived_calls: int = 0, rounds: int = 10) -> float:
    """Seconds one Evaluator method (serving ``op``) may take in all: a judge started, the
    request, and where the judge is lost on the way (a crash, a hang), a fresh one started
    and prepared again before the method returns. What a driver waits for a remote
    evaluator (Ray) before its own transport's slack."""
    own = JUDGE_START_S + request_deadline_s(op, task, derived_calls, rounds)
    if op in ("prepare", "device_facts"):  # no re-prepare after these
        return own
    return own + JUDGE_START_S + request_deadline_s("prepare", task, derived_calls)

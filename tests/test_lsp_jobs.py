"""JobManager against a stand-in engine: event plumbing, queueing, superseding, and
cancellation that kills the job's whole process tree (including a worker in its own
session, like the real engine's)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kernelband_lsp.jobs import CANCELLED, DONE, FAILED, OPTIMIZE, PROFILE, SUPERSEDED, JobManager, JobSpec
from kernelband_lsp.settings import Settings

from helpers.lsp import EXAMPLES, process_alive, wait_until, write_fake_engine

ADD = (EXAMPLES / "add_scale.py").read_text(encoding="utf-8")


def spec(tmp_path: Path, kernel: str = "axpy_kernel", background: bool = False, kind: str = OPTIMIZE,
         budget: int = 4) -> JobSpec:
    return JobSpec(kind=kind, path=str(tmp_path / "add_scale.py"), kernel=kernel, source=ADD, uri="",
                   version=1, background=background, settings=Settings(budget_evaluations=budget))


@pytest.fixture
def manager(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_STEP_S", "0.05")
    events = []
    jm = JobManager(command_prefix=write_fake_engine(tmp_path), on_event=lambda j, e: events.append((j.id, e)),
                    kill_grace_s=1.0)
    jm.test_events = events  # type: ignore[attr-defined]
    return jm


async def test_events_and_result(manager, tmp_path):
    job = manager.submit(spec(tmp_path))
    await asyncio.wait_for(manager.wait(job), 30)
    assert job.state == DONE and job.returncode == 0
    types_seen = [e.type for _, e in manager.test_events]
    assert types_seen[:3] == ["log", "started", "baseline"] and types_seen[-1] == "result"
    assert types_seen.count("progress") == 4
    assert job.result.status == "improved" and "BLOCK_SIZE=1024" in job.result.best_source
    # the engine got the editor's text on stdin and the settings as flags
    assert "--stdin-source" in job.argv and "--budget" in job.argv and "--events" in job.argv


async def test_profile_job(manager, tmp_path):
    job = manager.submit(spec(tmp_path, kind=PROFILE))
    await asyncio.wait_for(manager.wait(job), 30)
    assert job.state == DONE and job.profile is not None and job.profile.bottleneck == "memory-bound"


async def test_failure_reports_the_engines_message(manager, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL", "1")
    job = manager.submit(spec(tmp_path))
    await asyncio.wait_for(manager.wait(job), 30)
    assert job.state == FAILED and job.result.status == "failed" and "fake failure" in job.result.message
    # the worker it left behind (in its own session) was killed with it
    worker_pid = next(e for _, e in manager.test_events if e.type == "log").data["worker_pid"]
    await wait_until(lambda: not process_alive(worker_pid), 10, what="the orphaned worker to be killed")


async def test_one_job_at_a_time_interactive_first_and_supersede(manager, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_STEP_S", "0.3")
    first = manager.submit(spec(tmp_path, "k1"))
    bg_old = manager.submit(spec(tmp_path, "k2", background=True))
    bg_other = manager.submit(spec(tmp_path, "k3", background=True))
    bg_new = manager.submit(spec(tmp_path, "k2", background=True))  # a newer save of k2
    inter = manager.submit(spec(tmp_path, "k4"))
    assert bg_old.state == SUPERSEDED and bg_old.result.status == "cancelled"
    assert manager.running is first
    assert manager.queue_position(inter) == 0  # interactive jumps ahead of queued background jobs
    order = []
    for j in (first, inter, bg_other, bg_new):
        await asyncio.wait_for(manager.wait(j), 60)
        order.append((j.started_at, j.spec.kernel))
    assert [k for _, k in sorted(order)] == ["k1", "k4", "k3", "k2"]
    # never two at once
    spans = sorted((j.started_at, j.ended_at) for j in (first, inter, bg_other, bg_new))
    assert all(a[1] <= b[0] + 0.05 for a, b in zip(spans, spans[1:]))


async def test_cancel_kills_the_process_tree(manager, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_STEP_S", "5")
    job = manager.submit(spec(tmp_path, budget=50))
    ev = await wait_until(lambda: next((e for _, e in manager.test_events if e.type == "log"), None), 20,
                          what="the worker pid")
    worker_pid = ev.data["worker_pid"]
    assert process_alive(job.pid) and process_alive(worker_pid)
    assert manager.cancel(job.id) == [job.id]
    await asyncio.wait_for(manager.wait(job), 15)
    assert job.state == CANCELLED and job.result.status == "cancelled"
    await wait_until(lambda: not process_alive(job.pid) and not process_alive(worker_pid), 10,
                     what="the job and its worker to exit")


async def test_cancel_queued_and_cancel_all(manager, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_STEP_S", "5")
    a = manager.submit(spec(tmp_path, "k1", budget=50))
    b = manager.submit(spec(tmp_path, "k2"))
    assert manager.cancel(b.id) == [b.id] and b.state == CANCELLED
    await wait_until(lambda: a.pid, 10, what="the first job to start")
    assert manager.cancel() == [a.id]
    await asyncio.wait_for(manager.wait(a), 15)
    assert a.state == CANCELLED
    await wait_until(lambda: not process_alive(a.pid), 10, what="the job to exit")


def test_an_empty_profile_event_is_no_profile(manager, tmp_path):
    """An engine that reports ``{}`` as its profile has none: the card says "not profiled
    yet" (as for an empty stored row), not a bare untitled profile."""
    from kernelband.events import Event
    from kernelband_lsp.jobmodel import Job

    job = Job(id="j1", spec=spec(tmp_path, kind=PROFILE))
    manager._on_event(job, Event.from_json('{"type": "profile", "profile": {}}'))
    assert job.profile is None
    manager._on_event(job, Event.from_json('{"type": "profile", "profile": {"kernel": "axpy_kernel", "time_ms": 0.5}}'))
    assert job.profile is not None and job.profile.kernel == "axpy_kernel" and job.profile.time_ms == 0.5

"""Jobs: ``python -m kernelband optimize|profile ... --events jsonl`` (and ``check ...
--json``, the re-verification of an applied variant) as subprocesses.

- The editor's text goes to the job on stdin (``--stdin-source``); the path still
  locates imports, companion harness files and the store.
- Each job runs in its own process group (session), so cancelling kills the job and
  everything it started (the evaluation worker): SIGTERM to the group, SIGKILL after a
  grace period, and a final SIGKILL sweep of the group when the leader is gone.
- Its stdout is a stream of JSON-lines events (kernelband.events); anything else on
  stdout is kept aside (a ``--json`` result printed after the events is recognised).
- One GPU job at a time. Interactive jobs go before background ones; a newer
  background request for the same (file, kernel, kind) supersedes a queued one.

Never imports torch or triton; all waiting is asyncio, so the server stays responsive.
The pieces: jobmodel.py (JobSpec, Job, states), engine_command.py (the command line),
jobio.py (feeder, readers, watcher), proctree.py (the process tree and killing).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import time
from typing import Optional

from kernelband.events import Event, Finished, JobError, ProfileReady, Progress
from kernelband.model import Result

from . import jobio
from .engine_command import EngineCommand  # noqa: F401 (re-exported)
from .jobmodel import (  # noqa: F401 (re-exported: the service and the tests import them from here)
    CANCELLED,
    CHECK,
    DONE,
    FAILED,
    OPTIMIZE,
    PROFILE,
    QUEUED,
    RUNNING,
    STREAM_LIMIT,
    SUPERSEDED,
    EventCallback,
    Job,
    JobSpec,
    StateCallback,
)
from .proctree import killpg, process_tree, remember, signal_outside_group, sweep

log = logging.getLogger(__name__)


class JobManager:
    def __init__(
        self,
        command_prefix: Optional[list[str]] = None,
        on_event: Optional[EventCallback] = None,
        on_state: Optional[StateCallback] = None,
        kill_grace_s: float = 2.0,
    ) -> None:
        self.command = EngineCommand(command_prefix)
        self.on_event = on_event
        self.on_state = on_state
        self.kill_grace_s = kill_grace_s
        self._ids = itertools.count(1)
        self._jobs: dict[str, Job] = {}
        self._queue: list[Job] = []
        self._running: Optional[Job] = None
        self._proc: Optional[asyncio.subprocess.Process] = None
        self._task: Optional[asyncio.Task] = None
        self._closed = False

    @property
    def command_prefix(self) -> list[str]:
        return self.command.prefix

    # ------------------------------------------------------------------ queries
    def jobs(self, include_finished: bool = False) -> list[Job]:
        return [j for j in self._jobs.values() if include_finished or not j.finished]

    @property
    def running(self) -> Optional[Job]:
        return self._running

    def queue_position(self, job: Job) -> Optional[int]:
        """0 = next; None when not queued."""
        try:
            return self._ordered_queue().index(job)
        except ValueError:
            return None

    def active_for(self, path: str, kernel: str, kind: Optional[str] = None) -> list[Job]:
        return [
            j
            for j in self.jobs()
            if j.spec.path == path and j.spec.kernel == kernel and (kind is None or j.spec.kind == kind)
        ]

    # ------------------------------------------------------------------ submit / cancel
    def submit(self, spec: JobSpec) -> Job:
        if self._closed:
            raise RuntimeError("the job manager is shut down")
        loop = asyncio.get_running_loop()
        job = Job(id=f"job-{next(self._ids)}", spec=spec)
        job.done = loop.create_future()
        self._jobs[job.id] = job
        # a newer request for the same kernel replaces a queued background one
        for old in list(self._queue):
            if old.spec.key == spec.key and old.spec.background:
                self._queue.remove(old)
                self._finish(old, SUPERSEDED, reason=f"superseded by {job.id} (a newer request for {spec.kernel})")
        self._queue.append(job)
        log.info(
            "%s queued: %s %s in %s%s",
            job.id,
            spec.kind,
            spec.kernel,
            os.path.basename(spec.path),
            " (background)" if spec.background else "",
        )
        self._notify_state(job)
        self._kick()
        return job

    async def wait(self, job: Job) -> Job:
        assert job.done is not None
        await asyncio.shield(job.done)
        return job

    def cancel(self, job_id: Optional[str] = None, reason: str = "cancelled by the user") -> list[str]:
        """Cancel one job (or every unfinished job); returns the ids actually cancelled."""
        targets = [self._jobs[job_id]] if job_id in self._jobs else ([] if job_id else self.jobs())
        out = []
        for job in targets:
            if job.finished:
                continue
            if job.state == QUEUED:
                if job in self._queue:
                    self._queue.remove(job)
                self._finish(job, CANCELLED, reason=reason)
                out.append(job.id)
            elif job.state == RUNNING and not job.cancel_reason:
                job.cancel_reason = reason
                self._terminate(job)
                out.append(job.id)
        return out

    async def shutdown(self) -> None:
        self._closed = True
        self.cancel(reason="the language server is shutting down")
        task = self._task
        if task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), timeout=self.kill_grace_s + 3)

    def kill_now(self) -> None:
        """Synchronous last resort (process exit): SIGKILL the running job's group."""
        job = self._running
        if job is not None and job.pid:
            remember(job.tree, process_tree(job.pid))
            self._sweep(job)

    # ------------------------------------------------------------------ scheduling
    def _ordered_queue(self) -> list[Job]:
        return sorted(self._queue, key=lambda j: (j.spec.background, j.submitted_at))

    def _kick(self) -> None:
        if self._running is not None or not self._queue or self._closed:
            return
        job = self._ordered_queue()[0]
        self._queue.remove(job)
        self._running = job
        job.state = RUNNING
        job.started_at = time.time()
        self._task = asyncio.get_running_loop().create_task(self._run_guarded(job))

    async def _run_guarded(self, job: Job) -> None:
        try:
            await self._run(job)
        except asyncio.CancelledError:
            self._terminate(job)
            self._finish(job, CANCELLED, reason=job.cancel_reason or "cancelled")
            raise
        except Exception as e:
            log.exception("%s failed to run", job.id)
            self._finish(job, FAILED, reason=f"could not run the job: {e}")
        finally:
            self._sweep(job)  # anything left of the job's tree (a stray worker, a compiler)
            self._running = None
            self._proc = None
            if not job.finished:
                self._finish(job, FAILED, reason="the job ended without a result")
            self._kick()

    # ------------------------------------------------------------------ running one job
    def build_argv(self, spec: JobSpec) -> list[str]:
        return self.command.argv(spec)

    async def _run(self, job: Job) -> None:
        job.argv = self.build_argv(job.spec)
        proc = await self._start(job)
        feeder = asyncio.ensure_future(jobio.feed(proc, job.spec.source))
        readers = asyncio.ensure_future(
            asyncio.gather(jobio.read_stdout(proc, job, self._on_event), jobio.read_stderr(proc, job))
        )
        watcher = asyncio.ensure_future(jobio.watch_tree(proc.pid, job))
        try:
            job.returncode = await proc.wait()
            await self._drain(job, readers)
        finally:
            watcher.cancel()
            feeder.cancel()
            if not readers.done():
                readers.cancel()
        self._conclude(job)

    async def _start(self, job: Job) -> asyncio.subprocess.Process:
        """Spawn the job in its own process group (cancel kills the whole tree)."""
        spec = job.spec
        env = {"PYTHONIOENCODING": "utf-8", **os.environ, **spec.env, "PYTHONUNBUFFERED": "1"}
        log.info("%s running: %s", job.id, " ".join(job.argv))
        self._notify_state(job)
        proc = await asyncio.create_subprocess_exec(
            *job.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=spec.cwd or os.path.dirname(spec.path) or None,
            env=env,
            start_new_session=True,
            limit=STREAM_LIMIT,
        )
        self._proc = proc
        job.pid = proc.pid
        self._notify_state(job)
        if job.cancel_reason:
            self._terminate(job)
        return proc

    async def _drain(self, job: Job, readers: asyncio.Future) -> None:
        """The leader is gone; a straggler that inherited its stdout keeps the pipe open:
        give the readers a moment, then kill what is left and stop reading."""
        try:
            await asyncio.wait_for(asyncio.shield(readers), timeout=2.0)
        except asyncio.TimeoutError:
            log.info("%s: output still open after the job exited; stopping leftover processes", job.id)
            self._sweep(job)
            try:
                await asyncio.wait_for(asyncio.shield(readers), timeout=2.0)
            except asyncio.TimeoutError:
                readers.cancel()

    def _on_event(self, job: Job, ev: Event) -> None:
        job.events.append(ev)
        # each payload was decoded once, where its line was read (events.Event.from_json)
        p = ev.payload
        if isinstance(p, Finished):
            job.result = p.result
        elif isinstance(p, ProfileReady):
            job.profile = p.profile or job.profile
        elif isinstance(p, JobError):
            job.error = p.message or "the job reported an error"
        elif isinstance(p, Progress):
            job.last_progress = p
        if self.on_event is not None:
            try:
                self.on_event(job, ev)
            except Exception:
                log.exception("job event callback failed")

    def _conclude(self, job: Job) -> None:
        if job.cancel_reason:
            self._finish(job, CANCELLED, reason=job.cancel_reason)
            return
        if jobio.take_output(job):
            self._finish(job, DONE)
            return
        reason = job.error
        if not reason:
            tail = [ln for ln in job.stderr_tail if ln.strip()]
            reason = tail[-1] if tail else f"the job exited with code {job.returncode} and no result"
            if job.returncode not in (0, None):
                reason = f"exit code {job.returncode}: {reason}"
        self._finish(job, FAILED, reason=reason)

    def _finish(self, job: Job, state: str, reason: str = "") -> None:
        if job.finished:
            return
        job.state = state
        job.ended_at = time.time()
        if state in (CANCELLED, SUPERSEDED, FAILED) and job.spec.kind == OPTIMIZE:
            if job.result is None or state != FAILED:  # a failure after the engine's Result keeps it
                done = job.last_progress.done if job.last_progress else None  # as the last progress event said
                job.result = Result.cancelled(
                    job.spec.kernel, job.spec.path, reason, failed=state == FAILED, partial=job.result, evaluations=done
                )
        if state in (CANCELLED, SUPERSEDED, FAILED) and not job.error:
            job.error = reason or state
        if job.cancel_reason == "" and state in (CANCELLED, SUPERSEDED):
            job.cancel_reason = reason
        log.info("%s %s%s", job.id, state, f": {reason}" if reason else "")
        if job.done is not None and not job.done.done():
            job.done.set_result(job)
        self._notify_state(job)

    def _notify_state(self, job: Job) -> None:
        if self.on_state is not None:
            try:
                self.on_state(job)
            except Exception:
                log.exception("job state callback failed")

    # ------------------------------------------------------------------ killing
    def _terminate(self, job: Job) -> None:
        """Stop a running job: SIGINT to its group (the session can record "cancelled"
        and stop its worker), SIGTERM to descendants that live in other groups (the
        evaluation worker starts its own session), SIGKILL to all after the grace."""
        pid = job.pid
        if not pid:
            return
        tree = process_tree(pid)
        remember(job.tree, tree)
        log.info("%s: stopping process group %d (%d descendant(s))", job.id, pid, len(tree))
        killpg(pid, signal.SIGINT)
        signal_outside_group(pid, tree, signal.SIGTERM)
        proc = self._proc
        asyncio.get_running_loop().call_later(self.kill_grace_s, self._escalate, job, proc)

    def _escalate(self, job: Job, proc: Optional[asyncio.subprocess.Process]) -> None:
        pid = job.pid
        if not pid or proc is None or proc.returncode is not None:
            return  # it exited; the end-of-job sweep already killed what was left
        remember(job.tree, process_tree(pid))
        log.info("%s: process %d still running after %.1f s; killing", job.id, pid, self.kill_grace_s)
        self._sweep(job)

    def _sweep(self, job: Job) -> None:
        """SIGKILL whatever is left of the job: its group and every descendant seen
        (checked by start time, so a recycled pid is never hit)."""
        sweep(job.pid, job.tree, signal.SIGKILL)

"""Engine jobs for the agent tools: ``python -m kernelband check|profile|optimize ...``
as subprocesses, run by the language server's job manager (kernelband_lsp.jobs): one job
at a time (one GPU), each in its own process group, its whole tree killed on cancel.

What a tool call adds: the job's progress as it comes (its events, and a heartbeat while
a job says nothing, so a client's timeout is not reached by a long check), and a cancel
that returns only once the job's process tree is gone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional

import anyio

from kernelband_lsp.jobs import Job, JobManager, JobSpec
from kernelband_lsp.proctree import alive

from ..events import Event
from ..proc import start_time

log = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
TREE_GONE_WAIT_S = 5.0  # after the job ends, how long its killed processes may take to vanish


@dataclass
class Progress:
    """One progress notification: ``progress`` only ever grows within a job."""

    progress: float
    total: Optional[float]
    message: str


ProgressSink = Callable[[Progress], Awaitable[None]]
Describe = Callable[[Event], Optional[tuple[Optional[float], Optional[float], str]]]  # (done, total, message)


class AgentJobs:
    """The server's jobs: one JobManager, its events routed to the call that started each."""

    def __init__(
        self, command_prefix: Optional[list[str]] = None, kill_grace_s: float = 2.0, heartbeat_s: float = HEARTBEAT_S
    ) -> None:
        self.heartbeat_s = heartbeat_s
        self.manager = JobManager(command_prefix, on_event=self._route, kill_grace_s=kill_grace_s)
        self._inboxes: dict[str, asyncio.Queue[Event]] = {}

    def _route(self, job: Job, ev: Event) -> None:
        inbox = self._inboxes.get(job.id)
        if inbox is not None:
            inbox.put_nowait(ev)

    async def run(
        self, spec: JobSpec, progress: Optional[ProgressSink] = None, describe: Optional[Describe] = None
    ) -> Job:
        """Run a job to its end. Cancelling the caller (the client cancelled the request, or
        the server is closing) cancels the job and waits until its process tree is gone."""
        job = self.manager.submit(spec)
        inbox: asyncio.Queue[Event] = asyncio.Queue()
        self._inboxes[job.id] = inbox
        reporter = _Reporter(job, self.manager, progress, describe)
        try:
            assert job.done is not None
            while not job.done.done():
                getter = asyncio.ensure_future(inbox.get())
                try:
                    await asyncio.wait(
                        {getter, job.done}, timeout=self.heartbeat_s, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    if not getter.done():
                        getter.cancel()
                if getter.done() and not getter.cancelled():
                    await reporter.event(getter.result())
                elif not job.done.done():
                    await reporter.heartbeat()
            return job
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop(job, "cancelled by the agent's client")
            raise
        finally:
            self._inboxes.pop(job.id, None)

    async def stop(self, job: Job, reason: str) -> None:
        """Cancel ``job`` and wait for its end and for every process of its tree to vanish."""
        self.manager.cancel(job.id, reason=reason)
        with anyio.move_on_after(self.manager.kill_grace_s + 10):
            await self.manager.wait(job)
        deadline = time.monotonic() + TREE_GONE_WAIT_S
        while time.monotonic() < deadline and self.live_processes(job):
            await asyncio.sleep(0.05)
        left = self.live_processes(job)
        if left:
            log.warning("%s: %d process(es) of the cancelled job still alive: %s", job.id, len(left), left)

    @staticmethod
    def live_processes(job: Job) -> list[int]:
        """The job's processes (leader and every descendant seen) that are still running."""
        pids = dict(job.tree)
        if job.pid:
            pids.setdefault(job.pid, None)
        return [p for p, start in pids.items() if alive(p) and (start is None or start_time(p) == start)]

    def kill_now(self) -> None:
        """Synchronous last resort (the server is terminated): SIGKILL the running job's tree."""
        self.manager.kill_now()

    async def shutdown(self) -> None:
        """Cancel every job (the client went away) and wait for them."""
        self.manager.kill_now()  # no grace: nobody is waiting for a best-so-far
        await self.manager.shutdown()


class _Reporter:
    """A job's progress notifications: its events as they come, a heartbeat otherwise.
    ``progress`` grows strictly, as MCP requires (evaluations done, or seconds waited)."""

    def __init__(
        self, job: Job, manager: JobManager, sink: Optional[ProgressSink], describe: Optional[Describe]
    ) -> None:
        self.job, self.manager, self.sink, self.describe = job, manager, sink, describe
        self.t0 = time.monotonic()
        self.last = 0.0
        self.total: Optional[float] = None
        self.counted = False  # the job reports a count (evaluations): heartbeats keep it

    async def _send(self, done: Optional[float], message: str) -> None:
        if self.sink is None:
            return
        value = done if done is not None and done > self.last else None
        if value is None:  # nothing new counted: move on by a hair (a count) or by the time waited
            value = self.last + 1e-3 if self.counted else max(self.last + 1e-3, time.monotonic() - self.t0)
        self.last = value
        await self.sink(Progress(round(value, 3), self.total, message))

    async def event(self, ev: Event) -> None:
        described = self.describe(ev) if self.describe else None
        if described is None:
            return
        done, total, message = described
        if total:
            self.total, self.counted = float(total), True
        await self._send(done, message)

    async def heartbeat(self) -> None:
        waited = time.monotonic() - self.t0
        position = self.manager.queue_position(self.job)
        if position is not None:
            message = f"queued behind {position + 1} job(s) for {waited:.0f} s (one job at a time)"
        else:
            message = f"{self.job.spec.kind}: running for {waited:.0f} s"
        await self._send(None, message)

"""Jobs started from commands and saves: their specs, their events turned into
$/progress, kernelband/jobEvent notifications and results, and cancel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Optional

from lsprotocol import types
from pygls.uris import to_fs_path

from kernelband.events import Event, Finished, JobError, Log
from kernelband.model import Result, ResultStatus
from kernelband.profile.schema import Profile
from kernelband.reverify import verdict_line

from . import display as D
from .documents import Analysis, text_hash
from .jobs import CANCELLED, CHECK, DONE, FAILED, OPTIMIZE, PROFILE, RUNNING, SUPERSEDED, Job, JobManager, JobSpec
from .service_client import Client
from .service_documents import OpenDocuments
from .service_variants import FoundVariants
from .settings import Settings
from .storeview import StoreView

log = logging.getLogger("kernelband_lsp")

JOB_EVENT = "kernelband/jobEvent"
# while a job runs and no event came for this long, $/progress says where it is and for how long
TICK_S = 2.0


@dataclass(frozen=True)
class MeasuredProfile:
    """A profile a profile job of this session measured, and the hash of the text it ran on."""

    module_hash: str
    profile: Profile


class JobRunner:
    """Runs optimize, profile and check jobs; what they find goes to the found variants."""

    def __init__(self, client: Client, documents: OpenDocuments, variants: FoundVariants, store: StoreView) -> None:
        self.client = client
        self.ls = client.ls
        self.documents = documents
        self.variants = variants
        self.store = store
        self.manager = JobManager(on_event=self._on_job_event, on_state=self._on_job_state)
        # profiles from this session's profile jobs, by (path, kernel): shown when the store
        # has none (e.g. a job run with --no-store)
        self.profiles: dict[tuple[str, str], MeasuredProfile] = {}
        # module hash -> code hash (documents.code_hash) of the texts jobs ran on: a profile of
        # a text that differs from the current one only in comments and layout is this version's
        self.code_hashes: dict[str, Optional[str]] = {}
        self._token_job: dict[types.ProgressToken, str] = {}
        self._job_token: dict[str, types.ProgressToken] = {}
        self._job_pct: dict[str, int] = {}
        self._job_reported: dict[str, float] = {}  # when $/progress last said something of a job
        self._tickers: dict[str, asyncio.Task] = {}
        self._displays: dict[str, D.JobDisplay] = {}  # the words for each unfinished job (display.py)

    # ================================================================== commands
    async def run_job(self, kind: str, args: dict, token: Optional[types.ProgressToken] = None) -> dict:
        uri, kernel = args.get("uri"), args.get("kernel")
        fail = (
            (lambda msg: {"jobId": None, "status": ResultStatus.FAILED.value, "kernel": kernel, "message": msg})
            if kind == OPTIMIZE
            else (lambda msg: {"jobId": None, "profile": None, "kernel": kernel, "message": msg})
        )
        if not isinstance(uri, str) or not isinstance(kernel, str):
            return fail("expected arguments {uri, kernel}")
        a = await self.documents.analysis(uri)
        if a is None:
            return fail(f"cannot read {uri}")
        if not a.parsed:
            return fail(
                f"the file does not parse (line {a.error.line}: {a.error.message})"
                if a.error
                else "the file does not parse"
            )
        k = a.detection.kernel(kernel)
        if k is None:
            return fail(f"no Triton kernel named {kernel!r} in this file")
        if not uri.startswith("file:") or not a.path:
            return fail("save the file first: KernelBand runs kernels from a file on disk")
        settings = self.client.settings  # pulled from the editor before the command (service.py)
        h = a.harness(kernel, settings.harness.get(kernel))
        if not h.found:
            return fail(f"no harness for {kernel}: {h.reason}")
        job = self.manager.submit(self.spec(kind, a, kernel, settings, background=False))
        await self.run_to_end(job, token)
        if kind == PROFILE:
            out: dict[str, object] = {
                "jobId": job.id,
                "profile": job.profile.to_dict() if job.profile else None,
                "kernel": kernel,
            }
            if job.profile is None:
                out["message"] = job.error or job.state
            return out
        result = job.result or Result(status=ResultStatus.FAILED, kernel=kernel, message=job.error or job.state)
        out = {"jobId": job.id, **result.to_dict()}
        out.update(self.variants.edit_for_result(job))
        # the words the client shows for it (display.py decides what may be read as a speedup)
        out["summary"] = D.result_summary(result, kernel)
        out["speedClaim"] = D.result_claims_speed(result)
        return out

    async def run_to_end(self, job: Job, token: Optional[types.ProgressToken]) -> Job:
        """Progress for a submitted job, until it ends; a cancelled request cancels it."""
        try:
            await self._begin_progress(job, token)
            return await self.manager.wait(job)
        except asyncio.CancelledError:
            # $/cancelRequest (cancellation.py): the job must not outlive its request
            self.manager.cancel(job.id, reason="the request was cancelled")
            raise

    def spec(self, kind: str, a: Analysis, kernel: str, settings: Settings, background: bool) -> JobSpec:
        if len(self.code_hashes) > 256:
            self.code_hashes.clear()
        self.code_hashes[a.hash] = a.code_hash  # the code the job measures (its profile's version)
        env = {}
        if self.client.secret:
            env["OPENAI_API_KEY"] = self.client.secret
        return JobSpec(
            kind=kind,
            path=os.path.abspath(a.path),
            kernel=kernel,
            source=a.text,
            uri=a.uri,
            version=a.version,
            background=background,
            settings=settings,
            harness=settings.harness.get(kernel),
            cwd=str(self.store.workspace_of(a.path)),
            env=env,
        )

    def start(self, spec: JobSpec) -> Job:
        """Submit a job that no request waits for (a save's): progress on a token of its own."""
        job = self.manager.submit(spec)
        asyncio.get_running_loop().create_task(self._begin_progress(job, None))
        return job

    def cancel(self, args: object) -> dict:
        """kernelband.cancel: {jobId}; {uri, kernel[, kind]} (that kernel's running and queued
        jobs: a client that cancelled before it learnt the job id); none: every job."""
        job_id = args.get("jobId") if isinstance(args, dict) else (args if isinstance(args, str) else None)
        if (
            job_id is None
            and isinstance(args, dict)
            and isinstance(args.get("uri"), str)
            and isinstance(args.get("kernel"), str)
        ):
            kind = args.get("kind") if args.get("kind") in tuple(D.VERBS) else None
            out: list[str] = []
            for job in self.jobs_for(args["uri"], args["kernel"], kind):
                out.extend(self.manager.cancel(job.id))
            return {"cancelled": out}
        if job_id is not None and (not isinstance(job_id, str) or not job_id):
            return {"cancelled": [], "error": f"jobId must be a string, not {type(job_id).__name__}"}
        return {"cancelled": self.manager.cancel(job_id)}

    def jobs_for(self, uri: str, kernel: str, kind: Optional[str] = None) -> list[Job]:
        """Unfinished jobs on (uri, kernel), matched by uri or by file path."""
        path = to_fs_path(uri)
        path = os.path.abspath(path) if path else None
        return [
            j
            for j in self.manager.jobs()
            if j.spec.kernel == kernel
            and (kind is None or j.spec.kind == kind)
            and (j.spec.uri == uri or (path is not None and j.spec.path == path))
        ]

    def _display(self, job: Job) -> D.JobDisplay:
        d = self._displays.get(job.id)
        if d is None:
            d = self._displays[job.id] = D.JobDisplay(job.spec.kind, background=job.spec.background)
        return d

    def job_line(self, j: Job) -> str:
        return self._display(j).line(self.manager.queue_position(j), running=j.state == RUNNING)

    # ================================================================== job plumbing
    async def _begin_progress(self, job: Job, token: Optional[types.ProgressToken]) -> None:
        if token is None and self.client.cap("window", "work_done_progress"):
            token = f"kernelband-{job.id}-{os.getpid()}"
            try:
                await asyncio.wait_for(self.ls.work_done_progress.create_async(token), timeout=10)
            except Exception as e:
                log.info("could not create a progress token: %s", e)
                token = None
        if token is None or job.finished:
            return
        self._token_job[token] = job.id
        self._job_token[job.id] = token
        verb = D.VERBS.get(job.spec.kind, job.spec.kind).capitalize()
        title = f"KernelBand: {verb} {job.spec.kernel}" + (" (background)" if job.spec.background else "")
        msg = self.job_line(job)
        self.ls.work_done_progress.begin(
            token, types.WorkDoneProgressBegin(title=title, cancellable=True, message=msg, percentage=0)
        )
        self._job_pct[job.id] = 0
        self._job_reported[job.id] = time.monotonic()
        if job.state == RUNNING:
            self._start_ticker(job)

    def _start_ticker(self, job: Job) -> None:
        """While the job runs, say where it is when no event has said anything for a while
        (the engine's start and the original's preparation take tens of seconds on a CPU)."""
        if job.id in self._tickers or job.id not in self._job_token:
            return

        async def tick() -> None:
            try:
                while not job.finished and job.id in self._job_token:
                    await asyncio.sleep(TICK_S / 4)
                    if time.monotonic() - self._job_reported.get(job.id, 0.0) >= TICK_S and not job.finished:
                        self._report(job, self._display(job).status())
            finally:
                self._tickers.pop(job.id, None)

        with contextlib.suppress(RuntimeError):  # not serving (unit use)
            self._tickers[job.id] = asyncio.get_running_loop().create_task(tick())

    def progress_cancelled(self, token: types.ProgressToken) -> None:
        job_id = self._token_job.get(token)
        if job_id is not None:
            self.manager.cancel(job_id)

    def _report(self, job: Job, message: str, pct: Optional[float] = None) -> None:
        token = self._job_token.get(job.id)
        if token is None:
            return
        p = None
        if pct is not None:
            p = max(self._job_pct.get(job.id, 0), min(100, int(pct)))
            self._job_pct[job.id] = p
        self._job_reported[job.id] = time.monotonic()
        self.ls.work_done_progress.report(
            token, types.WorkDoneProgressReport(message=message, percentage=p, cancellable=True)
        )

    def _notify_event(self, job: Job, ev: Event, synthetic: bool = False, text: Optional[str] = None) -> None:
        disp = self._display(job)
        # text: this event's line as the server words it (None: no progress line); line: the
        # job's lens line; speedClaim: whether this job's numbers may be read as a speedup
        payload = {
            "jobId": job.id,
            "uri": job.spec.uri,
            "kernel": job.spec.kernel,
            "kind": job.spec.kind,
            "background": job.spec.background,
            "pid": job.pid,
            "event": {"type": ev.type, "t": ev.t, **ev.data},
            "text": text,
            "line": self.job_line(job),
            "speedClaim": disp.claims_speed,
        }
        if synthetic:
            payload["synthetic"] = True
        try:
            self.ls.protocol.notify(JOB_EVENT, payload)
        except Exception as e:  # pragma: no cover
            log.debug("jobEvent notification failed: %s", e)

    def _on_job_event(self, job: Job, ev: Event) -> None:
        disp = self._display(job)
        text = disp.on_event(ev.payload)
        if ev.type == "result" and job.spec.kind == OPTIMIZE:
            text = f"finished: {disp.counts()}"
        self._notify_event(job, ev, text=text)
        if ev.type in ("started", "baseline", "progress") or (ev.type == "log" and text):
            self.client.refresh_lenses()  # the lens line shows the phase and the counts
        if text:
            self._report(job, text, disp.percent() if ev.type in ("progress", "result") else None)
        if isinstance(ev.payload, Log):
            # the kernelband/jobEvent above carries it to the client's job log; a server log
            # line too would show it twice: only warnings are repeated
            lvl = ev.payload.level.lower()
            (log.warning if lvl in ("warning", "error") else log.debug)("%s: %s", job.id, ev.payload.message)

    def _on_job_state(self, job: Job) -> None:
        self.client.refresh_lenses()
        if not job.finished:
            if job.state == RUNNING:
                self._start_ticker(job)
                if job.pid:
                    self._report(job, self._display(job).status())
            return
        if job.state in (CANCELLED, SUPERSEDED, FAILED):
            if job.spec.kind == OPTIMIZE and job.result is not None:
                self._notify_event(job, Event(Finished(job.result)), synthetic=True)
            elif job.state != DONE:
                self._notify_event(job, Event(JobError(job.error or job.state, kind=job.state)), synthetic=True)
        token = self._job_token.pop(job.id, None)
        self._job_reported.pop(job.id, None)
        ticker = self._tickers.pop(job.id, None)
        if ticker is not None:
            ticker.cancel()
        if token is not None:
            self._token_job.pop(token, None)
            self._job_pct.pop(job.id, None)
            end_msg = self._end_message(job)
            with contextlib.suppress(Exception):
                self.ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=end_msg))
            self.ls.work_done_progress.tokens.pop(token, None)
        if job.state == DONE and job.spec.kind == OPTIMIZE:
            res = job.result
            if res is not None and res.found:
                fv = self.variants.remember(job)
                if job.spec.background:
                    log.info("background: %s (%s)", D.result_summary(res, job.spec.kernel), job.id)
                    self.documents.refresh(fv.uri)
            self.store.invalidate()
        elif job.state == DONE:
            if job.spec.kind == PROFILE and job.profile is not None:
                self.profiles[(job.spec.path, job.spec.kernel)] = MeasuredProfile(
                    text_hash(job.spec.source), job.profile
                )
            self.store.invalidate()
        self._displays.pop(job.id, None)

    def _end_message(self, job: Job) -> str:
        if job.state == CANCELLED:
            return "cancelled"
        if job.state == SUPERSEDED:
            return "superseded by a newer save"
        if job.state == FAILED:
            return f"failed: {job.error}"
        if job.spec.kind == PROFILE:
            return "profile ready"
        if job.spec.kind == CHECK:
            return verdict_line(job.check)[1]
        return D.result_summary(job.result, job.spec.kernel) if job.result is not None else "done"

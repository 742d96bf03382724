"""Jobs: ``python -m kernelband optimize|profile ... --events jsonl`` as subprocesses.

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
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from kernelband.events import Event

from .settings import Settings

log = logging.getLogger(__name__)

OPTIMIZE = "optimize"
PROFILE = "profile"

QUEUED = "queued"
RUNNING = "running"
DONE = "done"
FAILED = "failed"
CANCELLED = "cancelled"
SUPERSEDED = "superseded"
FINAL_STATES = (DONE, FAILED, CANCELLED, SUPERSEDED)

STREAM_LIMIT = 256 * 1024 * 1024  # one event line may carry a whole module (best_source)


@dataclass
class JobSpec:
    kind: str  # OPTIMIZE | PROFILE
    path: str  # absolute path of the module
    kernel: str
    source: str  # the text the job runs on (editor buffer or disk)
    uri: str = ""
    version: Optional[int] = None  # editor version of `source`; None for a file read from disk
    background: bool = False
    settings: Settings = field(default_factory=Settings)
    harness: Optional[str] = None  # explicit harness (setting), else discovery in the engine
    cwd: Optional[str] = None
    env: dict[str, str] = field(default_factory=dict)  # extra environment (never logged)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.path, self.kernel)


@dataclass
class Job:
    id: str
    spec: JobSpec
    state: str = QUEUED
    events: list[Event] = field(default_factory=list)
    result: Optional[dict[str, Any]] = None
    profile: Optional[dict[str, Any]] = None
    error: Optional[str] = None
    pid: Optional[int] = None
    returncode: Optional[int] = None
    argv: list[str] = field(default_factory=list)
    submitted_at: float = field(default_factory=time.time)
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    cancel_reason: str = ""
    stderr_tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=200))
    stdout_other: list[str] = field(default_factory=list)
    done: Optional[asyncio.Future] = None
    last_progress: dict[str, Any] = field(default_factory=dict)
    tree: dict[int, Optional[int]] = field(default_factory=dict)  # descendants seen: pid -> start time

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    def summary(self) -> dict[str, Any]:
        return {
            "jobId": self.id, "kind": self.spec.kind, "uri": self.spec.uri, "file": self.spec.path,
            "kernel": self.spec.kernel, "state": self.state, "background": self.spec.background,
            "pid": self.pid, "version": self.spec.version, "progress": self.last_progress or None,
            "submittedAt": self.submitted_at, "startedAt": self.started_at, "endedAt": self.ended_at,
        }


EventCallback = Callable[[Job, Event], None]
StateCallback = Callable[[Job], None]


def default_command_prefix() -> list[str]:
    """How to run the engine: env KERNELBAND_LSP_JOB_COMMAND (a JSON list) overrides."""
    raw = os.environ.get("KERNELBAND_LSP_JOB_COMMAND")
    if raw:
        try:
            cmd = json.loads(raw)
            if isinstance(cmd, list) and cmd and all(isinstance(x, str) for x in cmd):
                return cmd
        except ValueError:
            pass
        log.warning("ignoring KERNELBAND_LSP_JOB_COMMAND (expected a JSON list of strings)")
    return [sys.executable, "-m", "kernelband"]


class JobManager:
    def __init__(
        self,
        command_prefix: Optional[list[str]] = None,
        on_event: Optional[EventCallback] = None,
        on_state: Optional[StateCallback] = None,
        kill_grace_s: float = 2.0,
    ) -> None:
        self.command_prefix = list(command_prefix) if command_prefix else default_command_prefix()
        self.on_event = on_event
        self.on_state = on_state
        self.kill_grace_s = kill_grace_s
        self._ids = itertools.count(1)
        self._jobs: dict[str, Job] = {}
        self._queue: list[Job] = []
        self._running: Optional[Job] = None
        self._proc: Optional[asyncio.subprocess.Process] = None
        self._task: Optional[asyncio.Task] = None
        self._flags: dict[str, Optional[set[str]]] = {}
        self._closed = False

    # ------------------------------------------------------------------ queries
    def get(self, job_id: str) -> Optional[Job]:
        return self._jobs.get(job_id)

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
        return [j for j in self.jobs() if j.spec.path == path and j.spec.kernel == kernel
                and (kind is None or j.spec.kind == kind)]

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
        log.info("%s queued: %s %s in %s%s", job.id, spec.kind, spec.kernel, os.path.basename(spec.path),
                 " (background)" if spec.background else "")
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
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=self.kill_grace_s + 3)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass

    def kill_now(self) -> None:
        """Synchronous last resort (process exit): SIGKILL the running job's group."""
        job = self._running
        if job is not None and job.pid:
            _remember(job, process_tree(job.pid))
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
    async def _supported_flags(self, sub: str) -> Optional[set[str]]:
        """Flags the engine's subcommand accepts (from --help), probed once; None if unknown."""
        if sub in self._flags:
            return self._flags[sub]
        flags: Optional[set[str]] = None
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.command_prefix, sub, "--help",
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                out, _ = await asyncio.wait_for(proc.communicate(), timeout=30)
            except asyncio.TimeoutError:
                _killpg(proc.pid, signal.SIGKILL)
                out = b""
            if proc.returncode == 0:
                import re

                flags = set(re.findall(r"(--[A-Za-z0-9][A-Za-z0-9-]*)", out.decode("utf-8", "replace")))
        except OSError as e:
            log.warning("cannot probe `%s %s --help`: %s", " ".join(self.command_prefix), sub, e)
        self._flags[sub] = flags
        return flags

    async def build_argv(self, spec: JobSpec) -> list[str]:
        s = spec.settings
        argv = [*self.command_prefix, spec.kind, spec.path, "--kernel", spec.kernel, "--events", "jsonl",
                "--stdin-source"]
        flags = await self._supported_flags(spec.kind)

        def add(flag: str, value: Any, always: bool = False) -> None:
            if value in (None, "", 0, 0.0, [], ()) and not always:
                return
            if flags is not None and flag not in flags:
                log.info("the engine's `%s` has no %s; not passed", spec.kind, flag)
                return
            argv.extend([flag, str(value)])

        if spec.kind == OPTIMIZE:
            argv.append("--json")
            add("--budget", s.budget_evaluations)
            add("--seconds", s.budget_seconds)
            add("--tokens", s.budget_tokens)
            add("--dollars", s.budget_dollars)
            add("--generator", s.generator if s.generator != "rules" else None)
            if s.generator == "openai":
                add("--model", s.model)
                add("--base-url", s.base_url)
            add("--search", s.search if s.search != "kernelband" else None)
            add("--strategies", ",".join(s.strategies))
            add("--min-speedup", s.min_speedup)  # the engine decides "improved" with the editor's floor
            # --- executors (issue 15): the job's workers on this machine's GPUs or a Ray cluster's
            add("--executor", s.executor if s.executor != "local" else None)
            if s.executor == "ray":
                add("--ray-address", s.ray_address)
            add("--workers", s.workers)
        add("--harness", spec.harness)
        add("--device", s.device if s.device and s.device != "auto" else None)
        return argv

    async def _run(self, job: Job) -> None:
        spec = job.spec
        job.argv = await self.build_argv(spec)
        if job.cancel_reason:  # cancelled while the flags were probed
            self._finish(job, CANCELLED, reason=job.cancel_reason)
            return
        env = dict(os.environ)
        env.update(spec.env)
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("PYTHONIOENCODING", "utf-8")
        log.info("%s running: %s", job.id, " ".join(job.argv))
        self._notify_state(job)
        proc = await asyncio.create_subprocess_exec(
            *job.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=spec.cwd or os.path.dirname(spec.path) or None,
            env=env,
            start_new_session=True,  # own process group: cancel kills the whole tree
            limit=STREAM_LIMIT,
        )
        self._proc = proc
        job.pid = proc.pid
        self._notify_state(job)
        if job.cancel_reason:
            self._terminate(job)

        async def feed() -> None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(spec.source.encode("utf-8"))
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                try:
                    proc.stdin.close()
                except Exception:
                    pass

        async def read_stdout() -> None:
            assert proc.stdout is not None
            while True:
                try:
                    raw = await proc.stdout.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    job.stdout_other.append("<a line over the stream limit was dropped>")
                    continue
                if not raw:
                    break
                line = raw.decode("utf-8", "replace").strip()
                if not line:
                    continue
                try:
                    ev = Event.from_json(line)
                except ValueError:
                    job.stdout_other.append(line)
                    continue
                self._on_event(job, ev)

        async def read_stderr() -> None:
            assert proc.stderr is not None
            while True:
                raw = await proc.stderr.readline()
                if not raw:
                    break
                text = raw.decode("utf-8", "replace").rstrip()
                job.stderr_tail.append(text)
                if text.strip():
                    log.info("%s: %s", job.id, text)

        async def watch_tree() -> None:
            # remember the job's descendants while it runs: a worker in its own session
            # is re-parented when the job dies and could not be found afterwards
            delay = 0.25
            while True:
                await asyncio.sleep(delay)
                _remember(job, process_tree(proc.pid))
                delay = 1.0

        feeder = asyncio.ensure_future(feed())
        readers = asyncio.ensure_future(asyncio.gather(read_stdout(), read_stderr()))
        watcher = asyncio.ensure_future(watch_tree())
        try:
            job.returncode = await proc.wait()
            # the leader is gone; a straggler that inherited its stdout keeps the pipe
            # open: give the readers a moment, then kill what is left and stop reading
            try:
                await asyncio.wait_for(asyncio.shield(readers), timeout=2.0)
            except asyncio.TimeoutError:
                log.info("%s: output still open after the job exited; stopping leftover processes", job.id)
                self._sweep(job)
                try:
                    await asyncio.wait_for(asyncio.shield(readers), timeout=2.0)
                except asyncio.TimeoutError:
                    readers.cancel()
        finally:
            watcher.cancel()
            feeder.cancel()
            if not readers.done():
                readers.cancel()
        self._conclude(job)

    def _on_event(self, job: Job, ev: Event) -> None:
        job.events.append(ev)
        if ev.type == "result":
            res = ev.data.get("result", ev.data)
            if isinstance(res, dict):
                job.result = res
        elif ev.type == "profile":
            prof = ev.data.get("profile", ev.data)
            if isinstance(prof, dict):
                job.profile = prof
        elif ev.type == "error":
            job.error = str(ev.data.get("message") or "the job reported an error")
        elif ev.type == "progress":
            job.last_progress = dict(ev.data)
        if self.on_event is not None:
            try:
                self.on_event(job, ev)
            except Exception:
                log.exception("job event callback failed")

    def _conclude(self, job: Job) -> None:
        if job.cancel_reason:
            self._finish(job, CANCELLED, reason=job.cancel_reason)
            return
        if job.result is None and job.spec.kind == OPTIMIZE and job.stdout_other:
            # `--json` may print the Result after the events (possibly indented)
            try:
                obj = json.loads("\n".join(job.stdout_other))
                if isinstance(obj, dict) and "status" in obj:
                    job.result = obj
            except ValueError:
                pass
        ok = (job.result is not None) if job.spec.kind == OPTIMIZE else (job.profile is not None)
        if ok:
            self._finish(job, DONE)
            return
        reason = job.error
        if not reason:
            tail = [l for l in job.stderr_tail if l.strip()]
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
            status = "failed" if state == FAILED else "cancelled"
            if job.result is None or state != FAILED:
                base = dict(job.result or {})
                base.update({"status": status, "kernel": job.spec.kernel, "file": job.spec.path,
                             "message": reason or base.get("message", "")})
                base.setdefault("warnings", [])
                if job.last_progress:
                    base.setdefault("evaluations", job.last_progress.get("done"))
                job.result = base
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
        _remember(job, tree)
        log.info("%s: stopping process group %d (%d descendant(s))", job.id, pid, len(tree))
        _killpg(pid, signal.SIGINT)
        for d in tree:
            if _pgid(d) not in (pid, None):
                _kill(d, signal.SIGTERM)
        proc = self._proc
        asyncio.get_running_loop().call_later(self.kill_grace_s, self._escalate, job, proc)

    def _escalate(self, job: Job, proc: Optional[asyncio.subprocess.Process]) -> None:
        pid = job.pid
        if not pid:
            return
        if proc is None or proc.returncode is not None:
            return  # it exited; the end-of-job sweep already killed what was left
        _remember(job, process_tree(pid))
        log.info("%s: process %d still running after %.1f s; killing", job.id, pid, self.kill_grace_s)
        self._sweep(job)

    def _sweep(self, job: Job) -> None:
        """SIGKILL whatever is left of the job: its group and every descendant seen
        (checked by start time, so a recycled pid is never hit)."""
        if job.pid:
            _killpg(job.pid, signal.SIGKILL)
        for d, start in list(job.tree.items()):
            if _alive(d) and _starttime(d) == start:
                _remember(job, process_tree(d))
        for d, start in list(job.tree.items()):
            if not _alive(d) or _starttime(d) != start:
                continue
            if _pgid(d) == d:
                _killpg(d, signal.SIGKILL)
            _kill(d, signal.SIGKILL)


def _remember(job: Job, pids: list[int]) -> None:
    for p in pids:
        if p not in job.tree:
            job.tree[p] = _starttime(p)


def _stat_fields(pid: int) -> Optional[list[str]]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def _starttime(pid: int) -> Optional[int]:
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def process_tree(pid: int) -> list[int]:
    """Descendants of pid (any depth), from /proc (Linux) or `ps` (elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
        for n in names:
            if not n.isdigit():
                continue
            try:
                with open(f"/proc/{n}/stat", "rb") as f:
                    stat = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses
            rest = stat[stat.rfind(")") + 2 :].split()
            if len(rest) >= 2:
                children.setdefault(int(rest[1]), []).append(int(n))
    except OSError:
        try:
            import subprocess

            out = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, timeout=5).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 2:
                    children.setdefault(int(parts[1]), []).append(int(parts[0]))
        except Exception:
            return []
    out: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        for c in children.get(p, []):
            if c not in out:
                out.append(c)
                stack.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
        return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True


def _pgid(pid: int) -> Optional[int]:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError, OSError):
        return None


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    except OSError as e:  # pragma: no cover
        log.debug("killpg(%d, %d): %s", pgid, sig, e)

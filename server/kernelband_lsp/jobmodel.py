"""What a job is: its request (JobSpec), its record (Job) and its states. Plain data,
shared by the job manager (jobs.py) and its pipes (jobio.py)."""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from kernelband.check_outcome import CheckOutcome
from kernelband.events import Event, Progress
from kernelband.model import Result
from kernelband.profile.schema import Profile

from .settings import Settings

OPTIMIZE = "optimize"
PROFILE = "profile"
CHECK = "check"  # re-verify an applied variant: `kernelband check` of it against the original

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
    kind: str  # OPTIMIZE | PROFILE | CHECK
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
    variant_path: Optional[str] = None  # CHECK: a file holding the variant (`source` is the original)
    extra_args: tuple[str, ...] = ()  # more engine flags (the agent tools' `--tier`), after the settings'

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.path, self.kernel)


@dataclass
class Job:
    id: str
    spec: JobSpec
    state: str = QUEUED
    events: list[Event] = field(default_factory=list)
    result: Optional[Result] = None
    profile: Optional[Profile] = None
    check: Optional[CheckOutcome] = None  # CHECK: what `kernelband check --json` printed, decoded
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
    last_progress: Optional[Progress] = None
    tree: dict[int, Optional[int]] = field(default_factory=dict)  # descendants seen: pid -> start time

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    def summary(self) -> dict[str, object]:
        return {
            "jobId": self.id,
            "kind": self.spec.kind,
            "uri": self.spec.uri,
            "file": self.spec.path,
            "kernel": self.spec.kernel,
            "state": self.state,
            "background": self.spec.background,
            "pid": self.pid,
            "version": self.spec.version,
            "progress": self.last_progress.to_wire() if self.last_progress else None,
            "submittedAt": self.submitted_at,
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
        }


EventCallback = Callable[[Job, Event], None]
StateCallback = Callable[[Job], None]

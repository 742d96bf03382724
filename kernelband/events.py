"""Typed job events: the contract between a job process and whoever watches it.

A job run with ``--events jsonl`` writes one JSON object per line to stdout and
nothing else. Every event has ``type`` and ``t`` (seconds since the job started), and
the fields of its payload class below, decoded once where it is read
(``Event.from_json``): a field of the wrong type or one no payload has is refused there,
in one line. The language server, the agent tools and the CLI's progress bar consume the
same stream, each by the payload's class.

    started    Started     {kernel, file, source_hash, budget, generator, search, session_id, ...}
    baseline   Baseline    {time_ms, clock, interpreted, speed_claim, device, deterministic, ...}
    candidate  Candidate   {index, variant_id, parent, strategy, generator, status, time_ms,
                            speedup, message, description, phases, worker, speed_claim}
    progress   Progress    {done, total, best_ms, best_speedup, message, speed_claim}
    profile    ProfileReady {profile}   (kernelband profile)
    result     Finished    {result}     (the final Result; exactly one on success)
    error      JobError    {message, kind}  (the job could not run; exit code != 0)
    log        Log         {level, message}  (human-readable notes)

Every event is scrubbed on emission (kernelband/redact.py): known secrets are redacted and
messages capped at 4 KB, so nothing a variant or the worker says can carry an API key to
the editor or blow up a JSON line.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Optional, TextIO, Union

from .decode import MalformedMessage, Message, decode_fields
from .json_types import JsonObject
from .model import Result
from .profile.schema import Profile, ProfileError
from .redact import scrub


@dataclass(frozen=True)
class Payload(Message):
    """An event's fields. On the wire an optional field left at None is left out."""

    TYPE: ClassVar[str] = ""

    @classmethod
    def from_wire(cls, body: object) -> Any:
        return decode_fields(cls, body, f"malformed {cls.TYPE} event")

    def to_wire(self) -> JsonObject:
        defaults = {f.name: f.default for f in dataclasses.fields(self) if f.default is not dataclasses.MISSING}
        return {k: v for k, v in super().to_wire().items() if not (v is None and defaults.get(k) is None)}


@dataclass(frozen=True)
class Started(Payload):
    TYPE: ClassVar[str] = "started"
    kernel: str
    file: str = ""
    source_hash: str = ""
    budget: Optional[dict[str, Union[int, float, None]]] = None  # session_config.Budget's limits
    generator: Optional[str] = None
    search: Optional[str] = None
    session_id: Optional[str] = None
    interpreted: Optional[bool] = None
    tier: Optional[int] = None  # kernelband profile's

    @property
    def evaluations(self) -> Optional[int]:
        n = (self.budget or {}).get("evaluations")
        return int(n) if n else None


@dataclass(frozen=True)
class Baseline(Payload):
    TYPE: ClassVar[str] = "baseline"
    time_ms: Optional[float] = None
    clock: Optional[str] = None
    interpreted: Optional[bool] = None
    speed_claim: Optional[bool] = None  # False: CPU-interpreter times, never a speedup
    device: Optional[str] = None
    deterministic: Optional[bool] = None
    weak_harness: bool = False
    message: str = ""
    prepare_ms: Optional[float] = None
    setup_s: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate(Payload):
    TYPE: ClassVar[str] = "candidate"
    index: int
    variant_id: Optional[str] = None
    parent: Optional[str] = None
    strategy: Optional[str] = None
    generator: Optional[str] = None
    status: str = ""
    time_ms: Optional[float] = None
    speedup: Optional[float] = None
    message: str = ""
    description: str = ""
    phases: dict[str, float] = field(default_factory=dict)
    worker: Optional[str] = None  # several workers: which one evaluated it
    speed_claim: Optional[bool] = None


@dataclass(frozen=True)
class Progress(Payload):
    TYPE: ClassVar[str] = "progress"
    done: int
    total: Optional[int] = None
    best_ms: Optional[float] = None
    best_speedup: Optional[float] = None
    message: str = ""
    speed_claim: Optional[bool] = None


@dataclass(frozen=True)
class ProfileReady(Payload):
    TYPE: ClassVar[str] = "profile"
    profile: Optional[Profile]  # None: the engine sent an empty one, which is no profile

    @classmethod
    def from_wire(cls, body: object) -> "ProfileReady":
        if not isinstance(body, dict) or set(body) != {"profile"}:
            raise MalformedMessage("malformed profile event: it carries one profile and nothing else")
        try:
            profile = Profile.from_wire(body["profile"])
        except ProfileError as e:
            raise MalformedMessage(f"malformed profile event: {e}") from None
        return cls(profile)


@dataclass(frozen=True)
class Finished(Payload):
    TYPE: ClassVar[str] = "result"
    result: Result

    @classmethod
    def from_wire(cls, body: object) -> "Finished":
        if not isinstance(body, dict) or set(body) != {"result"} or not isinstance(body["result"], dict):
            raise MalformedMessage("malformed result event: it carries one result object and nothing else")
        try:
            return cls(Result.from_dict(body["result"]))
        except (TypeError, ValueError, KeyError) as e:  # MalformedMessage is a ValueError
            raise MalformedMessage(f"malformed result event: {e}") from None


@dataclass(frozen=True)
class JobError(Payload):
    TYPE: ClassVar[str] = "error"
    message: str
    kind: str = ""


@dataclass(frozen=True)
class Log(Payload):
    TYPE: ClassVar[str] = "log"
    message: str
    level: str = "info"
    worker_pid: Optional[int] = None  # a job's evaluation worker, where the job names it


EventPayload = Union[Started, Baseline, Candidate, Progress, ProfileReady, Finished, JobError, Log]
PAYLOADS: dict[str, type[Payload]] = {
    p.TYPE: p for p in (Started, Baseline, Candidate, Progress, ProfileReady, Finished, JobError, Log)
}


@dataclass(frozen=True)
class Event:
    payload: EventPayload
    t: float = 0.0

    @property
    def type(self) -> str:
        return self.payload.TYPE

    @property
    def data(self) -> JsonObject:
        """The payload's wire form (without ``type`` and ``t``)."""
        return self.payload.to_wire()

    def to_json(self) -> str:
        return json.dumps({"type": self.type, "t": round(self.t, 4), **self.data}, default=str)

    @classmethod
    def from_json(cls, line: str) -> "Event":
        """The event a line carries; ValueError for a line that is no event (not JSON, no
        known type), MalformedMessage (a ValueError) for one whose fields do not decode."""
        d = json.loads(line)
        if not isinstance(d, dict) or d.get("type") not in PAYLOADS:
            raise ValueError(f"not a kernelband event: {line[:200]!r}")
        etype = d.pop("type")
        t = d.pop("t", 0.0)
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise MalformedMessage(f"malformed {etype} event: t must be a number")
        return cls(PAYLOADS[etype].from_wire(d), float(t))


EventSink = Callable[[Event], None]


class EventEmitter:
    """Stamps events with elapsed time and fans them out to sinks (thread-safe)."""

    def __init__(self, *sinks: EventSink) -> None:
        self._sinks = list(sinks)
        self._t0 = time.monotonic()
        self._lock = threading.Lock()

    def add_sink(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def emit(self, payload: EventPayload) -> Event:
        clean = type(payload).from_wire(scrub(payload.to_wire()))
        ev = Event(clean, time.monotonic() - self._t0)
        with self._lock:
            for sink in self._sinks:
                sink(ev)
        return ev


def jsonl_sink(stream: Optional[TextIO] = None) -> EventSink:
    out = stream or sys.stdout

    def sink(ev: Event) -> None:
        out.write(ev.to_json() + "\n")
        out.flush()

    return sink

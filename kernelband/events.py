"""Typed job events: the contract between a job process and whoever watches it.

A job run with ``--events jsonl`` writes one JSON object per line to stdout and
nothing else. Every event has ``type`` and ``t`` (seconds since the job started).
The language server and the CLI's progress bar consume the same stream.

    started    {kernel, file, source_hash, budget, generator, search, session_id}
    baseline   {time_ms, clock, interpreted, device, deterministic, weak_harness, message}
    candidate  {index, variant_id, parent, strategy, generator, status, time_ms,
                speedup, message, description}
    progress   {done, total, best_ms, best_speedup, message}
    profile    {profile}             (kernelband profile)
    result     {result}              (the final Result dict; exactly one on success)
    error      {message, kind}       (the job could not run; exit code != 0)
    log        {level, message}      (human-readable notes)

Every event's data is scrubbed on emission (kernelband/redact.py): known secrets are
redacted and messages capped at 4 KB, so nothing a variant or the worker says can carry
an API key to the editor or blow up a JSON line.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, TextIO

from .redact import scrub

EVENT_TYPES = ("started", "baseline", "candidate", "progress", "profile", "result", "error", "log")


@dataclass
class Event:
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    t: float = 0.0

    def to_json(self) -> str:
        return json.dumps({"type": self.type, "t": round(self.t, 4), **self.data}, default=str)

    @classmethod
    def from_json(cls, line: str) -> "Event":
        d = json.loads(line)
        if not isinstance(d, dict) or d.get("type") not in EVENT_TYPES:
            raise ValueError(f"not a kernelband event: {line[:200]!r}")
        etype = d.pop("type")
        t = float(d.pop("t", 0.0))
        return cls(etype, d, t)


EventSink = Callable[[Event], None]


class EventEmitter:
    """Stamps events with elapsed time and fans them out to sinks (thread-safe)."""

    def __init__(self, *sinks: EventSink) -> None:
        self._sinks = list(sinks)
        self._t0 = time.monotonic()
        self._lock = threading.Lock()

    def add_sink(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def emit(self, etype: str, **data: Any) -> Event:
        if etype not in EVENT_TYPES:
            raise ValueError(f"unknown event type {etype!r}")
        ev = Event(etype, scrub(data), time.monotonic() - self._t0)
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


def read_events(lines: Any) -> list[Event]:
    """Parse an iterable of JSON lines, skipping blanks."""
    return [Event.from_json(line) for line in lines if line.strip()]

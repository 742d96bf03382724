"""The session -> judge requests: one frozen dataclass per judge op (``judge.OPS``).

The session (``evaluate.Evaluator``) builds a request and sends ``to_wire()``, a plain
JSON object; the judge decodes it once with ``decode`` (``from_wire``), which checks every
field's type and refuses an unknown or missing one with a one-line ``MalformedRequest``.
The judge's ops then read typed attributes, never ``req.get(...)``. A field's default is
what the judge assumed when the field was absent. Replies keep their own typed models
(``model.Baseline``, ``Evaluation``, ``PairedTiming``, ``profile.schema.Profile``).

No torch here: the session imports this module.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Optional, TypeVar

from ..model import Task
from .deadlines import SANITIZE_RUN_S
from .decode import MalformedMessage, Message, decode_fields

# keys of the line's envelope (worker/main.py), not of the request's body
ENVELOPE = frozenset({"id", "op"})


class MalformedRequest(MalformedMessage):
    """A request whose body does not match its op's dataclass (one line, says which field)."""


R = TypeVar("R", bound="Request")


@dataclass(frozen=True)
class Request(Message):
    """A request's body; ``OP`` is the judge op that serves it. ``to_wire()``: every field, a
    Task as its dict (the shape the judge reads)."""

    OP: ClassVar[str] = ""

    @classmethod
    def from_wire(cls: type[R], body: object) -> R:
        """The request ``body`` describes, its fields' types checked; MalformedRequest if not."""
        try:
            return decode_fields(cls, body, f"malformed {cls.OP} request")
        except MalformedMessage as e:
            raise MalformedRequest(str(e)) from None


@dataclass(frozen=True)
class Hello(Request):
    """The judge's identity (``client.WorkerInfo``); it also starts the zygote early."""

    OP: ClassVar[str] = "hello"


@dataclass(frozen=True)
class Prepare(Request):
    """Run the original: references, and (``time``) its timing and profile at ``profile_tier``."""

    OP: ClassVar[str] = "prepare"
    task: Task
    workdir: str
    time: bool = True
    profile_tier: int = 0
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Evaluate(Request):
    """Judge one candidate. ``screen``: a search's candidate, which may end as Status.SLOWER
    after its timing; ``rounds``: paired timing rounds under the interpreter (None: the default)."""

    OP: ClassVar[str] = "evaluate"
    source: str
    variant_id: str = "variant"
    time: bool = True
    profile_tier: int = 0
    facts: dict[str, Any] = field(default_factory=dict)
    screen: bool = False
    rounds: Optional[int] = None


@dataclass(frozen=True)
class Retime(Request):
    """The original timed as a candidate's timing step runs."""

    OP: ClassVar[str] = "retime"


@dataclass(frozen=True)
class Paired(Request):
    """The original and a variant re-measured in ``rounds`` paired rounds."""

    OP: ClassVar[str] = "paired"
    source: str
    variant_id: Optional[str] = None
    rounds: int = 10


@dataclass(frozen=True)
class ProfileRun(Request):
    """Profile the original (``source`` None) or a variant at ``tier``."""

    OP: ClassVar[str] = "profile"
    source: Optional[str] = None
    tier: int = 2
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeviceFacts(Request):
    """Measure the device's facts (bandwidth, peak rates) once."""

    OP: ClassVar[str] = "device_facts"


@dataclass(frozen=True)
class Sync(Request):
    """Wait for the device to be idle."""

    OP: ClassVar[str] = "sync"


@dataclass(frozen=True)
class Sanitize(Request):
    """A variant's correctness harnesses under compute-sanitizer, each tool's job ``run_timeout_s``."""

    OP: ClassVar[str] = "sanitize"
    source: str
    run_timeout_s: float = SANITIZE_RUN_S


@dataclass(frozen=True)
class SandboxInfo(Request):
    """What the sandbox could do on this machine (network isolation)."""

    OP: ClassVar[str] = "sandbox"


REQUESTS: dict[str, type[Request]] = {
    cls.OP: cls for cls in (Hello, Prepare, Evaluate, Retime, Paired, ProfileRun, DeviceFacts, Sync, Sanitize,
                            SandboxInfo)
}


def decode(op: Optional[str], body: Mapping[str, Any]) -> Request:
    """The typed request of a line's ``op`` and body (envelope keys already removed)."""
    cls = REQUESTS.get(op or "")
    if cls is None:
        raise ValueError(f"unknown worker op {op!r}")
    return cls.from_wire(body)

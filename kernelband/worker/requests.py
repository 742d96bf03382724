"""The session <-> judge channel: one frozen dataclass per judge op (``judge.OPS``), and
the judge's reply to each (``Reply`` or ``ErrorReply``).

The session (``evaluate.Evaluator``) builds a request and sends ``to_wire()``, a plain
JSON object; the judge decodes it once with ``decode`` (``from_wire``), which checks every
field's type and refuses an unknown or missing one with a one-line ``MalformedRequest``.
The judge's ops then read typed attributes, never ``req.get(...)``. A field's default is
what the judge assumed when the field was absent. A reply's ``result`` keeps its own typed
model (``model.Baseline``, ``Evaluation``, ``PairedTiming``, ``profile.schema.Profile``);
its envelope is built by the judge in one place (``worker/main.py``) and decoded once by
the session (``client.py``, ``decode_reply``): a reply that does not decode is a
``MalformedReply``, never a KeyError.

No torch here: the session imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Mapping, Optional, TypeVar, Union

from ..model import PAST_INT32, Task
from ..profile.schema import DeviceFacts
from .deadlines import SANITIZE_RUN_S
from ..decode import MalformedMessage, Message, decode_fields

# keys of the line's envelope (worker/main.py), not of the request's body
ENVELOPE = frozenset({"id", "op"})
# keys of a reply's envelope: the request's id, and which of the two replies it is
REPLY_ENVELOPE = frozenset({"id", "ok"})


class MalformedRequest(MalformedMessage):
    """A request whose body does not match its op's dataclass (one line, says which field)."""


class MalformedReply(MalformedMessage):
    """A judge reply the session cannot read (one line, says which field)."""


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
    facts: DeviceFacts = field(default_factory=DeviceFacts)


@dataclass(frozen=True)
class Evaluate(Request):
    """Judge one candidate. ``screen``: a search's candidate, which may end as Status.SLOWER
    after its timing; ``rounds``: paired timing rounds under the interpreter (None: the default)."""

    OP: ClassVar[str] = "evaluate"
    source: str
    variant_id: str = "variant"
    time: bool = True
    profile_tier: int = 0
    facts: DeviceFacts = field(default_factory=DeviceFacts)
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
    facts: DeviceFacts = field(default_factory=DeviceFacts)


@dataclass(frozen=True)
class MeasureDevice(Request):
    """Measure the device's facts (bandwidth, peak rates) once: a ``DeviceFacts``."""

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
class WideCalls(Request):
    """A variant on calls past int32 offsets (``judge_wide``): each recorded call grown until
    its largest tensor holds more than ``min_elements`` elements (``model.PAST_INT32``; a
    test passes a smaller one to run the same path on small calls)."""

    OP: ClassVar[str] = "wide"
    source: str
    min_elements: int = PAST_INT32


@dataclass(frozen=True)
class SandboxInfo(Request):
    """What the sandbox could do on this machine (network isolation)."""

    OP: ClassVar[str] = "sandbox"


@dataclass(frozen=True)
class Shutdown(Request):
    """End the judge: served by its request loop (``worker/main.py``), not by an op."""

    OP: ClassVar[str] = "shutdown"


REQUESTS: dict[str, type[Request]] = {
    cls.OP: cls
    for cls in (
        Hello,
        Prepare,
        Evaluate,
        Retime,
        Paired,
        ProfileRun,
        MeasureDevice,
        Sync,
        Sanitize,
        WideCalls,
        SandboxInfo,
    )
}


def decode(op: Optional[str], body: Mapping[str, Any]) -> Request:
    """The typed request of a line's ``op`` and body (envelope keys already removed)."""
    cls = REQUESTS.get(op or "")
    if cls is None:
        raise ValueError(f"unknown worker op {op!r}")
    return cls.from_wire(body)


# ---------------------------------------------------------------------- judge -> session
class ErrorKind(str, Enum):
    """Why a request produced no result. The judge answers ERROR or SETUP; the session
    itself finds CRASHED, TIMEOUT and PROTOCOL."""

    CRASHED = "crashed"  # the judge process died (or was not running)
    TIMEOUT = "timeout"  # no reply within the request's deadline (the judge is killed)
    PROTOCOL = "protocol"  # a reply that does not decode: the judge's fault, never a candidate's
    ERROR = "error"  # the op raised
    SETUP = "setup"  # the original cannot serve as a reference: every request would fail the same way

    def __str__(self) -> str:  # the wire's word, in messages and logs too
        return self.value


# the kinds a judge may answer with (the others are the session's own findings)
JUDGE_KINDS = (ErrorKind.ERROR, ErrorKind.SETUP)


@dataclass(frozen=True)
class Reply(Message):
    """The op's result (any JSON value) and the seconds the judge spent on the request."""

    result: object = None
    wall_s: float = 0.0


@dataclass(frozen=True)
class ErrorReply(Message):
    """The op failed: ``message`` says why (no exception class where ``kind`` already says
    it), ``trace`` is the judge's traceback."""

    kind: ErrorKind
    message: str
    trace: str = ""
    wall_s: float = 0.0


Answer = Union[Reply, ErrorReply]


def encode_reply(req_id: object, answer: Answer) -> dict[str, object]:
    """The reply line's JSON object: the request's id, ``ok``, and the answer's fields."""
    return {"id": req_id, "ok": isinstance(answer, Reply), **answer.to_wire()}


def decode_reply(line: Mapping[str, object]) -> Answer:
    """The answer of a reply line (its id already read), every field checked: MalformedReply
    for a missing or unknown field, a wrong type, or a kind the judge does not answer with."""
    ok = line.get("ok")
    if not isinstance(ok, bool):
        raise MalformedReply(f"malformed judge reply: ok must be true or false, got {ok!r:.40}")
    body = {k: v for k, v in line.items() if k not in REPLY_ENVELOPE}
    try:
        if ok:
            return decode_fields(Reply, body, "malformed judge reply")
        error = decode_fields(ErrorReply, body, "malformed judge reply")
    except MalformedMessage as e:
        raise MalformedReply(str(e)) from None
    if error.kind not in JUDGE_KINDS:
        kinds = " or ".join(repr(k.value) for k in JUDGE_KINDS)
        raise MalformedReply(f"malformed judge reply: kind must be {kinds}, got {error.kind.value!r}")
    return error

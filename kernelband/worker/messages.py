"""Every message between the judge, its variant processes and its fork server, one frozen
dataclass each: ``to_wire()`` is the JSON object sent, ``from_wire()`` checks every field's
type and refuses an unknown or missing field, op or kind with a one-line
``MalformedMessage``. Each side decodes what it receives once, where it receives it:
the variant process its ``Job`` and ``Command``s (``Step``s, one class per op, which it
dispatches on by class); the judge each frame's meta (``wire.read_frame``: one class per
kind, an outputs frame's by its mode), where the sender is untrusted: a meta that does
not decode ends the job (``jobs.JobEnd("malformed")``), a candidate's as a trust
refusal; the fork server its requests, the judge their replies. The session -> judge
requests (``requests.py``) follow the same rules. No torch here.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Mapping, Optional, TypeVar, Union

from ..model import LaunchRecord, Serializable, Task, Timing
from .call_spec import DerivedCall, MalformedCall, RecordedCall, Spec


class MalformedMessage(ValueError):
    """A message whose body does not match its dataclass (one line, says which field)."""


M = TypeVar("M", bound="Message")
OpT = TypeVar("OpT", bound="Op")


@dataclass(frozen=True)
class Message:
    """A message's fields; a default is what the receiver assumes when the field is absent."""

    def to_wire(self) -> dict[str, Any]:
        return {f.name: _wire(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_wire(cls: type[M], body: object) -> M:
        kind = getattr(cls, "KIND", "")  # a frame's meta: named by its kind
        return decode_fields(cls, body, f"malformed {kind} frame" if kind else f"malformed {cls.__name__}")


@dataclass(frozen=True)
class Op(Message):
    """A message named by its ``op``; ``from_wire`` of a family (``Step``, ``ZygoteRequest``)
    decodes whichever of its ops the body names."""

    OP: ClassVar[str] = ""
    FAMILY: ClassVar[str] = ""

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.OP, **super().to_wire()}

    @classmethod
    def from_wire(cls: type[OpT], body: object) -> OpT:
        if not isinstance(body, Mapping):
            raise MalformedMessage(f"malformed {cls.FAMILY}: must be an object, got {type(body).__name__}")
        known = {c.OP: c for c in cls.__subclasses__()} or {cls.OP: cls}
        op = body.get("op")
        target = known.get(op) if isinstance(op, str) else None
        if target is None:
            raise MalformedMessage(f"malformed {cls.FAMILY}: unknown op {op!r:.40} (known: {', '.join(known)})")
        return decode_fields(target, {k: v for k, v in body.items() if k != "op"}, f"malformed {op} {cls.FAMILY}")


# ---------------------------------------------------------------------- judge -> variant process
@dataclass(frozen=True)
class Step(Op):
    """A step of a variant job (``variant.Steps``); its frames follow in order."""

    FAMILY: ClassVar[str] = "step"


@dataclass(frozen=True)
class Run(Step):
    """Run ``harness`` of module ``module`` under ``seed``: a ``RunOutputs`` frame. mode: check,
    neutral (launches replaced by poison), upcast (check, and the launches rerun on float64
    copies); ``keep``: kept under that key for the steps below; ``again``: the re-check after
    timing; ``record``: wrappers whose calls to record; ``skip_over``: skipped when the
    harness's last run returned more bytes."""

    OP: ClassVar[str] = "run"
    module: str
    harness: str
    seed: int
    mode: Literal["check", "neutral", "upcast"] = "check"
    keep: Optional[str] = None
    again: bool = False
    record: list[str] = field(default_factory=list)
    skip_over: Optional[int] = None


@dataclass(frozen=True)
class ReplayCheck(Step):
    """Replay the kept run's launches once on restored or poisoned outputs: a ``ReplayOutputs``."""

    OP: ClassVar[str] = "replay_check"
    key: str


@dataclass(frozen=True)
class Time(Step):
    OP: ClassVar[str] = "time"
    key: str


@dataclass(frozen=True)
class Sample(Step):
    """One sample of the kept run (a round the judge drives, ``held_by_judge`` the GPU's timing turn)."""

    OP: ClassVar[str] = "sample"
    key: str
    held_by_judge: bool = False
    rep_ms: int = 25


@dataclass(frozen=True)
class Samples(Step):
    OP: ClassVar[str] = "samples"
    key: str
    rounds: int = 10


@dataclass(frozen=True)
class ProfileStep(Step):
    """Profile the kept run at ``tier``; ``time_ms`` its time (None: the job's own timing of it)."""

    OP: ClassVar[str] = "profile"
    key: str
    source: str
    tier: int = 1
    facts: dict[str, Any] = field(default_factory=dict)
    time_ms: Optional[float] = None


@dataclass(frozen=True)
class Derived(Step):
    """Calls beyond the harness (``derived_run.run_calls``), canary ``which``: a ``DerivedOutputs`` each."""

    OP: ClassVar[str] = "derived"
    calls: list[DerivedCall]
    module: str = "v"
    which: str = "a"


@dataclass(frozen=True)
class Release(Step):
    OP: ClassVar[str] = "release"
    key: str


@dataclass(frozen=True)
class Mark(Step):
    """The end of a batch: a ``MarkFrame`` (the judge reads frames up to it)."""

    OP: ClassVar[str] = "mark"


STEPS: dict[str, type[Step]] = {cls.OP: cls for cls in Step.__subclasses__()}


@dataclass(frozen=True)
class Job(Message):
    """A variant job, its stdin's first line. ``writes``: kernel -> the arguments the original's
    launches write (empty in the original's own job); ``interactive``: ``Command``s follow."""

    task: Task
    modules: dict[str, str]  # tag -> source
    steps: list[Step]
    interpreted: bool = False
    writes: dict[str, list[str]] = field(default_factory=dict)
    transport: str = "bytes"  # or "cuda_ipc" (the judge reads CUDA tensors in place)
    interactive: bool = False
    nonce: str = ""  # carried by every frame back


@dataclass(frozen=True)
class Command(Message):
    """More steps for an interactive job (a line on its stdin; an empty line is an ack)."""

    steps: list[Step]


# ---------------------------------------------------------------------- variant process -> judge
@dataclass(frozen=True)
class FrameMeta(Message):
    """A frame's meta, ``KIND`` its kind; ``seconds`` its step's, ``timeline`` the process's so far."""

    KIND: ClassVar[str] = ""
    seconds: float = field(default=0.0, kw_only=True)
    timeline: dict[str, Any] = field(default_factory=dict, kw_only=True)


@dataclass(frozen=True)
class RunOutputs(FrameMeta):
    """A ``Run``'s outputs; ``skipped`` (``Run.skip_over``, its last run's ``output_bytes``), or
    ``error``: a neutralised run whose harness noticed that nothing was computed."""

    KIND: ClassVar[str] = "outputs"
    harness: str
    seed: int
    mode: Literal["check", "neutral", "upcast"]
    launches: list[LaunchRecord] = field(default_factory=list)
    written: dict[str, list[str]] = field(default_factory=dict)  # kernel -> arguments its launches wrote
    changed_inputs: list[str] = field(default_factory=list)  # inputs changed outside any launch's outputs
    streams: list[int] = field(default_factory=list)
    upcast: dict[str, list[bool]] = field(default_factory=dict)  # "kernel.arg" -> which have a float64 result
    again: bool = False
    kept: bool = False
    cuda_peak: int = 0  # the most GPU memory the process's allocator reserved
    calls: list[RecordedCall] = field(default_factory=list)  # the wrapper's calls (Run.record)
    pre_state: list[str] = field(default_factory=list)  # labels of the tree's pre_state tensors
    skipped: bool = False
    output_bytes: int = 0
    error: Optional[str] = None


@dataclass(frozen=True)
class ReplayOutputs(FrameMeta):
    KIND: ClassVar[str] = "outputs"
    key: str
    launches: int
    restored: bool  # from the starting state the kept run's launches found (else poisoned outputs)
    mode: Literal["replay"] = "replay"


@dataclass(frozen=True)
class DerivedOutputs(FrameMeta):
    """A derived call's outputs, or its ``error``; ``allocs``: where each allocation sits in its buffer."""

    KIND: ClassVar[str] = "outputs"
    index: int
    which: str
    error: Optional[str] = None
    allocs: list[list[int]] = field(default_factory=list)
    mode: Literal["derived"] = "derived"


@dataclass(frozen=True)
class TimingFrame(FrameMeta):
    KIND: ClassVar[str] = "timing"
    key: str
    timing: Timing


@dataclass(frozen=True)
class SampleFrame(FrameMeta):
    KIND: ClassVar[str] = "sample"
    key: str
    ms: float
    clock: str


@dataclass(frozen=True)
class SamplesFrame(FrameMeta):
    KIND: ClassVar[str] = "samples"
    key: str
    ms: list[float]
    clock: str


@dataclass(frozen=True)
class ProfileFrame(FrameMeta):
    KIND: ClassVar[str] = "profile"
    profile: dict[str, Any]  # checked where it is read (``profile.schema.Profile.from_wire``)


@dataclass(frozen=True)
class MarkFrame(FrameMeta):
    KIND: ClassVar[str] = "mark"


@dataclass(frozen=True)
class ErrorFrame(FrameMeta):
    """A job's last frame after a failure: its ``phase`` (import, compile, assert, run,
    tampered, protocol...), the step it failed in (None: before any)."""

    KIND: ClassVar[str] = "error"
    phase: str
    message: str = ""
    step: Optional[str] = None
    harness: Optional[str] = None
    seed: Optional[int] = None
    mode: Optional[str] = None
    fatal: bool = False  # the CUDA context is broken


@dataclass(frozen=True)
class DoneFrame(FrameMeta):
    KIND: ClassVar[str] = "done"


_OUTPUTS: dict[str, type[FrameMeta]] = {"replay": ReplayOutputs, "derived": DerivedOutputs}
FRAMES: dict[str, type[FrameMeta]] = {cls.KIND: cls for cls in FrameMeta.__subclasses__() if cls.KIND != "outputs"}


def decode_frame(kind: str, meta: Mapping[str, Any]) -> FrameMeta:
    """The typed meta of a frame of ``kind`` (an outputs frame's class by its mode)."""
    mode = meta.get("mode")
    by_mode = _OUTPUTS.get(mode, RunOutputs) if isinstance(mode, str) else RunOutputs
    cls = by_mode if kind == "outputs" else FRAMES.get(kind)
    if cls is None:
        raise MalformedMessage(f"malformed frame: unknown kind {kind[:40]!r}")
    return cls.from_wire(meta)


# ---------------------------------------------------------------------- judge <-> fork server
@dataclass(frozen=True)
class ZygoteRequest(Op):
    FAMILY: ClassVar[str] = "fork server request"


@dataclass(frozen=True)
class Spawn(ZygoteRequest):
    """Fork a variant process in ``dir`` with ``env`` (its stdin, stdout, stderr pass as fds)."""

    OP: ClassVar[str] = "spawn"
    dir: str
    env: dict[str, str]


@dataclass(frozen=True)
class Reap(ZygoteRequest):
    OP: ClassVar[str] = "reap"
    pid: int


@dataclass(frozen=True)
class Kill(ZygoteRequest):
    """Kill a job: its process group, and every orphan that came back to the fork server."""

    OP: ClassVar[str] = "kill"
    pid: int


@dataclass(frozen=True)
class Ready(Message):
    ready: bool


@dataclass(frozen=True)
class Spawned(Message):
    pid: int


@dataclass(frozen=True)
class Reaped(Message):
    status: Optional[int] = None  # exit code, -signal, or None while it runs


@dataclass(frozen=True)
class Killed(Message):
    strays: int = 0


# ---------------------------------------------------------------------- validation
def _wire(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_wire()
    if isinstance(value, Serializable):
        return value.to_dict()
    return [_wire(v) for v in value] if isinstance(value, list) else value


D = TypeVar("D")


def decode_fields(cls: type[D], body: object, prefix: str, path: str = "") -> D:
    """``cls(**body)`` once every key is a field, every field without a default is there,
    and each value has its field's type (an int is accepted for a float). ``prefix`` starts
    each error; ``path`` is where ``body`` sits in the message (a nested Task)."""
    if not isinstance(body, Mapping):
        raise MalformedMessage(f"{prefix}: {path or 'the body'} must be an object, got {type(body).__name__}")
    fields, hints = _fields(cls)  # type: ignore[arg-type]
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise MalformedMessage(f"{prefix}: unknown field(s) {', '.join(map(repr, unknown))}"
                               f"{' in ' + path if path else ''} (known: {', '.join(fields) or 'none'})")
    values: dict[str, object] = {}
    for name, f in fields.items():
        where = f"{path}.{name}" if path else name
        if name not in body:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise MalformedMessage(f"{prefix}: missing required field {where!r}")
            continue
        values[name] = _checked(body[name], hints[name], prefix, where)
    return cls(**values)


@functools.cache
def _fields(cls: type) -> tuple[dict[str, dataclasses.Field[Any]], dict[str, Any]]:
    """A dataclass's fields by name and their types (resolved once: a frame holds a record per launch)."""
    return {f.name: f for f in dataclasses.fields(cls)}, typing.get_type_hints(cls)


def _checked(value: Any, tp: Any, prefix: str, where: str) -> Any:
    """``value`` as a ``tp`` (the field types messages, Task and the records in them use), or MalformedMessage."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):  # Optional[X], the only union the messages use
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1 and _is(value, inner[0]):
            return _checked(value, inner[0], prefix, where)
    elif origin is Literal:
        if isinstance(value, str) and value in args:
            return value
    elif origin is list:
        if isinstance(value, list):
            return [_checked(v, args[0], prefix, f"{where}[{i}]") for i, v in enumerate(value)]
    elif origin is dict:
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {k: _checked(v, args[1], prefix, f"{where}[{k!r}]") for k, v in value.items()}
    elif isinstance(tp, type) and issubclass(tp, Message):  # a step of a job: its own class by its op
        try:
            return tp.from_wire(value)
        except MalformedMessage as e:
            raise MalformedMessage(f"{prefix}: {where}: {e}") from None
    elif isinstance(tp, type) and issubclass(tp, Spec):  # a call of the wrapper: checked by its own rules
        try:
            return tp.from_dict(value, where)
        except MalformedCall as e:
            raise MalformedMessage(f"{prefix}: {e}") from None
    elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return decode_fields(tp, value, prefix, where)
    elif _is(value, tp):
        return float(value) if tp is float else value
    raise MalformedMessage(f"{prefix}: {where} must be {_type_name(tp)}, got {type(value).__name__} ({value!r:.40})")


def _is(value: Any, tp: Any) -> bool:
    """Whether ``value`` has the scalar type ``tp`` as JSON gives it (a bool is no number)."""
    if isinstance(value, bool):
        return tp is bool
    if tp is float:
        return isinstance(value, (int, float))
    return isinstance(tp, type) and isinstance(value, tp)


def _type_name(tp: Any) -> str:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    if typing.get_origin(tp) is Literal:
        return " or ".join(map(repr, args))
    if typing.get_origin(tp) is list:
        return f"a list of {_type_name(args[0])}"
    if typing.get_origin(tp) is dict:
        return "an object"
    return "an object" if dataclasses.is_dataclass(tp) else getattr(tp, "__name__", str(tp))

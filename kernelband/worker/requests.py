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

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Optional, TypeVar, Union

from ..model import Serializable, Task
from .deadlines import SANITIZE_RUN_S

# keys of the line's envelope (worker/main.py), not of the request's body
ENVELOPE = frozenset({"id", "op"})


class MalformedRequest(ValueError):
    """A request whose body does not match its op's dataclass (one line, says which field)."""


R = TypeVar("R", bound="Request")


@dataclass(frozen=True)
class Request:
    """A request's body; ``OP`` is the judge op that serves it."""

    OP: ClassVar[str] = ""

    def to_wire(self) -> dict[str, object]:
        """The body as sent: every field, a Task as its dict (the shape the judge reads)."""
        return {f.name: _wire(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_wire(cls: type[R], body: object) -> R:
        """The request ``body`` describes, its fields' types checked; MalformedRequest if not."""
        return _decode_dataclass(cls, body, f"malformed {cls.OP} request")


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


# ---------------------------------------------------------------------- validation
def _wire(value: Any) -> Any:
    return value.to_dict() if isinstance(value, Serializable) else value


D = TypeVar("D")


def _decode_dataclass(cls: type[D], body: object, prefix: str, path: str = "") -> D:
    """``cls(**body)`` once every key is a field, every field without a default is there,
    and each value has its field's type (an int is accepted for a float). ``prefix`` starts
    each error; ``path`` is where ``body`` sits in the request (a nested Task)."""
    if not isinstance(body, Mapping):
        raise MalformedRequest(f"{prefix}: {path or 'the body'} must be an object, got {type(body).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise MalformedRequest(f"{prefix}: unknown field(s) {', '.join(map(repr, unknown))}"
                               f"{' in ' + path if path else ''} (known: {', '.join(fields) or 'none'})")
    hints = typing.get_type_hints(cls)
    values: dict[str, object] = {}
    for name, f in fields.items():
        where = f"{path}.{name}" if path else name
        if name not in body:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise MalformedRequest(f"{prefix}: missing required field {where!r}")
            continue
        values[name] = _checked(body[name], hints[name], prefix, where)
    return cls(**values)


def _checked(value: Any, tp: Any, prefix: str, where: str) -> Any:
    """``value`` as a ``tp`` (the field types requests and Task use), or MalformedRequest."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):  # Optional[X], the only union the requests use
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1 and _is(value, inner[0]):
            return _checked(value, inner[0], prefix, where)
    elif origin is list:
        if isinstance(value, list):
            return [_checked(v, args[0], prefix, f"{where}[{i}]") for i, v in enumerate(value)]
    elif origin is dict:
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {k: _checked(v, args[1], prefix, f"{where}[{k!r}]") for k, v in value.items()}
    elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _decode_dataclass(tp, value, prefix, where)
    elif _is(value, tp):
        return float(value) if tp is float else value
    raise MalformedRequest(f"{prefix}: {where} must be {_type_name(tp)}, got {type(value).__name__} ({value!r:.40})")


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
    if typing.get_origin(tp) is list:
        return f"a list of {_type_name(args[0])}"
    if typing.get_origin(tp) is dict:
        return "an object"
    return "an object" if dataclasses.is_dataclass(tp) else getattr(tp, "__name__", str(tp))

"""The one checking decoder of what crosses a process boundary: ``decode_fields`` makes a
dataclass from a JSON object by its fields' type hints, checking every key and value, and
raises a one-line ``MalformedMessage`` naming the field that is wrong. ``Message`` is a
whole message (``worker/messages``, ``worker/requests``); ``Tagged`` a class that names itself on the
wire, so that a union of them (a call's ``Arg``) decodes as the class its tag names. No
torch here.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Literal, Mapping, TypeGuard, TypeVar, Union

from .json_types import JsonObject

TAG_KEY = "t"  # where a Tagged class's tag sits in its wire form


class MalformedMessage(ValueError):
    """A message whose body does not match its dataclass (one line, says which field)."""


class Tagged:
    """A dataclass whose wire form carries its ``TAG`` under ``TAG_KEY``: a field whose type
    is a union of them takes the class the tag names, and no other tag is accepted."""

    TAG: ClassVar[str] = ""


M = TypeVar("M", bound="Message")
D = TypeVar("D")


@dataclass(frozen=True)
class Message:
    """A message's fields; a default is what the receiver assumes when the field is absent."""

    def to_wire(self) -> JsonObject:
        return {f.name: _wire(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_wire(cls: type[M], body: object) -> M:
        kind = getattr(cls, "KIND", "")  # a frame's meta: named by its kind
        return decode_fields(cls, body, f"malformed {kind} frame" if kind else f"malformed {cls.__name__}")


def _wire(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_wire()
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):  # a model's own wire form; this module imports no model, as model.py decodes with it
        return to_dict()
    if isinstance(value, Enum):
        return value.value
    return [_wire(v) for v in value] if isinstance(value, list) else value


def decode_fields(cls: type[D], body: object, prefix: str, path: str = "") -> D:
    """``cls(**body)`` once every key is a field (or a Tagged class's own tag), every field
    without a default is there, and each value has its field's type (an int is accepted for
    a float). ``prefix`` starts each error; ``path`` is where ``body`` sits in the message."""
    if not isinstance(body, Mapping):
        raise MalformedMessage(f"{prefix}: {path or 'the body'} must be an object, got {type(body).__name__}")
    fields, hints = _fields(cls)  # type: ignore[arg-type]
    if issubclass(cls, Tagged):
        tag, body = body.get(TAG_KEY), {k: v for k, v in body.items() if k != TAG_KEY}
        if tag != cls.TAG:
            where = f"{path}.{TAG_KEY}" if path else TAG_KEY
            raise MalformedMessage(f"{prefix}: {where} must be {cls.TAG!r}, got {tag!r:.40}")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise MalformedMessage(
            f"{prefix}: unknown field(s) {', '.join(map(repr, unknown))}"
            f"{' in ' + path if path else ''} (known: {', '.join(fields) or 'none'})"
        )
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
    """``value`` as a ``tp`` (the field types of the messages and what they hold), or MalformedMessage."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):  # Optional[X], a union of scalars, or of Tagged classes
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if any(map(_tagged, inner)):  # the class the tag names
            tag = value.get(TAG_KEY) if isinstance(value, Mapping) else None
            target = next((a for a in inner if a.TAG == tag), None)
            if target is not None:
                return decode_fields(target, value, prefix, where)
        elif len(inner) == 1 and inner[0] not in (bool, int, float, str):
            return _checked(value, inner[0], prefix, where)  # Optional[a list, tuple, class]: its own message
        else:  # an int stays an int where int is one of the types
            match = type(value) if type(value) in inner else next((a for a in inner if _is(value, a)), None)
            if match is not None:
                return _checked(value, match, prefix, where)
    elif origin is Literal:
        if isinstance(value, str) and value in args:
            return value
    elif isinstance(tp, type) and issubclass(tp, Enum):  # JSON has its value, of the value's own type
        member = next((m for m in tp if type(value) is type(m.value) and value == m.value), None)
        if member is not None:
            return member
    elif origin is list:
        if isinstance(value, list):
            return [_checked(v, args[0], prefix, f"{where}[{i}]") for i, v in enumerate(value)]
    elif origin is tuple:  # a JSON list: tuple[X, ...] of any length, tuple[X, Y] of exactly that many
        if isinstance(value, list) and (args[-1] is Ellipsis or len(value) == len(args)):
            items = [args[0]] * len(value) if args[-1] is Ellipsis else args
            return tuple(_checked(v, a, prefix, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, items)))
    elif origin is dict:
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {k: _checked(v, args[1], prefix, f"{where}[{k!r}]") for k, v in value.items()}
    elif isinstance(tp, type) and issubclass(tp, Message):  # a step of a job: its own class by its op
        try:
            return tp.from_wire(value)
        except MalformedMessage as e:
            raise MalformedMessage(f"{prefix}: {where}: {e}") from None
    elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return decode_fields(tp, value, prefix, where)
    elif _is(value, tp):
        return float(value) if tp is float else value
    raise MalformedMessage(f"{prefix}: {where} must be {_type_name(tp)}, got {type(value).__name__} ({value!r:.40})")


def _tagged(tp: object) -> TypeGuard[type[Tagged]]:
    return isinstance(tp, type) and issubclass(tp, Tagged)


def _is(value: Any, tp: Any) -> bool:
    """Whether ``value`` has the scalar type ``tp`` as JSON gives it (a bool is no number)."""
    if isinstance(value, bool):
        return tp is bool
    if tp is float:
        return isinstance(value, (int, float))
    return isinstance(tp, type) and isinstance(value, tp)


def _type_name(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        tags = " or ".join(repr(a.TAG) for a in args if _tagged(a))
        names = [f"an object whose {TAG_KEY} is {tags}"] if tags else []
        return " or ".join(names + ["null" if a is type(None) else _type_name(a) for a in args if not _tagged(a)])
    if origin is Literal:
        return " or ".join(map(repr, args))
    if isinstance(tp, type) and issubclass(tp, Enum):
        return " or ".join(repr(m.value) for m in tp)
    if origin is list or (origin is tuple and args[-1] is Ellipsis):
        return f"a list of {_type_name(args[0])}"
    if origin is tuple:
        return f"a list [{', '.join(map(_type_name, args))}]"
    if origin is dict:
        return "an object"
    return "an object" if dataclasses.is_dataclass(tp) else getattr(tp, "__name__", str(tp))

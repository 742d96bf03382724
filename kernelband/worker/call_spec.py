"""A call of a kernel's wrapper as typed data: its arguments (``TensorArg``, ``ValueArg``),
a call the harness made (``RecordedCall``, ``derived.record_calls``) and one the judge
derives from it (``DerivedCall``, ``derived.derive``). Frozen: a changed call is a new
one (``dataclasses.replace``).

``to_dict``/``from_dict`` are their wire form, used only where a call crosses the process
channel (``messages``: the recorded calls come back in a run's frame, the derived ones go
out in a ``Derived`` step). ``from_dict`` checks every key and value and raises
``MalformedCall`` naming the one that is wrong; an optional key is absent on the wire
where its value is None.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Optional, TypeVar, Union

from ..model import Serializable


class MalformedCall(ValueError):
    """A call's wire form that does not match its class (one line, says which key)."""


Scalar = Union[None, bool, int, float, str]
S = TypeVar("S", bound="Spec")


@dataclass(frozen=True)
class Spec(Serializable):
    """The wire form shared by the call specs: every field by its name, an optional one
    (default None) left out while None unless named in ``ALWAYS``."""

    TAG: ClassVar[str] = ""  # the "t" key an argument carries
    ALWAYS: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": self.TAG} if self.TAG else {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.default is None and f.name not in self.ALWAYS:
                continue
            out[f.name] = _plain(value)
        return out

    @classmethod
    def from_dict(cls: type[S], body: object, where: str = "call") -> S:
        if not isinstance(body, Mapping):
            raise MalformedCall(f"{where} must be an object, got {type(body).__name__}")
        names = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(body) - set(names) - ({"t"} if cls.TAG else set()))
        if unknown:
            raise MalformedCall(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
        values: dict[str, Any] = {}
        for name, f in names.items():
            optional = f.default is None
            if name not in body:
                if f.default is dataclasses.MISSING:
                    raise MalformedCall(f"{where}: missing key {name!r}")
                continue
            if body[name] is None and optional:
                continue
            values[name] = _DECODERS[name](body[name], f"{where}.{name}")
        return cls(**values)


def _plain(value: Any) -> Any:
    if isinstance(value, Spec):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class TensorArg(Spec):
    """A tensor argument: what the recording saw, and in a derived call where and how the
    variant process makes it (``derived_run.place``)."""

    TAG: ClassVar[str] = "tensor"
    shape: tuple[int, ...]
    dtype: str
    device: str
    contiguous: bool
    id: int  # the tensor's identity within its call: one tensor passed twice is one
    floating: bool
    # an integer tensor's recorded facts (``derived.with_index_facts``); a derived one keeps
    # distinct and sorted where true
    max: Optional[int] = None
    distinct: Optional[bool] = None
    sorted: Optional[bool] = None
    # a derived tensor's: canaries before and after it, its strides, its values
    pad: Optional[tuple[int, int]] = None
    layout: Optional[str] = None  # strided, transposed, spread
    values: Optional[str] = None  # special, offset, scaled, centred, integral
    round_to: Optional[str] = None  # a float32 twin's values rounded to this dtype
    index_high: Optional[int] = None  # integer values stay below it
    wide: Optional[bool] = None  # integer values past int16's range too


@dataclass(frozen=True)
class ValueArg(Spec):
    """A plain argument (None, a bool, a number, a string), passed as it is."""

    TAG: ClassVar[str] = "value"
    v: Scalar


Arg = Union[TensorArg, ValueArg]


@dataclass(frozen=True)
class Call(Spec):
    fn: str  # the wrapper's name in the module
    args: tuple[Arg, ...]
    kwargs: dict[str, Arg]

    def arguments(self) -> list[Arg]:
        return [*self.args, *self.kwargs.values()]

    def tensors(self) -> list[TensorArg]:
        """Every tensor argument in order (one passed twice: twice)."""
        return [a for a in self.arguments() if isinstance(a, TensorArg)]


@dataclass(frozen=True)
class RecordedCall(Call):
    """A call the harness made; ``returns``: what it returned (an out= buffer of a derived
    call takes its shape), None where it is no tensor or value."""

    ALWAYS: ClassVar[tuple[str, ...]] = ("returns",)
    returns: Optional[Arg] = None


@dataclass(frozen=True)
class DerivedCall(Call):
    """A call the judge derives (``derived.derive``): its ``flavour``, the ``seed`` its
    values are drawn from, each recorded size's new one (``sizes``, keys as strings: the
    wire's), and what some flavours add."""

    ALWAYS: ClassVar[tuple[str, ...]] = ("split_shape",)
    flavour: str
    seed: int
    sizes: dict[str, int]
    split_shape: Optional[tuple[int, ...]] = None  # rank: the shape whose first dimension is split
    split: Optional[int] = None  # rank: into this many
    scale: Optional[float] = None  # scaled and centred values' factor
    fresh_fill: Optional[str] = None  # "zero": memory the call's code allocates is zeroed
    repeats: Optional[int] = None  # repeat: made this many times in a row
    twin: Optional[int] = None  # alias and high: the index of the call it is judged beside
    alias_arg: Optional[str] = None  # alias: the output parameter passed an input


# ---------------------------------------------------------------------- decoding
def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedCall(f"{where} must be int, got {type(value).__name__} ({value!r:.40})")
    return value


def _of(tp: type, name: str) -> Callable[[object, str], Any]:
    def check(value: object, where: str) -> Any:
        if not isinstance(value, tp) or (tp is not bool and isinstance(value, bool)):
            raise MalformedCall(f"{where} must be {name}, got {type(value).__name__} ({value!r:.40})")
        return value

    return check


def _float(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MalformedCall(f"{where} must be a number, got {type(value).__name__} ({value!r:.40})")
    return float(value)


def _ints(value: object, where: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise MalformedCall(f"{where} must be a list of int, got {type(value).__name__}")
    return tuple(_int(v, f"{where}[{i}]") for i, v in enumerate(value))


def _pair(value: object, where: str) -> tuple[int, int]:
    got = _ints(value, where)
    if len(got) != 2:
        raise MalformedCall(f"{where} must be two ints, got {len(got)}")
    return got[0], got[1]


def _scalar(value: object, where: str) -> Scalar:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise MalformedCall(f"{where} must be null, a bool, a number or a string, got {type(value).__name__}")


def _arg(value: object, where: str) -> Arg:
    tag = value.get("t") if isinstance(value, Mapping) else None
    if tag == TensorArg.TAG:
        return TensorArg.from_dict(value, where)
    if tag == ValueArg.TAG:
        return ValueArg.from_dict(value, where)
    raise MalformedCall(f"{where} must be an object whose t is 'tensor' or 'value', got {value!r:.40}")


def _optional_arg(value: object, where: str) -> Optional[Arg]:
    return None if value is None else _arg(value, where)


def _args(value: object, where: str) -> tuple[Arg, ...]:
    if not isinstance(value, list):
        raise MalformedCall(f"{where} must be a list, got {type(value).__name__}")
    return tuple(_arg(v, f"{where}[{i}]") for i, v in enumerate(value))


def _named(item: Callable[[object, str], Any]) -> Callable[[object, str], dict[str, Any]]:
    def check(value: object, where: str) -> dict[str, Any]:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise MalformedCall(f"{where} must be an object, got {type(value).__name__}")
        return {k: item(v, f"{where}[{k!r}]") for k, v in value.items()}

    return check


_str, _bool = _of(str, "a string"), _of(bool, "bool")
# each key's check, by name: a name means one thing in every spec
_DECODERS: dict[str, Callable[[object, str], Any]] = {
    "shape": _ints, "dtype": _str, "device": _str, "contiguous": _bool, "id": _int, "floating": _bool,
    "max": _int, "distinct": _bool, "sorted": _bool, "pad": _pair, "layout": _str, "values": _str,
    "round_to": _str, "index_high": _int, "wide": _bool, "v": _scalar,
    "fn": _str, "args": _args, "kwargs": _named(_arg), "returns": _optional_arg,
    "flavour": _str, "seed": _int, "sizes": _named(_int), "split_shape": _ints, "split": _int, "scale": _float,
    "fresh_fill": _str, "repeats": _int, "twin": _int, "alias_arg": _str,
}

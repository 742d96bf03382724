"""A call of a kernel's wrapper as typed data: its arguments (``TensorArg``, ``ValueArg``),
a call the harness made (``RecordedCall``, ``derived.record_calls``) and one the judge
derives from it (``DerivedCall``, ``derived.derive``). Frozen: a changed call is a new
one (``dataclasses.replace``).

``to_dict``/``from_dict`` are their wire form, used only where a call crosses the process
channel (``messages``: the recorded calls come back in a run's frame, the derived ones go
out in a ``Derived`` step). ``from_dict`` is the messages' decoder (``decode.decode_fields``):
it checks every key and value by the fields' types and raises ``MalformedMessage`` naming
the one that is wrong; an argument carries its class's tag (``"t"``: tensor or value); an
optional key is absent on the wire where its value is None.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Optional, TypeVar, Union

from ..model import Serializable
from ..decode import TAG_KEY, Tagged, decode_fields

Scalar = Union[None, bool, int, float, str]
S = TypeVar("S", bound="Spec")


@dataclass(frozen=True)
class Spec(Serializable):
    """The wire form shared by the call specs: every field by its name, an optional one
    (default None) left out while None unless named in ``ALWAYS``."""

    ALWAYS: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {TAG_KEY: self.TAG} if isinstance(self, Tagged) else {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.default is None and f.name not in self.ALWAYS:
                continue
            out[f.name] = _plain(value)
        return out

    @classmethod
    def from_dict(cls: type[S], body: object) -> S:
        return decode_fields(cls, body, f"malformed {cls.__name__}")


def _plain(value: Any) -> Any:
    if isinstance(value, Spec):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class TensorArg(Spec, Tagged):
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
class ValueArg(Spec, Tagged):
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

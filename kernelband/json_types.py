"""The types of JSON as it crosses a boundary (a wire message, a stored result, an LSP
payload, a printed ``--json``): what ``json.dumps`` writes and ``json.loads`` gives back.
A record's ``to_dict()`` returns a ``JsonObject``; a value read from one is a ``JsonValue``
its reader narrows (``isinstance``) before use. Only typing here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ForwardRef, TypeAlias, Union

if TYPE_CHECKING:
    JsonValue: TypeAlias = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]
else:  # the same, its self-reference bound to this module: typing.get_type_hints resolves a
    # dataclass field of these types in any module (decode.py's checks do not take them)
    _SELF = ForwardRef("JsonValue", module=__name__)
    JsonValue = Union[None, bool, int, float, str, list[_SELF], dict[str, _SELF]]
JsonObject: TypeAlias = dict[str, JsonValue]

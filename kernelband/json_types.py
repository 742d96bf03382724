"""The types of JSON as it crosses a boundary (a wire message, a stored result, an LSP
payload, a printed ``--json``): what ``json.dumps`` writes and ``json.loads`` gives back.
A record's ``to_dict()`` returns a ``JsonObject``; a value read from one is a ``JsonValue``
its reader narrows (``isinstance``) before use. Only typing here.
"""
from __future__ import annotations

from typing import TypeAlias, Union

JsonValue: TypeAlias = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]
JsonObject: TypeAlias = dict[str, JsonValue]

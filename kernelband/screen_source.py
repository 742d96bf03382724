"""The text a variant is screened as is the text it is executed as.

The importer does not execute a string: it reads the file's bytes and decodes them as
the PEP 263 coding cookie says (``# -*- coding: utf-7 -*-`` on line 1 or 2), so a
cookie can turn what the screen read as a comment into code (UTF-7's ``+AAo-`` and
unicode_escape's ``\\n`` are newlines). ``canonical_source`` therefore accepts only
UTF-8 source, gives back the exact text to write to disk (UTF-8, no BOM, ``\\n`` line
ends) and checks that the importer's decoding of those bytes gives that text back.
"""

from __future__ import annotations

import ast
import codecs
import importlib.util
import io
import tokenize
from dataclasses import dataclass
from typing import Union

__all__ = ["SourceRefused", "canonical_source"]

_BOM = "\ufeff"


@dataclass(frozen=True)
class SourceRefused:
    """Why a source text cannot be executed as screened (one line)."""

    reason: str


def canonical_source(text: Union[str, bytes]) -> Union[str, SourceRefused]:
    """The text to screen and to write (``encoding="utf-8"``) for the worker to import,
    or why there is none: a non-UTF-8 coding cookie, bytes that are not UTF-8, a NUL, a
    lone surrogate. Line ends become ``\\n`` and a leading BOM is dropped (the importer
    does both; doing it first leaves nothing to differ)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            return SourceRefused(f"source is not UTF-8 (byte {e.start}): only UTF-8 source is accepted")
    if not isinstance(text, str):
        return SourceRefused(f"source must be text, not {type(text).__name__}")
    if "\x00" in text:
        return SourceRefused("source contains a NUL character")
    body = text[1:] if text.startswith(_BOM) else text
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    try:
        data = body.encode("utf-8")
    except UnicodeEncodeError as e:
        return SourceRefused(f"source has a character UTF-8 cannot encode at offset {e.start} (a lone surrogate)")
    try:
        declared, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        return SourceRefused(f"coding cookie refused: {e.msg if hasattr(e, 'msg') else e}")
    try:
        codec = codecs.lookup(declared).name
    except LookupError:
        return SourceRefused(f"coding cookie names an unknown encoding {declared!r}")
    if codec != "utf-8":
        return SourceRefused(
            f"coding cookie {declared!r}: only UTF-8 source is accepted (the importer would decode "
            "the file differently from the text that was screened)"
        )
    if importlib.util.decode_source(data) != body:
        return SourceRefused("the importer would decode this source differently from its text")
    try:
        same = ast.dump(ast.parse(body)) == ast.dump(compile(data, "<variant>", "exec", ast.PyCF_ONLY_AST))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return body  # a parse failure is reported by the screen with its line
    if not same:
        return SourceRefused("the source parses differently from its bytes")
    return body

"""Conversions between Python's source coordinates and LSP positions.

Python's ``ast`` gives 1-based lines and 0-based columns counted in UTF-8 bytes; LSP
wants 0-based lines and columns in the negotiated encoding (UTF-16 unless the client
says otherwise). Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` only, as in the editor (not
at the other separators ``str.splitlines`` knows, such as form feed).
"""

from __future__ import annotations

import bisect
import re
from typing import Optional

from lsprotocol import types

_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")

UTF8 = "utf-8"
UTF16 = "utf-16"
UTF32 = "utf-32"


def split_lines(text: str) -> list[str]:
    """Lines with their endings; a final empty line after a trailing newline is not listed."""
    return _LINE_RE.findall(text)


def _units(s: str, encoding: str) -> int:
    if s.isascii():
        return len(s)
    if encoding == UTF8:
        return len(s.encode("utf-8"))
    if encoding == UTF32:
        return len(s)
    return len(s.encode("utf-16-le")) // 2


def _chars_for_units(s: str, units: int, encoding: str) -> int:
    """How many characters of s make up `units` code units (clamped)."""
    if s.isascii() or encoding == UTF32:
        return min(units, len(s))
    n = 0
    for i, ch in enumerate(s):
        if n >= units:
            return i
        if encoding == UTF8:
            n += len(ch.encode("utf-8"))
        else:
            n += 2 if ord(ch) > 0xFFFF else 1
    return len(s)


def _byte_prefix(line: str, col_bytes: int) -> str:
    """The characters of a line before a UTF-8 byte column (ast's columns)."""
    if line.isascii():
        return line[: max(col_bytes, 0)]
    return line.encode("utf-8")[: max(col_bytes, 0)].decode("utf-8", errors="ignore")


def _strip_eol(line: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith(("\n", "\r")):
        return line[:-1]
    return line


class LineIndex:
    """Line table of one text: offsets <-> LSP positions <-> ast coordinates."""

    def __init__(self, text: str, encoding: str = UTF16) -> None:
        self.text = text
        self.encoding = str(encoding or UTF16)
        self.lines = split_lines(text)
        self.starts: list[int] = []
        pos = 0
        for line in self.lines:
            self.starts.append(pos)
            pos += len(line)
        self.ends_with_newline = text.endswith(("\n", "\r"))

    @property
    def line_count(self) -> int:
        """Number of lines an editor shows (a trailing newline opens one more)."""
        return len(self.lines) + (1 if self.ends_with_newline or not self.lines else 0)

    def line_text(self, line0: int) -> str:
        if 0 <= line0 < len(self.lines):
            return _strip_eol(self.lines[line0])
        return ""

    # ------------------------------------------------------------------ offsets
    def offset_to_position(self, offset: int) -> types.Position:
        offset = max(0, min(offset, len(self.text)))
        if not self.lines:
            return types.Position(line=0, character=0)
        i = bisect.bisect_right(self.starts, offset) - 1
        col_chars = offset - self.starts[i]
        line = self.lines[i]
        if col_chars >= len(line) and line.endswith(("\n", "\r")):
            # just past this line's ending: the start of the next line
            return types.Position(line=i + 1, character=0)
        return types.Position(line=i, character=_units(line[:col_chars], self.encoding))

    def position_to_offset(self, pos: types.Position) -> int:
        if pos.line < 0:
            return 0
        if pos.line >= len(self.lines):
            return len(self.text)
        line = _strip_eol(self.lines[pos.line])
        return self.starts[pos.line] + _chars_for_units(line, max(pos.character, 0), self.encoding)

    # ------------------------------------------------------------------ ast coordinates
    def ast_to_position(self, line1: int, col_bytes: int) -> types.Position:
        """(1-based line, UTF-8 byte column) -> LSP position, clamped to the text."""
        line0 = line1 - 1
        if line0 < 0:
            return types.Position(line=0, character=0)
        if line0 >= len(self.lines):
            last = max(len(self.lines) - 1, 0)
            if self.ends_with_newline or not self.lines:
                return types.Position(line=len(self.lines), character=0)
            return types.Position(line=last, character=_units(self.line_text(last), self.encoding))
        prefix = _byte_prefix(self.line_text(line0), col_bytes)
        return types.Position(line=line0, character=_units(prefix, self.encoding))

    def ast_to_offset(self, line1: int, col_bytes: int) -> int:
        line0 = line1 - 1
        if line0 < 0:
            return 0
        if line0 >= len(self.lines):
            return len(self.text)
        return self.starts[line0] + len(_byte_prefix(self.line_text(line0), col_bytes))

    def ast_range(self, start_line: int, start_col: int, end_line: int, end_col: int) -> types.Range:
        return types.Range(
            start=self.ast_to_position(start_line, start_col), end=self.ast_to_position(end_line, end_col)
        )

    def segment(self, start_line: int, start_col: int, end_line: int, end_col: int) -> str:
        return self.text[self.ast_to_offset(start_line, start_col) : self.ast_to_offset(end_line, end_col)]

    def word_at(self, pos: types.Position) -> Optional[tuple[str, int, int]]:
        """The identifier under a position: (word, start offset, end offset)."""
        if not (0 <= pos.line < len(self.lines)):
            return None
        text = _strip_eol(self.lines[pos.line])
        c = _chars_for_units(text, pos.character, self.encoding)
        s = c
        while s > 0 and (text[s - 1].isalnum() or text[s - 1] == "_"):
            s -= 1
        e = c
        while e < len(text) and (text[e].isalnum() or text[e] == "_"):
            e += 1
        if s == e:
            return None
        base = self.starts[pos.line]
        return text[s:e], base + s, base + e


def clamp_range(r: types.Range, index: LineIndex) -> types.Range:
    """Keep a range (possibly from an older text) inside the current text."""
    last = max(index.line_count - 1, 0)

    def clamp(p: types.Position) -> types.Position:
        if p.line > last:
            return types.Position(line=last, character=0)
        return p

    return types.Range(start=clamp(r.start), end=clamp(r.end))

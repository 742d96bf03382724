"""Base-protocol framing (``Content-Length`` headers) that survives a bad frame.

pygls' reader trusts every header: a wrong or non-numeric Content-Length glues the next
header onto a body and the server stays alive but deaf; a huge one (2^40) makes it
allocate and die. This reader keeps its own buffer and re-synchronises on the next
``Content-Length:`` header, refuses lengths over ``MAX_BODY`` and, when a declared
length runs past what arrived, accepts a body that is complete JSON on its own once
the next header shows up or the input pauses.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

log = logging.getLogger("kernelband_lsp")

MAX_BODY = 64 * 1024 * 1024  # far above any LSP message the server meets; refuses 2^40
MAX_HEADER = 64 * 1024
HEADER_END = b"\r\n\r\n"
CL = b"content-length:"
_LENGTH = re.compile(rb"content-length:[ \t]*([^\r\n]*)", re.IGNORECASE)


@dataclass
class Frame:
    body: Optional[bytes] = None  # a message body to parse
    error: Optional[str] = None  # a frame that was dropped, and why


def _parses(b: bytes) -> bool:
    try:
        json.loads(b)
        return True
    except ValueError:
        return False


class FrameBuffer:
    """Feed bytes in, take frames out; pure (no I/O), so it is unit-testable."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> None:
        self.buf += data

    def _next_header(self, start: int) -> int:
        """Offset of the next ``Content-Length:`` at or after start, or -1."""
        return bytes(self.buf).lower().find(CL, start)

    def take(self, paused: bool = False) -> Optional[Frame]:
        """The next frame, or None when more bytes are needed. ``paused``: no more bytes
        came for a while (a too-large length on the last message sent)."""
        buf = self.buf
        end = buf.find(HEADER_END)
        if end < 0:
            if len(buf) > MAX_HEADER:
                keep = self._next_header(1)
                dropped = len(buf) if keep < 0 else keep
                del buf[:dropped]
                return Frame(error=f"dropped {dropped} bytes with no header end")
            return None
        header = bytes(buf[:end])
        # garbage before the header (the tail of a body whose length was too small)
        start = header.lower().rfind(CL)
        if start < 0:
            del buf[: end + 4]
            return Frame(error=f"a header without Content-Length: {header[:80]!r}")
        m = _LENGTH.match(header, start)
        raw = m.group(1).strip() if m else b""
        body_at = end + 4
        if not raw.isdigit():
            del buf[:body_at]
            return Frame(error=f"a non-numeric Content-Length: {raw[:40]!r}")
        n = int(raw)
        if n > MAX_BODY:
            del buf[:body_at]
            return Frame(error=f"a Content-Length of {n} bytes (over {MAX_BODY})")
        if start > 0:
            log.warning("framing: skipped %d bytes before a header", start)
        if len(buf) >= body_at + n:
            body = bytes(buf[body_at : body_at + n])
            if _parses(body):
                del buf[: body_at + n]
                return Frame(body=body)
            # the length was wrong: the message ends where the next header starts
            nxt = self._next_header(body_at)
            if nxt >= 0 and _parses(bytes(buf[body_at:nxt])):
                body = bytes(buf[body_at:nxt])
                del buf[:nxt]
                return Frame(body=body, error=f"Content-Length {n} was wrong (the body is {len(body)} bytes)")
            cut = nxt if nxt >= 0 else body_at + n
            del buf[:cut]
            return Frame(error=f"a body that is not JSON ({n} bytes declared)")
        # not all bytes yet: either more are coming, or the length is too large
        nxt = self._next_header(body_at)
        if nxt >= 0 and _parses(bytes(buf[body_at:nxt])):
            body = bytes(buf[body_at:nxt])
            del buf[:nxt]
            return Frame(body=body, error=f"Content-Length {n} was too large (the body is {len(body)} bytes)")
        if paused and len(buf) > body_at and _parses(bytes(buf[body_at:])):
            body = bytes(buf[body_at:])
            del buf[:]
            return Frame(body=body, error=f"Content-Length {n} was too large (the body is {len(body)} bytes)")
        return None


PAUSE_S = 0.5  # input quiet this long with a short body pending: the length was too large


async def serve(fd: int, handle: Callable[[bytes], None], stopped: Callable[[], bool], executor: Any = None) -> None:
    """Read frames from fd until EOF, handing each body to ``handle``."""
    loop = asyncio.get_running_loop()
    frames = FrameBuffer()
    pending: Optional[asyncio.Future] = None
    paused = False
    while not stopped():
        frame = frames.take(paused)
        if frame is not None:
            if frame.error:
                log.warning("framing: %s", frame.error)
            if frame.body is not None:
                handle(frame.body)
            paused = False
            continue
        if pending is None:
            pending = loop.run_in_executor(executor, os.read, fd, 1 << 16)
        # a body is waiting for bytes: notice when the input pauses
        wait = PAUSE_S if frames.buf.find(HEADER_END) >= 0 else None
        done, _ = await asyncio.wait({pending}, timeout=wait)
        if not done:
            paused = True
            continue
        data = pending.result()
        pending = None
        if not data:
            break
        frames.feed(data)
        paused = False

"""A wall-clock trace of a session's processes, for finding where the seconds before a
verdict go: with ``KERNELBAND_TRACE=FILE`` the trusted processes (the session, the judge
and its fork-server handle) append one JSON line per mark, ``{"t", "pid", "what", ...}``;
``benchmarks/eval_speed.py`` reads it back as a timeline. Unset (the default), a mark
costs one dictionary lookup. Variant processes never write it (their environment is
scrubbed): their phases travel in their frames."""

from __future__ import annotations

import json
import os
import time
from typing import Any

TRACE_ENV = "KERNELBAND_TRACE"


def mark(what: str, **fields: Any) -> None:
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    line = json.dumps({"t": round(time.time(), 4), "pid": os.getpid(), "what": what, **fields}, default=str)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, (line + "\n").encode())  # one write per line: O_APPEND keeps lines whole
    finally:
        os.close(fd)

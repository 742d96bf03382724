"""The one reader of ``/proc/<pid>/stat`` (Linux), shared by the judge's sandbox and
the language server's job manager. The command name, in parentheses, may itself hold
spaces and parentheses, so fields are read after the last ``)``. Standard library only:
the language server imports this.
"""

from __future__ import annotations

import os
from typing import Optional

# indexes into stat_fields(): the fields after "pid (comm)", counted from 0
STATE, PPID, STARTTIME = 0, 1, 19


def stat_fields(pid: int) -> Optional[list[str]]:
    """Fields of /proc/<pid>/stat from the state on, or None when it cannot be read
    (the process is gone, or there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _field(pid: int, index: int) -> Optional[str]:
    fields = stat_fields(pid)
    return fields[index] if fields is not None and len(fields) > index else None


def parent_of(pid: int) -> Optional[int]:
    v = _field(pid, PPID)
    return int(v) if v is not None and v.lstrip("-").isdigit() else None


def group_of(pid: int) -> Optional[int]:
    """The process group id, None when the process is gone."""
    v = _field(pid, PPID + 1)
    return int(v) if v is not None and v.lstrip("-").isdigit() else None


def state_of(pid: int) -> Optional[str]:
    """One letter (R, S, D, Z, X, ...), None when the process is gone."""
    return _field(pid, STATE)


def start_time(pid: int) -> Optional[int]:
    """Clock ticks after boot when the process started: with the pid, names one process
    (a recycled pid has another start time)."""
    v = _field(pid, STARTTIME)
    return int(v) if v is not None and v.isdigit() else None


def all_pids() -> list[int]:
    """Every pid in /proc; raises OSError where there is no /proc."""
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def children_map() -> dict[int, list[int]]:
    """ppid -> its children, from one pass over /proc; raises OSError without /proc."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        ppid = parent_of(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    return children

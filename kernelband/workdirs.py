"""Session temp dirs: each is its process's own (``kernelband-session-<pid>-*``), so one
left by a killed process is told from a live session's and removed by the next one."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

WORKDIR_PREFIX = "kernelband-session-"


def session_workdir() -> str:
    """A private temp dir named after this process, so a later session can tell a dead
    session's leftovers from a live one's."""
    return tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")


def sweep_stale_workdirs(root: Optional[str] = None) -> list[str]:
    """Remove session temp dirs whose process is gone (a session killed by SIGKILL or a
    crash never ran its cleanup). Returns the paths removed."""
    from .store import _pid_alive

    removed = []
    base = Path(root or tempfile.gettempdir())
    for d in base.glob(f"{WORKDIR_PREFIX}*"):
        pid_text = d.name[len(WORKDIR_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _pid_alive(int(pid_text)):
            continue
        try:
            if d.is_dir() and d.stat().st_uid == os.getuid():
                shutil.rmtree(d, ignore_errors=True)
                removed.append(str(d))
        except OSError:
            continue
    return removed


@contextmanager
def job_workdir() -> Iterator[str]:
    """A session-style temp dir for a one-off job (check, profile): swept when this
    process dies without cleaning up, removed when the job ends."""
    sweep_stale_workdirs()
    path = session_workdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)

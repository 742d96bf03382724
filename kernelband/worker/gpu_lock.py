"""One GPU, several KernelBand processes: a cross-process reader/writer lock in which
timing has priority.

Every piece of KernelBand GPU work takes it: harness runs in variant processes and the
judge's reads of their outputs take it *shared*; a timed region takes it *exclusive*, so
nothing else of ours runs on the GPU while a kernel is timed. A plain flock read/write
lock lets a stream of readers starve a waiting writer (each new harness run of another
session slips in before the timer), so the lock has a turnstile: a writer holds the
turnstile while it waits, and a reader passes through the turnstile before it takes its
shared lock. A waiting timer therefore waits only for the readers already running.

The files live beside each other (``PATH`` and ``PATH.turnstile``); ``PATH`` comes from
``KERNELBAND_TIMING_LOCK`` (``off`` disables the lock), set by the judge to one file per
physical GPU so that every session on the machine shares it.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator, Optional

LOCK_ENV = "KERNELBAND_TIMING_LOCK"

# a timed region may be entered again by the same thread (the judge holds it while it
# asks two variant processes for samples): only the outermost acquisition locks
_held = threading.local()


def lock_path() -> Optional[str]:
    path = os.environ.get(LOCK_ENV)
    if not path or path.lower() in ("off", "0", "none"):
        return None
    return path


def _flock(path: str, exclusive: bool) -> int:
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:  # the sandbox's read-only view of the lock: flock needs no write access
        fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _release(fd: int) -> None:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def gpu_lock(exclusive: bool) -> Iterator[None]:
    """Shared for GPU work, exclusive for a timed region (with priority over new readers)."""
    path = lock_path()
    depth = getattr(_held, "depth", 0)
    if path is None or depth > 0:  # no lock, or this thread already holds it (exclusively or shared)
        _held.depth = depth + 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    turnstile = _flock(path + ".turnstile", exclusive=True)
    try:
        if exclusive:
            main = _flock(path, exclusive=True)  # new readers wait at the turnstile meanwhile
        else:
            main = _flock(path, exclusive=False)
            _release(turnstile)
            turnstile = -1
    except BaseException:
        if turnstile >= 0:
            _release(turnstile)
        raise
    if turnstile >= 0:
        _release(turnstile)
    _held.depth = 1
    try:
        yield
    finally:
        _held.depth = 0
        _release(main)


def default_lock_path() -> str:
    """One lock file per physical GPU (by UUID where torch reports it), shared by every
    session on this machine."""
    import tempfile

    import torch

    ident = str(torch.cuda.current_device())
    try:
        uuid = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", None)
        if uuid is not None:
            ident = str(uuid)
    except Exception:  # noqa: BLE001 - no uuid on this torch: the visible index will do
        pass
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in ident)
    return os.path.join(tempfile.gettempdir(), f"kernelband-gpu-{safe}.lock")

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
import time
from typing import Any, Callable, Iterator, Optional

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


def _acquire(path: str, exclusive: bool) -> int:
    """The main lock's descriptor, taken through the turnstile. The wait is added to this
    process's timeline (``gpu_lock_wait_shared`` / ``_exclusive``): how long GPU work
    queued behind timed regions, and timers behind runs."""
    from . import timeline

    t0 = time.perf_counter()
    turnstile = _flock(path + ".turnstile", exclusive=True)
    try:
        if exclusive:
            return _flock(path, exclusive=True)  # new readers wait at the turnstile meanwhile
        return _flock(path, exclusive=False)
    finally:
        _release(turnstile)
        _held.since = time.perf_counter()
        timeline.add("gpu_lock_wait_exclusive" if exclusive else "gpu_lock_wait_shared", _held.since - t0)


def _release_main(main: int, exclusive: bool) -> None:
    """Release this thread's hold of the main lock. Its length goes to the timeline
    (``gpu_lock_hold_*``, and the longest): a timer waits for the longest shared hold
    running when it asks, and every new reader waits with it."""
    from . import timeline

    held = time.perf_counter() - getattr(_held, "since", time.perf_counter())
    kind = "exclusive" if exclusive else "shared"
    timeline.add(f"gpu_lock_hold_{kind}", held)
    timeline.longest(f"gpu_lock_hold_{kind}_longest", held)
    _release(main)


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
    _held.main, _held.shared = _acquire(path, exclusive), not exclusive
    _held.depth = 1
    try:
        yield
    finally:
        _held.depth = 0
        main, _held.main = _held.main, -1
        if main >= 0:
            _release_main(main, not _held.shared)


@contextlib.contextmanager
def stepped_out(sync: Callable[[], None]) -> Iterator[None]:
    """Leave this thread's shared hold for CPU-only work (a Triton compile: seconds, up to
    tens for a large block), then take it again. Compiling inside the hold kept every timer
    on the GPU waiting, and the readers queued behind the timer with it. ``sync`` first
    waits for this thread's queued GPU work, so none of it runs inside another's timed
    region. An exclusive hold (a timed region) is never left."""
    path = _shared_hold()
    if path is None:
        yield
        return
    sync()
    main, _held.main = _held.main, -1
    _release_main(main, exclusive=False)
    try:
        yield
    finally:
        _held.main = _acquire(path, exclusive=False)


@contextlib.contextmanager
def exclusive_turn(sync: Callable[[], None]) -> Iterator[None]:
    """From this thread's shared hold, an exclusive turn for a timed region that is not the
    judge's (an autotuner timing its configs inside a harness run), then the shared hold
    again. Without a shared hold of its own (no lock; a judge's timed region, where the
    judge holds the turn) it changes nothing: waiting there would wait for the judge."""
    path = _shared_hold()
    if path is None:
        yield
        return
    with stepped_out(sync):
        _held.main, _held.shared = _acquire(path, exclusive=True), False
        try:
            yield
        finally:
            sync()
            main, _held.main, _held.shared = _held.main, -1, True
            _release_main(main, exclusive=True)


def _shared_hold() -> Optional[str]:
    """The lock's path where this thread holds it shared, once (not nested), else None."""
    path = lock_path()
    if (
        path is None
        or getattr(_held, "depth", 0) != 1
        or not getattr(_held, "shared", False)
        or getattr(_held, "main", -1) < 0
    ):
        return None
    return path


def compile_outside_lock() -> None:
    """Every Triton compile in this process happens outside its shared hold (``stepped_out``):
    a JITFunction looks ``compile`` up in ``triton.compiler`` when it first needs it."""
    try:
        import triton.compiler as compiler
    except ImportError:  # pragma: no cover
        return
    original: Callable[..., Any] = compiler.compile
    if getattr(original, "__kernelband_unlocked__", False):
        return

    def compile(*args: Any, **kwargs: Any) -> Any:
        with stepped_out(_synchronize):
            return original(*args, **kwargs)

    compile.__kernelband_unlocked__ = True  # type: ignore[attr-defined]
    compile.__kernelband_timed__ = getattr(original, "__kernelband_timed__", False)  # type: ignore[attr-defined]
    compiler.compile = compile


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


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

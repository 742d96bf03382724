"""The pipes of a running job: the feeder writes the editor's text to its stdin, the
readers turn its stdout into events and keep its stderr's tail, the watcher remembers
its process tree while it runs. Each is one coroutine; ``JobManager._run`` starts them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Callable

from kernelband.check_outcome import CheckOutcome
from kernelband.decode import MalformedMessage
from kernelband.events import Event
from kernelband.model import Result

from .jobmodel import CHECK, OPTIMIZE, PROFILE, Job
from .proctree import process_tree, remember

log = logging.getLogger(__name__)


async def feed(proc: asyncio.subprocess.Process, text: str) -> None:
    """Write the module text to the job's stdin and close it."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode("utf-8"))
        await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        with contextlib.suppress(Exception):
            proc.stdin.close()


async def read_stdout(proc: asyncio.subprocess.Process, job: Job, on_event: Callable[[Job, Event], None]) -> None:
    """JSON-lines events to ``on_event``; any other line is kept in job.stdout_other."""
    assert proc.stdout is not None
    while True:
        try:
            raw = await proc.stdout.readline()
        except (ValueError, asyncio.LimitOverrunError):
            job.stdout_other.append("<a line over the stream limit was dropped>")
            continue
        if not raw:
            break
        line = raw.decode("utf-8", "replace").strip()
        if not line:
            continue
        try:
            ev = Event.from_json(line)
        except MalformedMessage as e:  # an event of a known type whose fields do not decode
            job.stdout_other.append(line)
            job.error = f"the engine sent a malformed event: {e}"
            continue
        except ValueError:
            job.stdout_other.append(line)
            continue
        on_event(job, ev)


async def read_stderr(proc: asyncio.subprocess.Process, job: Job) -> None:
    """Keep the tail of stderr (the reason of a failure) and log each line."""
    assert proc.stderr is not None
    while True:
        raw = await proc.stderr.readline()
        if not raw:
            break
        text = raw.decode("utf-8", "replace").rstrip()
        job.stderr_tail.append(text)
        if text.strip():
            log.info("%s: %s", job.id, text)


async def watch_tree(pid: int, job: Job) -> None:
    """Remember the job's descendants while it runs: a worker in its own session is
    re-parented when the job dies and could not be found afterwards."""
    delay = 0.25
    while True:
        await asyncio.sleep(delay)
        remember(job.tree, process_tree(pid))
        delay = 1.0


def take_output(job: Job) -> bool:
    """Whether the job left what its kind ends with: an optimize Result (from its events,
    else the ``--json`` object printed after them, possibly indented), a profile, or the
    JSON verdict of a check (decoded here, once: a malformed one fails the job in one line)."""
    kind = job.spec.kind
    missing = job.result is None if kind == OPTIMIZE else (job.check is None if kind == CHECK else False)
    if missing and job.stdout_other:
        try:
            obj = json.loads("\n".join(job.stdout_other))
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "status" in obj:
            if kind == OPTIMIZE:
                job.result = Result.from_dict(obj)
            else:
                try:
                    job.check = CheckOutcome.from_dict(obj)
                except MalformedMessage as e:
                    job.error = str(e)
    return {OPTIMIZE: job.result, PROFILE: job.profile, CHECK: job.check}.get(kind) is not None

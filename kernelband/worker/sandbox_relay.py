"""The processes of a sandboxed job: a relay outside its namespaces (the process the
judge started), a minimal init as pid 1 of its pid namespace, and the job itself (pid
2). The relay exits exactly as the job did; the init reaps orphans, and the namespace
(every process of the job) dies with it; each dies with its parent. Standard library
only.
"""

from __future__ import annotations

import os
import select
import signal
import struct
import sys
from dataclasses import dataclass
from typing import NoReturn, Optional

from . import sandbox_linux as sl

_TERMINATING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def single_threaded() -> None:
    """A namespace of users or mounts needs a single-threaded caller: a process with
    threads forks first, and the (single-threaded) child goes on."""
    if sl.thread_count() > 1:
        fork_and_relay()


@dataclass
class Relay:
    """The child's ends of the pipes to its relay: ``alive`` reaches end-of-file when
    the relay dies; on ``status`` the pid namespace's init reports how the job ended."""

    alive: int
    status: int


def fork_and_relay() -> Relay:
    """Fork: the parent relays (never returns), the child returns its pipe ends."""
    _flush_stdio()  # nothing buffered is written twice
    alive_r, alive_w = os.pipe()
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        os.close(status_r)
        return Relay(alive_r, status_w)
    os.close(alive_r)
    os.close(status_w)
    _relay(pid, status_r)


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _exit_like(status: int) -> NoReturn:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        except (OSError, ValueError):  # SIGKILL and SIGSTOP keep their default anyway
            pass
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _stdio_to_null() -> None:
    """The job holds its pipes alone: end-of-file comes when it ends."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def _relay(child: int, status_r: int) -> NoReturn:
    """Stand in for ``child`` outside its namespaces: a termination becomes SIGKILL to
    it (which takes its whole pid namespace), and it exits as the job did."""

    def stop(_signum: int, _frame: object) -> None:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass

    for sig in _TERMINATING:
        signal.signal(sig, stop)
    _stdio_to_null()
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            os._exit(1)
    try:
        reported = os.read(status_r, 4)
    except OSError:
        reported = b""
    _exit_like(struct.unpack("i", reported)[0] if len(reported) == 4 else status)


def die_with(relay: Optional[Relay]) -> None:
    """SIGKILL this process when the relay outside its pid namespace dies (set after the
    uid change, which clears it); the pipe tells whether the relay died before that."""
    if relay is None:
        return
    sl.prctl(sl.PR_SET_PDEATHSIG, signal.SIGKILL)
    ready, _, _ = select.select([relay.alive], [], [], 0)
    if ready:
        os._exit(1)
    os.close(relay.alive)


def become_init(relay: Optional[Relay]) -> None:
    """As pid 1 of the namespace, fork the job (pid 2, with the usual signal semantics:
    an init ignores the signals it sends itself, even SIGKILL), then reap orphans until
    it ends and report its status to the relay; the namespace dies with pid 1."""
    if relay is None:
        return
    _flush_stdio()  # nothing buffered is written twice
    job = os.fork()
    if job == 0:
        os.close(relay.status)  # the job must not be able to forge its own status
        return
    sl.prctl(sl.PR_SET_DUMPABLE, 0)  # nor trace its init to reach that pipe
    for sig in _TERMINATING:
        signal.signal(sig, lambda _s, _f: os.kill(job, signal.SIGKILL))
    _stdio_to_null()
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == job:
            try:
                os.write(relay.status, struct.pack("i", status))
            finally:
                os._exit(0)

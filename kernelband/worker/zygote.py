"""A fork server for variant processes: ``python -m kernelband.worker.zygote``.

Starting a variant process from scratch costs seconds (Python, torch and triton imports)
before any kernel runs. The zygote pays that once: it imports them, never initialises
CUDA and never imports a module version, and forks one child per job. The child
becomes exactly what ``variant.py`` runs in a fresh process: its own session, the job's
pipes on fds 0-2, the job's private directory as cwd, the job's scrubbed environment,
the sandbox entered, then ``variant.main()``. The zygote itself is started with the
scrubbed environment, so no secret is ever in its memory or in a child's.

Protocol over a Unix socket inherited from the judge (fd in ``KERNELBAND_ZYGOTE_FD``),
one JSON line per message (``messages.py``), file descriptors passed with SCM_RIGHTS:
    Spawn(dir, env) + fds [stdin, stdout, stderr]  ->  Spawned(pid)
    Reap(pid)                             ->  Reaped(status) (exit code, -signal, or null if running)
    Kill(pid)                             ->  Killed(strays)  (the job's group and every other child)
and ``{"error"}`` for a request that does not decode.
The zygote is a child subreaper: a job's double-forked descendants come back to it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import Optional

from .messages import Kill, Killed, MalformedMessage, Message, Reap, Reaped, Spawn, Spawned, ZygoteRequest

MAX_MESSAGE = 1 << 20


def _preimport() -> None:
    import torch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    import triton.testing  # noqa: F401

    from . import capture, checks, runner, timing, variant, wire  # noqa: F401

    # seconds of lazy torch imports, paid once here (children inherit the settings)
    variant._poison_uninitialized_memory()
    warm_triton_jit()


# what Triton's JIT imports on a process's first launch or compile (Triton 3.3-3.6; a
# module another version lacks is skipped)
_JIT_LAZY_IMPORTS = (
    "triton.compiler.code_generator",
    "triton.tools.tensor_descriptor",
    "triton.experimental.gluon.language",
    "triton.experimental.gluon.language._semantic",
    "triton.experimental.gluon.nvidia.hopper",
    "triton.experimental.gluon.nvidia.blackwell",
)


def warm_triton_jit() -> None:
    """What a process would otherwise pay on its first compile or launch, paid ahead (in
    the zygote once for every child; in the judge in a thread of its own): the hash of
    Triton's own files (``triton_key``, a cache key: about 0.35 s a process on the GPU
    machine) and the modules the JIT imports lazily (about 0.1 s). Neither touches CUDA."""
    import importlib

    for name in _JIT_LAZY_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - absent in this Triton version
            pass
    try:
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:  # noqa: BLE001 - another Triton: its first compile computes it
        pass


def _die_with_parent(parent: int) -> None:
    """SIGKILL this child when the zygote exits (Linux), so no job outlives its judge."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the zygote died before the prctl took effect
        os._exit(1)


def _child(sock: socket.socket, fds: list[int], workdir: str, env: dict[str, str], zygote_pid: int) -> None:
    """In the forked child: become a fresh variant process, run the job, exit."""
    try:
        sys.dont_write_bytecode = True  # a job never writes bytecode a trusted process could load
        _die_with_parent(zygote_pid)
        os.setsid()
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
        sock.close()
        keep = {0, 1, 2}
        for fd in fds:
            if fd not in keep:
                os.close(fd)
        os.closerange(3, 1 << 16)  # nothing of the zygote's (its socket, stray pipes) stays open
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update(env)
        import tempfile

        tempfile.tempdir = None  # the zygote's cached temp dir is not the job's (TMPDIR is)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sys.stdin = os.fdopen(0, "r", encoding="utf-8", errors="replace")
        sys.stdout = os.fdopen(1, "w", encoding="utf-8", errors="replace", buffering=1)
        sys.stderr = os.fdopen(2, "w", encoding="utf-8", errors="replace", buffering=1)
        from . import variant

        code = variant.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - the child must never return into the zygote's loop
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code if isinstance(code, int) else 1)


def _status(pid: int) -> Optional[int]:
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return _reaped.get(pid)
    if got == 0:
        return None
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    _reaped[pid] = code
    return code


_reaped: dict[int, int] = {}


_jobs: set[int] = set()  # job processes forked and not yet killed: several run at once


def _kill(pid: int) -> int:
    """Kill one job: its process group, and the orphans that came back to us (a job's
    double-forked children), but never another job that is still running."""
    from . import sandbox

    status = _status(pid)  # keep the job's own exit status before reaping everything
    _jobs.discard(pid)
    strays = sandbox.kill_tree(pid, keep=frozenset(_jobs))
    if status is None:
        _reaped.setdefault(pid, -signal.SIGKILL)
    return strays


def _kill_all_children() -> None:
    from . import sandbox

    for child in sandbox.children_of(os.getpid()):
        sandbox.kill_tree(child)


def serve(sock: socket.socket) -> int:
    from . import sandbox

    sandbox.become_subreaper()
    try:
        return _serve(sock)
    finally:
        _kill_all_children()  # the judge is gone: so is every job it started


def _serve(sock: socket.socket) -> int:
    buf = b""
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 8)
        except OSError:
            return 0
        if not data:
            return 0  # the judge is gone
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                msg = ZygoteRequest.from_wire(json.loads(line))
            except MalformedMessage as e:
                sock.sendall((json.dumps({"error": str(e)}) + "\n").encode())
                continue
            except ValueError:  # no JSON
                continue
            reply: Message
            if isinstance(msg, Spawn):
                me = os.getpid()
                pid = os.fork()
                if pid == 0:
                    _child(sock, fds, msg.dir, msg.env, me)
                for fd in fds:
                    os.close(fd)
                fds = []
                _jobs.add(pid)
                reply = Spawned(pid)
            elif isinstance(msg, Reap):
                reply = Reaped(_status(msg.pid))
            else:
                assert isinstance(msg, Kill)
                reply = Killed(_kill(msg.pid))
            sock.sendall((json.dumps(reply.to_wire()) + "\n").encode())


def main() -> int:
    _die_with_parent(os.getppid())  # the judge killed (SIGKILL) takes the zygote, and so its jobs, with it
    fd = int(os.environ.pop("KERNELBAND_ZYGOTE_FD"))
    sock = socket.socket(fileno=fd)
    _preimport()
    sock.sendall(b'{"ready": true}\n')
    return serve(sock)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

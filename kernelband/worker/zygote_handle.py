"""The judge's handle on the fork server (``zygote.py``), importable without torch so the
judge can start the fork server before it imports torch itself (both imports then run
at once, which is most of a cold start)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, TypeVar

from ..trace import mark
from . import sandbox
from .messages import MalformedMessage, Message, Ready, ZygoteRequest

_ZYGOTE_START_S = 180.0
_KEEP_PIDS: set[int] = set()  # fork servers: a job's kill of the judge's stray children spares them
R = TypeVar("R", bound=Message)


class Zygote:
    """The judge's handle on the fork server (``zygote.py``): one per judge, started on
    first use with the scrubbed environment, replaced when it dies."""

    def __init__(self, interpreted: bool) -> None:
        self.interpreted = interpreted
        mark("zygote.spawn")
        self.dir = Path(tempfile.mkdtemp(prefix="kernelband-zygote-"))
        env = sandbox.scrubbed_env(str(self.dir))
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        if interpreted:
            env["TRITON_INTERPRET"] = "1"
        if sys.pycache_prefix:  # the judge keeps its bytecode in the machine cache: so does the fork server
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix
        self.sock, child = socket.socketpair()
        env["KERNELBAND_ZYGOTE_FD"] = str(child.fileno())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelband.worker.zygote"],
            cwd=str(self.dir),
            env=env,
            stdin=subprocess.DEVNULL,
            pass_fds=(child.fileno(),),
            start_new_session=True,
        )
        child.close()
        _KEEP_PIDS.add(self.proc.pid)
        self.sock.settimeout(_ZYGOTE_START_S)
        self._buf = b""
        if not self._read(Ready).ready:
            raise OSError("the zygote did not start")
        mark("zygote.ready", zygote=self.proc.pid)
        self.sock.settimeout(30.0)
        self.lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self, kind: type[R]) -> R:
        """The fork server's next line, as ``kind``; OSError when it is something else."""
        while b"\n" not in self._buf:
            data = self.sock.recv(1 << 16)
            if not data:
                raise OSError("the zygote closed its socket")
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return kind.from_wire(json.loads(line))
        except MalformedMessage as e:
            raise OSError(f"the fork server answered {line[:200]!r} ({e})") from None

    def request(self, msg: ZygoteRequest, reply: type[R], fds: tuple[int, ...] = ()) -> R:
        """Send ``msg`` (with ``fds``, SCM_RIGHTS); its reply, a ``reply``."""
        with self.lock:
            data = (json.dumps(msg.to_wire()) + "\n").encode()
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.sendall(data)
            return self._read(reply)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        sandbox.kill_tree(self.proc.pid)
        shutil.rmtree(self.dir, ignore_errors=True)


def use_zygote() -> bool:
    return os.environ.get("KERNELBAND_ZYGOTE", "1") != "0" and hasattr(socket, "send_fds")


class EarlyZygote:
    """A fork server started first thing by the judge, before the judge imports torch, on
    a guess of whether jobs will run under the interpreter; the judge adopts it when the
    guess was right. The starting thread stays alive: the fork server dies with the thread
    that started it (PR_SET_PDEATHSIG is per thread)."""

    def __init__(self, interpreted: bool) -> None:
        self.interpreted = interpreted
        self.zygote: Any = None
        self.ready = threading.Event()
        if use_zygote():
            threading.Thread(target=self._start_and_stay, daemon=True, name="kernelband-zygote-early").start()
        else:
            self.ready.set()

    def _start_and_stay(self) -> None:
        try:
            self.zygote = Zygote(self.interpreted)
        except OSError:
            self.zygote = None
        finally:
            self.ready.set()
        threading.Event().wait()

    def take(self, interpreted: bool, timeout_s: float = _ZYGOTE_START_S) -> Any:
        """The early fork server when it serves ``interpreted`` jobs and started, else None."""
        if interpreted != self.interpreted:
            return None
        self.ready.wait(timeout_s)
        return self.zygote


def guess_interpreted() -> bool:
    """Whether jobs will run under the interpreter, without importing torch: asked for,
    or no NVIDIA device node on this machine."""
    device = os.environ.get("KERNELBAND_DEVICE", "auto")
    if os.environ.get("TRITON_INTERPRET") == "1" or device == "cpu":
        return True
    return not os.path.exists("/dev/nvidiactl")

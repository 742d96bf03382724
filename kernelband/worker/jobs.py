"""Run one variant-process job from the judge: spawn it in the sandbox, send the job,
read its frames under a deadline, and kill its whole process tree at the end."""
from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from . import sandbox
from .wire import DeviceChoice, WireError, read_frame

_STDERR_KEEP = 200  # lines of the variant's stderr kept for messages
_ZYGOTE_START_S = 180.0


class Zygote:
    """The judge's handle on the fork server (``zygote.py``): one per judge, started on
    first use with the scrubbed environment, replaced when it dies."""

    def __init__(self, interpreted: bool) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="kernelband-zygote-"))
        env = sandbox.scrubbed_env(str(self.dir))
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        if interpreted:
            env["TRITON_INTERPRET"] = "1"
        self.sock, child = socket.socketpair()
        env["KERNELBAND_ZYGOTE_FD"] = str(child.fileno())
        self.proc = subprocess.Popen([sys.executable, "-m", "kernelband.worker.zygote"], cwd=str(self.dir), env=env,
                                     stdin=subprocess.DEVNULL, pass_fds=(child.fileno(),), start_new_session=True)
        child.close()
        self.sock.settimeout(_ZYGOTE_START_S)
        self._buf = b""
        if not self._read().get("ready"):
            raise OSError("the zygote did not start")
        self.sock.settimeout(30.0)
        self.lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self) -> dict[str, Any]:
        while b"\n" not in self._buf:
            data = self.sock.recv(1 << 16)
            if not data:
                raise OSError("the zygote closed its socket")
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, msg: dict[str, Any], fds: tuple[int, ...] = ()) -> dict[str, Any]:
        with self.lock:
            data = (json.dumps(msg) + "\n").encode()
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.sendall(data)
            return self._read()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        sandbox.kill_tree(self.proc.pid)
        shutil.rmtree(self.dir, ignore_errors=True)


class ZygoteChild:
    """A job process forked by the zygote, with the small part of Popen's interface we use."""

    def __init__(self, zygote: Zygote, pid: int, stdin: Any, stdout: Any, stderr: Any) -> None:
        self.zygote, self.pid = zygote, pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            try:
                self.returncode = self.zygote.request({"op": "reap", "pid": self.pid}).get("status")
            except (OSError, ValueError):
                self.returncode = -signal.SIGKILL  # the zygote died with it
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = time.monotonic() + (timeout if timeout is not None else 30.0)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("variant", timeout or 30.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def kill_tree(self) -> int:
        try:
            return int(self.zygote.request({"op": "kill", "pid": self.pid}).get("strays", 0))
        except (OSError, ValueError):
            return 0


def _widen_pipe(fd: int) -> None:
    """Grow a pipe to 1 MiB (Linux F_SETPIPE_SZ): gigabytes of outputs cross it, and a
    64 KiB pipe costs a context switch every 64 KiB."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (OSError, ImportError):
        pass  # not Linux, or over /proc/sys/fs/pipe-max-size: the default pipe still works


def _use_zygote() -> bool:
    return os.environ.get("KERNELBAND_ZYGOTE", "1") != "0" and hasattr(socket, "send_fds")


@dataclass
class Frame:
    kind: str  # outputs | timing | paired | profile | error | done
    meta: dict[str, Any]
    tree: Any = None


@dataclass
class JobEnd:
    """How the process ended when no "done" frame came."""

    kind: str  # "timeout" | "crashed" | "protocol"
    message: str
    stderr_tail: str = ""


class JobFailed(Exception):
    def __init__(self, end: JobEnd) -> None:
        super().__init__(end.message)
        self.end = end


@dataclass
class VariantJob:
    """One variant process. Iterate ``frames()``; a JobFailed ends the iteration when the
    process dies, hangs past the deadline, or breaks the protocol."""

    job: dict[str, Any]
    timeout_s: float
    trusted_cache: Optional[Path] = None  # Triton cache of original-only jobs, copied in
    device: DeviceChoice = None  # where received tensors are rebuilt (wire.read_frame)
    on_log: Optional[Callable[[str], None]] = None
    # called once a frame's tensors are dropped, before the next frame is decoded (the
    # judge hands a GPU-decoded frame's cached blocks back here)
    after_frame: Optional[Callable[[], None]] = None
    stderr: list[str] = field(default_factory=list)
    strays_killed: int = 0
    network: str = ""
    sandbox: str = ""  # every layer of the sandbox, as the variant process reported it
    wrapper: list[str] = field(default_factory=list)  # a command the process runs under (compute-sanitizer)
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.nonce = secrets.token_hex(16)
        self.job = dict(self.job, nonce=self.nonce)
        self.dir = Path(tempfile.mkdtemp(prefix="kernelband-variant-"))
        self.proc: Any = None  # subprocess.Popen or ZygoteChild

    def _cache_dir(self) -> str:
        cache = self.dir / "triton-cache"
        if self.trusted_cache is not None and self.trusted_cache.is_dir():
            shutil.copytree(self.trusted_cache, cache, dirs_exist_ok=True)
        cache.mkdir(exist_ok=True)
        return str(cache)

    def start(self, zygote: Optional[Zygote] = None) -> None:
        env = sandbox.scrubbed_env(str(self.dir))
        env["TRITON_CACHE_DIR"] = self._cache_dir()
        # the package must import from where the judge imported it (not the private cwd)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        env[sandbox.READ_ENV] = os.pathsep.join(self._user_paths())
        env.update(self.extra_env)
        if zygote is not None and not self.wrapper:
            self._fork(zygote, env)
        else:
            self._spawn(env)
        threading.Thread(target=self._read_stderr, daemon=True).start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(self.job) + "\n").encode())
            self.proc.stdin.flush()
            # stdin stays open for acks (``_ack``); never blocking: a variant that does not
            # read them cannot stall the judge
            os.set_blocking(self.proc.stdin.fileno(), False)
        except (OSError, ValueError):
            pass

    def _user_paths(self) -> list[str]:
        """What of the user's the job reads: the module's folder (sibling imports) and
        the companion harness; the sandbox keeps them visible."""
        task = self.job.get("task") or {}
        paths = [os.path.dirname(os.path.abspath(task["module_path"]))] if task.get("module_path") else []
        return paths + ([os.path.abspath(task["harness_path"])] if task.get("harness_path") else [])

    def _ack(self) -> None:
        """Tell the variant the judge is done with a frame (its tensors dropped, GPU
        blocks released): a full-size run starts only after every frame sent before it
        is acked, so the judge never holds a decoded frame while the variant allocates
        its next run (variant.Steps.await_judge)."""
        stdin = getattr(self.proc, "stdin", None)
        if stdin is None:
            return
        try:
            stdin.write(b"\n")
            stdin.flush()
        except (OSError, ValueError):  # full (a variant that reads no acks), closed, or dead
            pass

    def _fork(self, zygote: Zygote, env: dict[str, str]) -> None:
        """A child of the zygote, with three fresh pipes as its fds 0-2."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        _widen_pipe(out_r)
        err_r, err_w = os.pipe()
        try:
            pid = int(zygote.request({"op": "spawn", "dir": str(self.dir), "env": env}, (in_r, out_w, err_w))["pid"])
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        self.proc = ZygoteChild(zygote, pid, os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"))

    def _spawn(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [*self.wrapper, sys.executable, "-m", "kernelband.worker.variant"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=str(self.dir), env=env, start_new_session=True, close_fds=True,
        )
        _widen_pipe(self.proc.stdout.fileno())

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")[:2000]
            if line.startswith("kernelband-sandbox: network "):
                self.network = line.split("network ", 1)[1]
                continue
            if line.startswith("kernelband-sandbox: layers "):
                self.sandbox = line.split("layers ", 1)[1]
                continue
            self.stderr.append(line)
            del self.stderr[:-_STDERR_KEEP]
            if self.on_log:
                self.on_log(line)

    def stderr_tail(self, n: int = 6) -> str:
        return "\n".join(self.stderr[-n:])

    def frames(self) -> Iterator[Frame]:
        """Frames as they arrive. Raises JobFailed on timeout, death or a bad frame."""
        if self.proc is None:
            self.start()
        assert self.proc is not None and self.proc.stdout is not None
        out: "queue.Queue[Any]" = queue.Queue(maxsize=1)
        # Lockstep: the next frame is decoded only after the judge is done with this one,
        # so at most one frame's tensors (one copy of the outputs) is held at a time.
        ack: "queue.Queue[bool]" = queue.Queue()
        stopped = threading.Event()
        stdout = self.proc.stdout

        def reader() -> None:
            try:
                while True:
                    frame = read_frame(stdout, self.nonce, self.device)
                    out.put(Frame(*frame) if frame else None)
                    if frame is None or frame[0] in ("done", "error"):
                        return
                    del frame
                    while True:
                        try:
                            ack.get(timeout=0.5)
                            break
                        except queue.Empty:
                            if stopped.is_set():
                                return
            except (WireError, OSError, ValueError, RuntimeError) as e:
                out.put(e)

        threading.Thread(target=reader, daemon=True).start()
        deadline = time.monotonic() + self.timeout_s
        try:
            while True:
                remaining = deadline - time.monotonic()
                try:
                    item = out.get(timeout=max(remaining, 0.01))
                except queue.Empty:
                    self.close()
                    raise JobFailed(JobEnd("timeout", f"no result within {self.timeout_s:.0f} s (hang or far too slow)",
                                           self.stderr_tail())) from None
                if isinstance(item, Exception):
                    self.close()
                    raise JobFailed(JobEnd("protocol", f"the variant process broke the protocol: {item}",
                                           self.stderr_tail()))
                if item is None:
                    code = self.proc.wait()
                    how = f"signal {-code}" if code < 0 else f"exit code {code}"
                    self.close()
                    raise JobFailed(JobEnd("crashed", f"the variant process died ({how})", self.stderr_tail()))
                yield item
                if item.kind in ("done", "error"):
                    return
                item.tree = None  # the caller's loop variable still points at this frame
                del item
                if self.after_frame is not None:
                    self.after_frame()
                self._ack()
                ack.put(True)
        finally:
            stopped.set()

    def close(self) -> None:
        """Kill the process and everything it started; remove its directory."""
        if isinstance(self.proc, ZygoteChild):
            self.strays_killed += self.proc.kill_tree()
        elif self.proc is not None:
            self.strays_killed += sandbox.kill_tree(self.proc.pid)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
        if self.proc is not None:
            # stdin stayed open for acks; a zygote child's output pipes end with it
            popen = not isinstance(self.proc, ZygoteChild)
            for stream in (self.proc.stdin, *((self.proc.stdout, self.proc.stderr) if popen else ())):
                try:
                    if stream:
                        stream.close()
                except OSError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "VariantJob":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

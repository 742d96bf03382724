"""Talk to an evaluation worker process: spawn it, send requests with a deadline, and
replace it when a variant crashes it, hangs it, or corrupts its CUDA context.

The client never imports torch or triton.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from ..machine_cache import bytecode_env
from ..decode import MalformedMessage, decode_fields
from .requests import ErrorKind, ErrorReply, Hello, MalformedReply, Request, Shutdown, decode_reply


class WorkerError(Exception):
    """The request did not produce a result; ``kind`` says why (``requests.ErrorKind``), the
    message says what. ``stderr_tail``: the judge's last output, or its traceback."""

    def __init__(self, kind: ErrorKind, message: str, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.stderr_tail = stderr_tail

    def __reduce__(self) -> tuple[type["WorkerError"], tuple[ErrorKind, str, str]]:
        # pickled whole (a Ray actor's error reaches the driver): the default would lose the kind
        return type(self), (self.kind, str(self), self.stderr_tail)

    @property
    def worker_gone(self) -> bool:
        """The judge died or hung (it is replaced); else it answered."""
        return self.kind in (ErrorKind.CRASHED, ErrorKind.TIMEOUT)


@dataclass
class WorkerInfo:
    device_name: str
    triton_version: str
    torch_version: str
    interpreted: bool
    gpu_count: int
    pid: int
    gpu_uuid: str = ""
    driver: str = ""


def _kill_tree(proc: subprocess.Popen) -> None:
    """The worker runs in its own process group: kill the group (compiler children too)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass


class WorkerClient:
    def __init__(
        self,
        device: str = "auto",
        env: Optional[dict[str, str]] = None,
        on_log: Optional[Callable[[str], None]] = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        self.device = device
        self.extra_env = dict(env or {})
        self.on_log = on_log
        self.start_timeout_s = start_timeout_s
        self.restarts = 0
        self.info: Optional[WorkerInfo] = None
        self._proc: Optional[subprocess.Popen] = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=200)
        self._lock = threading.Lock()  # writes to the worker's stdin, and the table of waiters
        self._waiting: dict[int, "queue.Queue[Optional[Mapping[str, object]]]"] = {}
        self._next_id = 0
        self._dead = False

    # ------------------------------------------------------------------ lifecycle
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env["PYTHONUNBUFFERED"] = "1"
        env["KERNELBAND_DEVICE"] = self.device
        bytecode_env(env)
        if self.device.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = self.device.split(":", 1)[1]
        return env

    def start(self) -> WorkerInfo:
        self._stderr.clear()
        self._waiting = {}
        self._dead = False
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "kernelband.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            env=self._env(),
            start_new_session=True,
        )
        proc = self._proc
        threading.Thread(target=self._read_stdout, args=(proc,), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(proc,), daemon=True).start()
        hello = self._request_raw({"op": Hello.OP, **Hello().to_wire()}, self.start_timeout_s)
        try:
            self.info = decode_info(hello)
        except WorkerError:
            self.stop(graceful=False)  # a judge that cannot say what it is serves no request
            raise
        return self.info

    def _read_stdout(self, proc: subprocess.Popen) -> None:
        """Hand each reply to the request waiting for its id; at EOF wake every waiter."""
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                # should not happen (fd 1 is redirected), but never let it wedge us
                self._stderr.append(f"[non-protocol output] {line.rstrip()}")
                continue
            req_id = reply.get("id") if isinstance(reply, dict) else None
            if not isinstance(req_id, int) or isinstance(req_id, bool):  # no request of ours to give it to
                self._stderr.append(f"[reply without a request id] {line.rstrip()[:200]}")
                continue
            with self._lock:
                waiter = self._waiting.get(req_id)
            if waiter is not None:
                waiter.put(reply)
        with self._lock:
            if self._proc is proc:
                self._dead = True
            waiters = list(self._waiting.values())
        for waiter in waiters:
            waiter.put(None)  # EOF: the worker died

    def _read_stderr(self, proc: subprocess.Popen) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            line = line.rstrip("\n")
            self._stderr.append(line)
            if self.on_log:
                self.on_log(line)

    def stderr_tail(self, n: int = 20) -> str:
        return "\n".join(list(self._stderr)[-n:])

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def restart(self) -> WorkerInfo:
        self.stop(graceful=False)
        self.restarts += 1
        return self.start()

    def stop(self, graceful: bool = True) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if graceful and proc.poll() is None:
            try:
                assert proc.stdin is not None
                with self._lock:
                    proc.stdin.write(json.dumps({"op": Shutdown.OP, **Shutdown().to_wire(), "id": -1}) + "\n")
                    proc.stdin.flush()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                pass
        _kill_tree(proc)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass

    # ------------------------------------------------------------------ requests
    def _request_raw(self, payload: dict[str, Any], timeout_s: float) -> Any:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise WorkerError(ErrorKind.CRASHED, "the worker is not running", self.stderr_tail())
        waiter: "queue.Queue[Optional[Mapping[str, object]]]" = queue.Queue()
        with self._lock:
            self._next_id += 1
            req_id = self._next_id
            self._waiting[req_id] = waiter
            dead = self._dead
            try:
                assert proc.stdin is not None
                proc.stdin.write(json.dumps({**payload, "id": req_id}) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError) as e:
                self._waiting.pop(req_id, None)
                raise WorkerError(ErrorKind.CRASHED, f"the worker closed its input ({e})", self.stderr_tail()) from None
        try:
            if dead:
                raise WorkerError(ErrorKind.CRASHED, "the worker died", self.stderr_tail())
            try:
                reply = waiter.get(timeout=timeout_s)
            except queue.Empty:
                _kill_tree(proc)  # a judge that does not answer in time is broken: every request fails
                raise WorkerError(ErrorKind.TIMEOUT, f"no reply within {timeout_s:.0f} s", self.stderr_tail()) from None
            if reply is None:
                code = proc.wait()
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                raise WorkerError(ErrorKind.CRASHED, f"the worker died ({how})", self.stderr_tail())
            return _result(reply)
        finally:
            with self._lock:
                self._waiting.pop(req_id, None)

    def request(self, op: str, timeout_s: float, **payload: Any) -> Any:
        """Send one request and wait for its reply (several may be in flight at once, from
        different threads). Raises WorkerError; after crashed/timeout the worker is gone
        and ``restart()`` must be called (the Evaluator does that)."""
        if not self.alive:
            raise WorkerError(ErrorKind.CRASHED, "the worker is not running", self.stderr_tail())
        return self._request_raw({"op": op, **payload}, timeout_s)

    def send(self, request: Request, timeout_s: float) -> Any:
        """``request`` (worker/requests.py) as its op's line; the judge's reply (``request``)."""
        return self.request(request.OP, timeout_s, **request.to_wire())

    def __enter__(self) -> "WorkerClient":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def decode_info(hello: object) -> WorkerInfo:
    """The judge's hello reply as a WorkerInfo, every field it needs checked; WorkerError
    (PROTOCOL) naming the field for one that does not decode. A key it does not know is
    passed over, as it always was: the session reads only what it uses."""
    known = (
        {k: v for k, v in hello.items() if k in WorkerInfo.__dataclass_fields__} if isinstance(hello, dict) else hello
    )
    try:
        return decode_fields(WorkerInfo, known, "malformed judge hello")
    except MalformedMessage as e:
        raise WorkerError(ErrorKind.PROTOCOL, str(e)) from None


def _result(line: Mapping[str, object]) -> Any:
    """The result of a reply line, decoded once here; WorkerError for the judge's error, or
    for a reply that does not decode (PROTOCOL: the judge's fault, not the request's)."""
    try:
        answer = decode_reply(line)
    except MalformedReply as e:
        raise WorkerError(ErrorKind.PROTOCOL, str(e)) from None
    if isinstance(answer, ErrorReply):
        raise WorkerError(answer.kind, answer.message, answer.trace)
    return answer.result


# A judge started as soon as a command knows its device, while the command goes on with
# its own set-up (arguments, the store, the session): its imports are most of a cold start.
_PRESTARTED: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[threading.Thread, "WorkerClient"]] = {}
_PRESTART_LOCK = threading.Lock()


def _key(device: str, env: Optional[dict[str, str]]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return device, tuple(sorted((env or {}).items()))


def prestart(device: str, env: Optional[dict[str, str]] = None) -> None:
    """Start a judge for ``device`` in the background (at most one per device and env)."""
    key = _key(device, env)
    with _PRESTART_LOCK:
        if key in _PRESTARTED:
            return
        client = WorkerClient(device, env=env)

        def start() -> None:
            try:
                client.start()
            except WorkerError:
                pass  # the evaluator starts its own and reports why

        thread = threading.Thread(target=start, daemon=True, name="kb-judge-prestart")
        _PRESTARTED[key] = (thread, client)
        thread.start()
        if len(_PRESTARTED) == 1:
            import atexit

            atexit.register(_stop_unused)


def _stop_unused() -> None:
    """A prestarted judge nobody adopted (the session could not start) ends with the command."""
    with _PRESTART_LOCK:
        entries = list(_PRESTARTED.values())
        _PRESTARTED.clear()
    for thread, client in entries:
        thread.join(timeout=5)
        client.stop(graceful=False)


def adopt(
    device: str, env: Optional[dict[str, str]], on_log: Optional[Callable[[str], None]]
) -> Optional["WorkerClient"]:
    """The prestarted judge for ``device`` and ``env`` once it is up, or None."""
    with _PRESTART_LOCK:
        entry = _PRESTARTED.pop(_key(device, env), None)
    if entry is None:
        return None
    thread, client = entry
    thread.join(timeout=client.start_timeout_s)
    if not client.alive or client.info is None:
        client.stop(graceful=False)
        return None
    client.on_log = on_log
    return client

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
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional


class WorkerError(Exception):
    """The request did not produce a reply. ``kind``: crashed | timeout | error."""

    def __init__(self, kind: str, message: str, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.stderr_tail = stderr_tail


@dataclass
class WorkerInfo:
    device_name: str
    triton_version: str
    torch_version: str
    interpreted: bool
    gpu_count: int
    pid: int


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


def _await_exit(proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Let a worker that announced its exit finish; kill it if it lingers."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)


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
        self._replies: "queue.Queue[Optional[str]]" = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=200)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env["PYTHONUNBUFFERED"] = "1"
        env["KERNELBAND_DEVICE"] = self.device
        if self.device.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = self.device.split(":", 1)[1]
        return env

    def start(self) -> WorkerInfo:
        self._replies = queue.Queue()
        self._stderr.clear()
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
        threading.Thread(target=self._read_stdout, args=(proc, self._replies), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(proc,), daemon=True).start()
        info = self._request_raw({"op": "hello"}, self.start_timeout_s)
        self.info = WorkerInfo(**info)
        return self.info

    def _read_stdout(self, proc: subprocess.Popen, replies: "queue.Queue[Optional[str]]") -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            replies.put(line)
        replies.put(None)  # EOF: the worker died

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
                proc.stdin.write(json.dumps({"op": "shutdown"}) + "\n")
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
            raise WorkerError("crashed", "the worker is not running", self.stderr_tail())
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(payload) + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise WorkerError("crashed", f"the worker closed its input ({e})", self.stderr_tail()) from None
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _kill_tree(proc)
                raise WorkerError("timeout", f"no reply within {timeout_s:.0f} s", self.stderr_tail())
            try:
                line = self._replies.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                continue
            if line is None:
                code = proc.wait()
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                raise WorkerError("crashed", f"the worker died ({how})", self.stderr_tail())
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                # should not happen (fd 1 is redirected), but never let it wedge us
                self._stderr.append(f"[non-protocol output] {line.rstrip()}")
                continue
            if reply.get("exiting") or reply.get("fatal"):
                # the worker exits after this reply: wait for it, so that ``alive`` is
                # False before the caller decides whether to restart
                _await_exit(proc)
            if reply.get("ok"):
                return reply.get("result")
            if reply.get("fatal"):
                raise WorkerError("crashed", reply.get("error", "fatal worker error"), self.stderr_tail())
            raise WorkerError("error", reply.get("error", "worker error"), reply.get("trace", ""))

    def request(self, op: str, timeout_s: float, **payload: Any) -> Any:
        """Send one request. Raises WorkerError; after crashed/timeout the worker is gone
        and ``restart()`` must be called (the Evaluator does that)."""
        with self._lock:
            if not self.alive:
                raise WorkerError("crashed", "the worker is not running", self.stderr_tail())
            return self._request_raw({"op": op, **payload}, timeout_s)

    def __enter__(self) -> "WorkerClient":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

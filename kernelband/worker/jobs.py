"""Run one variant-process job from the judge: spawn it in the sandbox, send the job,
read its frames under a deadline, and kill its whole process tree at the end."""
from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from . import sandbox
from .wire import WireError, read_frame

_STDERR_KEEP = 200  # lines of the variant's stderr kept for messages


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
    device: Optional[str] = None  # where received tensors are rebuilt
    on_log: Optional[Callable[[str], None]] = None
    stderr: list[str] = field(default_factory=list)
    strays_killed: int = 0
    network: str = ""

    def __post_init__(self) -> None:
        self.nonce = secrets.token_hex(16)
        self.job = dict(self.job, nonce=self.nonce)
        self.dir = Path(tempfile.mkdtemp(prefix="kernelband-variant-"))
        self.proc: Optional[subprocess.Popen] = None

    def _cache_dir(self) -> str:
        cache = self.dir / "triton-cache"
        if self.trusted_cache is not None and self.trusted_cache.is_dir():
            shutil.copytree(self.trusted_cache, cache, dirs_exist_ok=True)
        cache.mkdir(exist_ok=True)
        return str(cache)

    def start(self) -> None:
        env = sandbox.scrubbed_env(str(self.dir))
        env["TRITON_CACHE_DIR"] = self._cache_dir()
        # the package must import from where the judge imported it (not the private cwd)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelband.worker.variant"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=str(self.dir), env=env, start_new_session=True, close_fds=True,
        )
        threading.Thread(target=self._read_stderr, daemon=True).start()
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(self.job) + "\n").encode())
            self.proc.stdin.close()
        except OSError:
            pass

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")[:2000]
            if line.startswith("kernelband-sandbox: network "):
                self.network = line.split("network ", 1)[1]
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
        out: "queue.Queue[Any]" = queue.Queue(maxsize=2)
        stdout = self.proc.stdout

        def reader() -> None:
            try:
                while True:
                    frame = read_frame(stdout, self.nonce, self.device)
                    out.put(Frame(*frame) if frame else None)
                    if frame is None or frame[0] in ("done", "error"):
                        return
            except (WireError, OSError, ValueError, RuntimeError) as e:
                out.put(e)

        threading.Thread(target=reader, daemon=True).start()
        deadline = time.monotonic() + self.timeout_s
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
                raise JobFailed(JobEnd("protocol", f"the variant process broke the protocol: {item}", self.stderr_tail()))
            if item is None:
                code = self.proc.wait()
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                self.close()
                raise JobFailed(JobEnd("crashed", f"the variant process died ({how})", self.stderr_tail()))
            yield item
            if item.kind in ("done", "error"):
                return

    def close(self) -> None:
        """Kill the process and everything it started; remove its directory."""
        if self.proc is not None:
            self.strays_killed += sandbox.kill_tree(self.proc.pid)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            for stream in (self.proc.stdout, self.proc.stderr):
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

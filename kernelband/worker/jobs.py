"""Run one variant-process job from the judge: spawn it in the sandbox, send the job,
read its frames under a deadline, and kill its whole process tree at the end."""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Generic, Iterator, Optional, TypeVar

from ..trace import mark
from . import sandbox
from .sandbox_setup import hand_over
from .messages import (
    Command,
    FrameMeta,
    Job,
    Kill,
    Killed,
    MalformedMessage,
    Reap,
    Reaped,
    Spawn,
    Spawned,
    Step,
    decode_frame,
)
from .wire import DeviceChoice, IpcMaps, WireError, read_frame
from .zygote_handle import _KEEP_PIDS, Zygote

_SPAWNED: set[int] = set()  # variant processes this judge started itself (not through the fork server)
_STDERR_KEEP = 200  # lines of the variant's stderr kept for messages


class ZygoteChild:
    """A job process forked by the zygote, with the small part of Popen's interface we use."""

    def __init__(self, zygote: Zygote, pid: int, stdin: Any, stdout: Any, stderr: Any) -> None:
        self.zygote, self.pid = zygote, pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            try:
                self.returncode = self.zygote.request(Reap(self.pid), Reaped).status
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
            return self.zygote.request(Kill(self.pid), Killed).strays
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


M = TypeVar("M", bound=FrameMeta)


@dataclass
class Frame(Generic[M]):
    """A frame from a variant process: its meta, decoded once (``messages.decode_frame``), and its tree."""

    meta: M
    tree: Any = None

    @property
    def kind(self) -> str:
        return self.meta.KIND


class JobEndKind(str, Enum):
    """Why a job ended without its "done" frame."""

    TIMEOUT = "timeout"  # no frame within the deadline (the process tree is killed)
    CRASHED = "crashed"  # the process died, or its input closed
    PROTOCOL = "protocol"  # a frame out of order or of an unknown kind
    MALFORMED = "malformed"  # a frame's meta did not decode as its kind

    def __str__(self) -> str:  # the word, in messages and logs
        return self.value


@dataclass
class JobEnd:
    """How the process ended when no "done" frame came."""

    kind: JobEndKind
    message: str
    stderr_tail: str = ""


class JobFailed(Exception):
    def __init__(self, end: JobEnd) -> None:
        super().__init__(end.message)
        self.end = end


def _to_owner_of(top: Path) -> None:
    """Every entry under ``top`` given to ``top``'s owner: what the judge copied into a
    spare's cache after the spare's sandbox gave that cache to the uid it runs as. Left to
    the judge's uid, a directory there refuses the spare's own compiles into it (a false
    ``runtime_error``: PermissionError in Triton's cache)."""
    st = top.stat()
    if st.st_uid != os.geteuid() or st.st_gid != os.getegid():
        hand_over([str(top)], st.st_uid, st.st_gid)


def _user_paths(job: Job) -> list[str]:
    """What of the user's a job reads: the module's folder (sibling imports) and the
    companion harness; the sandbox keeps them visible."""
    task = job.task
    paths = [os.path.dirname(os.path.abspath(task.module_path))] if task.module_path else []
    return paths + ([os.path.abspath(task.harness_path)] if task.harness_path else [])


def _ack(proc: Optional[subprocess.Popen[bytes]]) -> None:
    """Tell the variant the judge is done with a frame (its tensors dropped, GPU
    blocks released): a full-size run starts only after every frame sent before it
    is acked, so the judge never holds a decoded frame while the variant allocates
    its next run (variant.Steps.await_judge)."""
    stdin = getattr(proc, "stdin", None)
    if stdin is None:
        return
    try:
        stdin.write(b"\n")
        stdin.flush()
    except (OSError, ValueError):  # full (a variant that reads no acks), closed, or dead
        pass


@dataclass
class VariantJob:
    """One variant process. Iterate ``frames()``; a JobFailed ends the iteration when the
    process dies, hangs past the deadline, or breaks the protocol."""

    job: Job
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
    # seconds of the judge's side of the job: spawn, frames decoded, teardown; and the
    # variant process's own timeline (the last one it sent)
    spent: dict[str, float] = field(default_factory=dict)
    variant_timeline: dict[str, Any] = field(default_factory=dict)
    ipc: Optional[IpcMaps] = None  # the judge's mappings of the variant's tensors (cuda_ipc transport)
    # a sibling's: the Triton cache of the job it compiles for (its own directory holds the rest)
    shared_cache: Optional[Path] = None

    def __post_init__(self) -> None:
        self.nonce = secrets.token_hex(16)
        self.job = dataclasses.replace(self.job, nonce=self.nonce)
        if self.job.transport == "cuda_ipc" and self.ipc is None:
            self.ipc = IpcMaps()
        self.dir = Path(tempfile.mkdtemp(prefix="kernelband-variant-"))
        self.proc: Any = None  # subprocess.Popen or ZygoteChild

    @property
    def cache(self) -> Path:
        """The Triton cache the process compiles into."""
        return self.shared_cache if self.shared_cache is not None else self.dir / "triton-cache"

    def _cache_dir(self) -> str:
        if self.shared_cache is not None:
            return str(self.shared_cache)
        cache = self.cache
        if self.trusted_cache is not None and self.trusted_cache.is_dir():
            shutil.copytree(self.trusted_cache, cache, dirs_exist_ok=True)
            if self.proc is not None:  # a spare's: its sandbox handed the cache over already
                _to_owner_of(cache)
        cache.mkdir(exist_ok=True)
        return str(cache)

    def start(self, zygote: Optional[Zygote] = None) -> None:
        """The process (unless it is a spare's, already spawned), then the job."""
        t0 = time.perf_counter()
        spare = self.proc is not None
        try:
            if not spare:
                self.spawn(zygote)
            else:
                self._cache_dir()  # what the original compiled since the spare was made
            self._send_job()
        finally:
            self.spent["spawn"] = self.spent.get("spawn", 0.0) + time.perf_counter() - t0
            mark(
                "job.start",
                job=self.nonce[:8],
                pid=getattr(self.proc, "pid", None),
                zygote=zygote is not None,
                spare=spare,
            )

    def adopt(self, job: Job, timeout_s: float) -> None:
        """A spare (``spawn``ed, no job sent) takes ``job``: ``start`` then sends it."""
        self.job = dataclasses.replace(job, nonce=self.nonce)
        self.timeout_s = timeout_s

    def spawn(self, zygote: Optional[Zygote] = None) -> None:
        """The process, in its sandbox, reading its job from stdin (``start`` sends it)."""
        env = sandbox.scrubbed_env(str(self.dir))
        env["TRITON_CACHE_DIR"] = self._cache_dir()
        if self.shared_cache is not None:
            env[sandbox.CACHE_WRITE_ENV] = "1"
        # the package must import from where the judge imported it (not the private cwd)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        env[sandbox.READ_ENV] = os.pathsep.join(_user_paths(self.job))
        env.update(self.extra_env)
        if zygote is not None and not self.wrapper:
            self.proc = _fork(self.dir, zygote, env)
        else:
            self.proc = _popen(self.dir, self.wrapper, env)
        threading.Thread(target=_read_stderr, args=(self,), daemon=True).start()

    def _send_job(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(self.job.to_wire()) + "\n").encode())
            self.proc.stdin.flush()
            # stdin stays open for acks (``_ack``); never blocking: a variant that does not
            # read them cannot stall the judge
            os.set_blocking(self.proc.stdin.fileno(), False)
        except (OSError, ValueError):
            pass

    def stderr_tail(self, n: int = 6) -> str:
        return "\n".join(self.stderr[-n:])

    def _start_reader(self) -> None:
        """Frames are decoded by a thread, one at a time: the next frame is read only once
        the judge is done with the previous one (``_release``), so at most one frame's
        tensors (one copy of the outputs, or one set of IPC views) is held at a time."""
        if self.proc is None:
            self.start()
        assert self.proc is not None and self.proc.stdout is not None
        self._out: "queue.Queue[Any]" = queue.Queue(maxsize=1)
        self._go: "queue.Queue[bool]" = queue.Queue()
        self._stopped = threading.Event()
        self._pending = False  # a frame was handed out and not yet released
        stdout = self.proc.stdout

        def reader() -> None:
            try:
                while True:
                    t_read = time.perf_counter()
                    frame = read_frame(stdout, self.nonce, self.device, self.ipc, decode_frame)
                    self.spent["receive"] = self.spent.get("receive", 0.0) + time.perf_counter() - t_read
                    if frame and frame[1].timeline:
                        self.variant_timeline = frame[1].timeline
                    self._out.put(Frame(frame[1], frame[2]) if frame else None)
                    if frame is None or frame[0] in ("done", "error"):
                        return
                    del frame
                    while True:
                        try:
                            self._go.get(timeout=0.5)
                            break
                        except queue.Empty:
                            if self._stopped.is_set():
                                return
            except (WireError, OSError, ValueError, RuntimeError) as e:
                self._out.put(e)

        threading.Thread(target=reader, daemon=True, name="kb-frames").start()

    def _release(self) -> None:
        """The judge is done with the frame it was handed (its tensors dropped, IPC views no
        longer read): free its GPU blocks, ack it to the variant, let the reader go on."""
        if not self._pending:
            return
        self._pending = False
        if self.after_frame is not None:
            self.after_frame()
        if self.ipc is not None:  # unmap before the ack: the variant may then free that memory
            self.ipc.close()
        _ack(self.proc)
        self._go.put(True)

    def next_frame(self, timeout_s: Optional[float] = None) -> Frame[FrameMeta]:
        """The next frame (the previous one is released first). Raises JobFailed when the
        process dies, breaks the protocol, or sends nothing for ``timeout_s`` (default: the
        time left of the job's deadline)."""
        if not hasattr(self, "_out"):
            self._start_reader()
            self._deadline = time.monotonic() + self.timeout_s
        self._release()
        assert self.proc is not None
        wait = timeout_s if timeout_s is not None else self._deadline - time.monotonic()
        try:
            item = self._out.get(timeout=max(wait, 0.01))
        except queue.Empty:
            self.close()
            raise JobFailed(
                JobEnd(
                    JobEndKind.TIMEOUT,
                    f"no result within {self.timeout_s if timeout_s is None else timeout_s:.0f} s "
                    "(hang or far too slow)",
                    self.stderr_tail(),
                )
            ) from None
        if isinstance(item, MalformedMessage):  # read as sent, and wrong: the variant process's doing
            self.close()
            raise JobFailed(
                JobEnd(JobEndKind.MALFORMED, f"the variant process sent a malformed frame ({item})", self.stderr_tail())
            )
        if isinstance(item, Exception):
            self.close()
            raise JobFailed(
                JobEnd(JobEndKind.PROTOCOL, f"the variant process broke the protocol: {item}", self.stderr_tail())
            )
        if item is None:
            code = self.proc.wait()
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            self.close()
            raise JobFailed(JobEnd(JobEndKind.CRASHED, f"the variant process died ({how})", self.stderr_tail()))
        self._pending = item.kind not in ("done", "error")
        mark("job.frame", job=self.nonce[:8], kind=item.kind, seconds=item.meta.seconds, frame=_what(item.meta))
        return item

    def frames(self) -> Iterator[Frame[FrameMeta]]:
        """Frames as they arrive, until "done" or "error" (each released when the caller asks
        for the next). Raises JobFailed on timeout, death or a bad frame."""
        while True:
            frame = self.next_frame()
            yield frame
            if frame.kind in ("done", "error"):
                return
            frame.tree = None  # the caller's loop variable still points at this frame

    def until_mark(self) -> Iterator[Frame[FrameMeta]]:
        """The frames of the current batch of steps, up to its closing mark (not yielded);
        an error frame ends the batch (yielded)."""
        while True:
            frame = self.next_frame()
            if frame.kind == "mark":
                return
            yield frame
            if frame.kind in ("done", "error"):
                return

    def command(self, steps: list[Step], timeout_s: float) -> None:
        """More steps for an interactive job (the reference lane); their frames follow
        (``next_frame``), each within ``timeout_s``."""
        self._release()
        self._deadline = time.monotonic() + timeout_s
        self._write_line(json.dumps(Command(steps).to_wire()).encode() + b"\n")

    def _write_line(self, data: bytes) -> None:
        stdin = getattr(self.proc, "stdin", None)
        if stdin is None:
            raise JobFailed(JobEnd(JobEndKind.CRASHED, "the variant process has no input", self.stderr_tail()))
        try:
            os.set_blocking(stdin.fileno(), True)
            stdin.write(data)
            stdin.flush()
        except (OSError, ValueError) as e:
            raise JobFailed(
                JobEnd(JobEndKind.CRASHED, f"the variant process closed its input ({e})", self.stderr_tail())
            ) from None
        finally:
            try:
                os.set_blocking(stdin.fileno(), False)
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        """Kill the process and everything it started; remove its directory."""
        t0 = time.perf_counter()
        try:
            self._close()
        finally:
            self.spent["teardown"] = self.spent.get("teardown", 0.0) + time.perf_counter() - t0
            mark("job.closed", job=self.nonce[:8])

    def timeline_phases(self) -> dict[str, float]:
        """The job's timeline as phases: the judge's side (spawn, decode, teardown) and the
        variant process's own (``vp.*``: CUDA context, import, compile, fingerprints...)."""
        out = {f"judge.{k}": round(v, 6) for k, v in self.spent.items()}
        out.pop("judge.decode", None)
        seconds = self.variant_timeline.get("seconds") if isinstance(self.variant_timeline, dict) else None
        if isinstance(seconds, dict):
            out.update({f"vp.{k}": round(float(v), 6) for k, v in seconds.items() if isinstance(v, (int, float))})
        return out

    def _close(self) -> None:
        if hasattr(self, "_stopped"):
            self._stopped.set()
        if self.ipc is not None:
            self.ipc.close()
        if isinstance(self.proc, ZygoteChild):
            self.strays_killed += self.proc.kill_tree()
        elif self.proc is not None:
            _SPAWNED.discard(self.proc.pid)
            # the judge's other children (the fork server, other jobs) are not this job's
            self.strays_killed += sandbox.kill_tree(self.proc.pid, keep=frozenset(_SPAWNED | _KEEP_PIDS))
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


def _fork(workdir: Path, zygote: Zygote, env: dict[str, str]) -> ZygoteChild:
    """A child of the zygote, with three fresh pipes as its fds 0-2."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    _widen_pipe(out_r)
    err_r, err_w = os.pipe()
    try:
        pid = zygote.request(Spawn(str(workdir), env), Spawned, (in_r, out_w, err_w)).pid
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    return ZygoteChild(zygote, pid, os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"))


def _popen(workdir: Path, wrapper: list[str], env: dict[str, str]) -> "subprocess.Popen[bytes]":
    """A fresh interpreter (no fork server, or under a wrapper such as compute-sanitizer)."""
    proc = subprocess.Popen(
        [*wrapper, sys.executable, "-m", "kernelband.worker.variant"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(workdir),
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    _SPAWNED.add(proc.pid)
    assert proc.stdout is not None
    _widen_pipe(proc.stdout.fileno())
    return proc


def _read_stderr(job: VariantJob) -> None:
    """A job's stderr, line by line: the sandbox's report kept apart, the rest kept (the
    last lines) and passed to ``on_log``."""
    assert job.proc is not None and job.proc.stderr is not None
    for raw in job.proc.stderr:
        line = raw.decode("utf-8", "replace").rstrip("\n")[:2000]
        if line.startswith("kernelband-sandbox: network "):
            job.network = line.split("network ", 1)[1]
            continue
        if line.startswith("kernelband-sandbox: layers "):
            job.sandbox = line.split("layers ", 1)[1]
            continue
        job.stderr.append(line)
        del job.stderr[:-_STDERR_KEEP]
        if job.on_log:
            job.on_log(line)


def _what(meta: FrameMeta) -> Optional[str]:
    """A run's frame in the trace: its harness, seed and mode (where a stalled job stood)."""
    harness, seed, mode = (getattr(meta, k, None) for k in ("harness", "seed", "mode"))
    return f"{harness} seed {seed} {mode}" if harness is not None else None

"""The variant process's sandbox (DESIGN section 6), and killing its whole process tree.
The steps of ``enter`` live in ``sandbox_setup`` (the file-system view in ``sandbox_fs``,
the processes in ``sandbox_relay``, the Linux calls in ``sandbox_linux``), the report in
``sandbox_layers``.

The judge sets up what it can from outside when it spawns the process (environment,
cwd, session); the variant process calls ``enter()`` first thing, before torch, triton
or any module of the job is imported, so nothing untrusted has run yet. Each layer holds
on its own and says what the OS allowed (``SandboxReport``); ``KERNELBAND_SANDBOX=strict``
turns a refused or partial layer into an error instead of a note.

- Environment: an allow-list of names (paths, locale, CUDA/Triton/torch settings); any
  name that looks like a credential is dropped even if its prefix is allowed, so API
  keys and tokens never reach candidate code. HOME and TMPDIR point into the job's
  private directory, which is also the cwd.
- user: an unprivileged uid (65534) with no capabilities and no_new_privs. Started as
  root, the process drops to it for real after the namespaces are set up (the job
  directory is handed to it); otherwise a new user namespace maps 65534 onto our uid.
  Where uid 65534 could not read what the job needs, root keeps uid 0 but no
  capability, and the report names the path. A new session keyring replaces the
  inherited one.
- mount: its own mount namespace where every mount is read-only except the job's
  directory (which holds its Triton cache).
- hide: the parent's HOME, /root, /home, /tmp, /var/tmp and /run show only what the
  job needs (the Python installation, the package, the user's module folder), so other
  jobs, the judge's trusted Triton cache, keys and agent sockets are out of sight.
- dev: /dev holds only null, zero, full, random, urandom and the NVIDIA nodes.
- ipc: its own IPC namespace (System V IPC, POSIX message queues) and a private
  /dev/shm (POSIX shared memory and semaphores): nothing shared with other processes.
- pid: its own pid namespace with a new /proc: no ancestor (nor its environ) is
  visible, and every process of the job dies with it. ``enter`` forks twice for this:
  the parent stays outside as a relay, the child is the namespace's minimal init (pid
  1), and the grandchild (pid 2) returns and runs the job. The relay exits exactly as
  the job did; all three share the process group, so the judge's kill of the group
  takes them all, and the namespace also dies with the relay (parent-death signal).
- network: a new network namespace whose only interface, loopback, is down.
- Limits: no core dumps, written files at most 1 GiB. No address-space limit: CUDA
  reserves far more virtual memory than it uses.
- Process tree: the judge is a child subreaper, so a grandchild that double-forks or
  calls setsid is re-parented to the judge, which kills every child it did not start
  on purpose after each job.

Settings (environment of the judge, passed on to the variant process):
``KERNELBAND_SANDBOX`` = ``best-effort`` (default) | ``strict``;
``KERNELBAND_SANDBOX_SKIP`` = comma-separated layers the judge leaves out on purpose
(reported as skipped); ``KERNELBAND_SANDBOX_READ`` = paths (``os.pathsep``-separated) the
job must read besides Python and the package: the user's module folder and harness.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import time
from typing import Iterable, Optional, Sequence

from ..proc import all_pids, group_of, parent_of, state_of
from . import sandbox_fs, sandbox_linux as sl
from .sandbox_layers import (
    CACHE_WRITE_ENV,
    LAYERS,
    POLICY_ENV,
    READ_ENV,
    SKIP_ENV,
    Layer,
    SandboxRefused,
    SandboxReport,
)
from .sandbox_relay import single_threaded
from .sandbox_setup import Setup

__all__ = [
    "CACHE_WRITE_ENV",
    "LAYERS",
    "POLICY_ENV",
    "READ_ENV",
    "SKIP_ENV",
    "Layer",
    "SandboxRefused",
    "SandboxReport",
    "enter",
    "scrubbed_env",
    "allowed_env_name",
    "kill_tree",
    "become_subreaper",
    "children_of",
    "exec_sandboxed",
]

_ALLOWED_NAMES = {
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "LD_LIBRARY_PATH",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "KERNELBAND_DEVICE",
    "KERNELBAND_TIMING_LOCK",
    "KERNELBAND_LOCAL_DATA_MAX_BYTES",
    "KERNELBAND_SANDBOX",
    "KERNELBAND_SANDBOX_SKIP",
    "CC",
    "CXX",
    "SYSTEMROOT",
}
_ALLOWED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TRITON_", "OPENBLAS_", "PYTORCH_", "TORCH_")
_CREDENTIAL = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)

ENTERED_ENV = "KERNELBAND_SANDBOX_ENTERED"  # set by ``exec_sandboxed`` for the process it starts
WHOLE = "--whole"  # ``python -m kernelband.worker.sandbox --whole CMD``: ``exec_sandboxed``

_PR_SET_CHILD_SUBREAPER = 36
FILE_SIZE_LIMIT = 1 << 30


def allowed_env_name(name: str) -> bool:
    if _CREDENTIAL.search(name):
        return False
    return name in _ALLOWED_NAMES or name.startswith(_ALLOWED_PREFIXES)


def scrubbed_env(private_dir: str, base: Optional[dict[str, str]] = None) -> dict[str, str]:
    """The environment a variant process gets: the allow-list only, HOME/TMPDIR private."""
    src = os.environ if base is None else base
    env = {k: v for k, v in src.items() if allowed_env_name(k)}
    env.update(HOME=private_dir, TMPDIR=private_dir, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    return env


# --------------------------------------------------------------------------- entering the sandbox
def apply_limits() -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover
        return
    for what, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT)):
        try:
            soft, hard = resource.getrlimit(what)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(what, (cap, hard))
        except (ValueError, OSError):
            pass


def _settings(policy: Optional[str], skip: Optional[Iterable[str]]) -> tuple[str, set[str]]:
    policy = (policy or os.environ.get(POLICY_ENV) or "best-effort").strip().lower()
    if policy not in ("strict", "best-effort"):
        policy = "strict"  # an unknown word never weakens the sandbox
    if skip is None:
        skip = [s.strip() for s in os.environ.get(SKIP_ENV, "").split(",")]
    return policy, {s for s in skip if s in LAYERS}


def enter(
    writable: Optional[Sequence[str]] = None,
    *,
    readable: Sequence[str] = (),
    policy: Optional[str] = None,
    skip: Optional[Iterable[str]] = None,
) -> SandboxReport:
    """Put this process in the sandbox; call it first thing, before torch or any job
    code is imported (single-threaded, or it forks once more to be). ``writable`` are
    the directories it may write (default: the cwd, the job's private directory);
    ``readable`` are paths it must read besides Python, the package and
    ``KERNELBAND_SANDBOX_READ``. ``policy`` and ``skip`` default to the environment.
    Returns in the sandboxed process only (the relay outside exits with its status).
    Raises ``SandboxRefused`` under the strict policy when a layer did not hold."""
    entered = _entered_by_wrapper()
    if entered is not None:
        return entered
    policy, skipped = _settings(policy, skip)
    report = SandboxReport(policy)
    apply_limits()
    if os.environ.get("KERNELBAND_SANDBOX_NETWORK", "1") == "0":
        outer = os.environ.get("KERNELBAND_SANDBOX_OUTER", "")
        skipped.add("network")
        state = "held" if outer.startswith("isolated") else "refused"
        report.set("network", state, f"{outer or 'disabled'} (entered by the wrapper)")
    for name in skipped:
        if name not in {layer.name for layer in report.layers}:
            report.set(name, "skipped", "left out by the judge")
    cwd = os.getcwd()
    cache = os.environ.get("TRITON_CACHE_DIR")
    shared = [cache] if cache and os.environ.get(CACHE_WRITE_ENV) == "1" and os.path.isdir(cache) else []
    writable = list(writable) if writable is not None else [cwd, *shared]
    cache_note = ""
    if cache and not any(sandbox_fs.is_under(os.path.realpath(cache), os.path.realpath(w)) for w in writable):
        cache_note = f"; the Triton cache {cache} is outside the writable directories (read-only)"
    wanted = [layer for layer in LAYERS if layer not in skipped]
    if not sl.available():
        for name in wanted:
            report.set(name, "refused", "namespaces are not available on this OS")
        return _finish(report)
    single_threaded()
    Setup(report, wanted, writable, readable, cwd, cache_note).run()
    return _finish(report)


def _entered_by_wrapper() -> Optional[SandboxReport]:
    """The report of ``exec_sandboxed``, which entered this process's sandbox before it was
    started (None: not started so). Only the wrapper sets ``ENTERED_ENV``: the judge's
    environment for a variant process drops it (``allowed_env_name``)."""
    raw = os.environ.pop(ENTERED_ENV, None)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        report = SandboxReport(str(data["policy"]))
        for layer in data["layers"]:
            report.set(str(layer["name"]), str(layer["state"]), f"{layer['detail']} (entered by the wrapper)")
    except (ValueError, KeyError, TypeError):
        return None  # not the wrapper's: enter as usual
    return _finish(report)


def _finish(report: SandboxReport) -> SandboxReport:
    for name in LAYERS:  # a layer no step reported on did not hold
        if name not in {layer.name for layer in report.layers}:
            report.set(name, "refused", "not set up: an earlier step failed")
    if report.policy == "strict" and report.failed:
        first = report.failed[0]
        message = f"{first.name} {first.state}: {first.detail}"
        print(f"kernelband-sandbox: refused under {POLICY_ENV}=strict: {message}", file=sys.stderr, flush=True)
        raise SandboxRefused(message)
    return report


# --------------------------------------------------------------------------- in the judge
def become_subreaper() -> bool:
    try:
        sl.prctl(_PR_SET_CHILD_SUBREAPER, 1)
        return True
    except (OSError, AssertionError):
        return False


def children_of(pid: int) -> list[int]:
    try:
        return sorted(c for c in all_pids() if parent_of(c) == pid)
    except OSError:  # no /proc
        return []


def kill_tree(pid: int, keep: frozenset[int] = frozenset()) -> int:
    """Kill process ``pid``'s group, then every child of this process except ``keep``
    (descendants re-parented to us as subreaper), until none is left. Returns how many
    stray processes were killed besides ``pid`` and its own group (the sandbox's relay and
    init share the job's group: they are the job, not strays)."""
    try:
        own = {p for p in all_pids() if group_of(p) == pid}
    except OSError:
        own = set()
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    stray: set[int] = set()
    me = os.getpid()
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        left = [c for c in children_of(me) if c not in keep]
        _reap()
        left = [c for c in left if parent_of(c) == me and not _zombie(c)]
        if not left:
            break
        for c in left:
            if c != pid and c not in own:
                stray.add(c)
            for kill in (lambda p: os.killpg(p, signal.SIGKILL), lambda p: os.kill(p, signal.SIGKILL)):
                try:
                    kill(c)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.02)
    _reap()
    return len(stray)


def _zombie(pid: int) -> bool:
    state = state_of(pid)
    return state is None or state == "Z"


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# --------------------------------------------------------------------------- a tool in a private network
def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def isolate_network() -> str:
    """Move this (still single-threaded) process into a new network namespace (as root,
    or inside a new user namespace mapping our own uid). Returns a short description of
    what was possible. Used by the wrapper (``exec_sandboxed``) while it is still our uid."""
    if not sl.available():
        return "not isolated: unshare is not available on this OS"
    try:
        sl.unshare(sl.CLONE_NEWNET)
        return "isolated: new network namespace"
    except OSError as e:
        first = e.strerror
    uid, gid = os.getuid(), os.getgid()
    try:
        sl.unshare(sl.CLONE_NEWUSER | sl.CLONE_NEWNET)
    except OSError as e:
        return f"not isolated: unshare refused ({first}; user namespace: {e.strerror})"
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as e:
        return f"isolated: new user+network namespace (uid map not written: {e.strerror})"
    return "isolated: new user+network namespace"


_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def loopback_up() -> None:
    """Bring ``lo`` up in this (new) network namespace: tools such as compute-sanitizer
    talk to the process they watch over 127.0.0.1, and nothing else is reachable."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
        flags = struct.unpack("16sH14s", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, b"\0" * 14))


def _isolate_with_loopback() -> None:
    """A new network namespace with only a loopback, entered by this wrapper; the sandbox
    entered after it leaves the network as it is."""
    state = isolate_network()
    if state.startswith("isolated"):
        try:
            loopback_up()
        except OSError as e:
            state = f"{state} (loopback down: {e.strerror})"
    os.environ["KERNELBAND_SANDBOX_NETWORK"] = "0"
    os.environ["KERNELBAND_SANDBOX_OUTER"] = state


def exec_sandboxed(argv: list[str]) -> None:
    """``python -m kernelband.worker.sandbox --whole CMD ...``: run CMD inside the variant's
    whole sandbox, so that a tool (compute-sanitizer) and the variant process it launches
    share every layer: the tool finds its target by pid and meets it over loopback,
    /dev/shm and the job's TMPDIR. Outside, the variant's own pid, IPC and mount
    namespaces hid it from the tool, which then checked nothing (on an H200, memcheck
    caught none of three out-of-bounds variants so, and all three from inside). The network first (a
    loopback up), then the rest, with the tool's own folder readable; the variant process
    finds ``ENTERED_ENV`` (this wrapper's report) and does not enter again."""
    _isolate_with_loopback()
    found = shutil.which(argv[0]) or argv[0]
    report = enter(readable=[os.path.dirname(os.path.realpath(found))])
    os.environ[ENTERED_ENV] = json.dumps(report.to_dict())
    os.execvp(argv[0], argv)


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:2] != [WHOLE] or len(sys.argv) < 3:
        sys.exit(f"usage: python -m kernelband.worker.sandbox {WHOLE} CMD [ARG ...]")
    exec_sandboxed(sys.argv[2:])

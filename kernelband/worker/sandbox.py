"""The variant process's sandbox (DESIGN section 6), and killing its whole process tree.

Set up by the judge when it spawns the process (environment, cwd, session) and by the
variant process itself before it imports anything (network namespace, resource
limits): nothing untrusted has run yet at that point.

- Environment: an allow-list of names (paths, locale, CUDA/Triton/torch settings); any
  name that looks like a credential is dropped even if its prefix is allowed, so API
  keys and tokens never reach candidate code. HOME and TMPDIR point into the job's
  private directory, which is also the cwd.
- Network: a new network namespace (only a loopback that is down) where the OS allows
  it: as root directly, otherwise inside a new user namespace mapping our own uid.
  Where neither is allowed the process runs on, and ``network_isolation()`` says why.
- Limits: no core dumps, written files at most 1 GiB. No address-space limit: CUDA
  reserves far more virtual memory than it uses.
- Process tree: the judge is a child subreaper, so a grandchild that double-forks or
  calls setsid is re-parented to the judge, which kills every child it did not start
  on purpose after each job.
"""
from __future__ import annotations

import ctypes
import os
import re
import signal
import time
from typing import Optional

from ..proc import all_pids, parent_of, state_of

_ALLOWED_NAMES = {"PATH", "LANG", "LANGUAGE", "TZ", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX",
                  "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "KERNELBAND_DEVICE",
                  "KERNELBAND_TIMING_LOCK", "KERNELBAND_TEST_FATAL_MARKER", "KERNELBAND_LOCAL_DATA_MAX_BYTES", "CC", "CXX", "SYSTEMROOT"}
_ALLOWED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TRITON_", "OPENBLAS_", "PYTORCH_", "TORCH_")
_CREDENTIAL = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
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


# --------------------------------------------------------------------------- inside the child
def _libc() -> Optional[ctypes.CDLL]:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - not Linux
        return None


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def isolate_network() -> str:
    """Move this (still single-threaded) process into a new network namespace. Returns a
    short description of what was possible."""
    libc = _libc()
    if libc is None or not hasattr(libc, "unshare"):
        return "not isolated: unshare is not available on this OS"
    if libc.unshare(_CLONE_NEWNET) == 0:
        return "isolated: new network namespace"
    first = os.strerror(ctypes.get_errno())
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as e:
            return f"isolated: new user+network namespace (uid map not written: {e.strerror})"
        return "isolated: new user+network namespace"
    return f"not isolated: unshare refused ({first}; user namespace: {os.strerror(ctypes.get_errno())})"


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


def enter() -> str:
    """Called first thing in the variant process, before torch or any module is imported."""
    apply_limits()
    if os.environ.get("KERNELBAND_SANDBOX_NETWORK", "1") == "0":
        outer = os.environ.get("KERNELBAND_SANDBOX_OUTER")
        return f"{outer} (entered by the wrapper)" if outer else "not isolated: disabled by KERNELBAND_SANDBOX_NETWORK=0"
    return isolate_network()


# --------------------------------------------------------------------------- in the judge
def become_subreaper() -> bool:
    libc = _libc()
    if libc is None or not hasattr(libc, "prctl"):
        return False
    return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def children_of(pid: int) -> list[int]:
    try:
        return sorted(c for c in all_pids() if parent_of(c) == pid)
    except OSError:  # no /proc
        return []


def kill_tree(pid: int, keep: frozenset[int] = frozenset()) -> int:
    """Kill process ``pid``'s group, then every child of this process except ``keep``
    (descendants re-parented to us as subreaper), until none is left. Returns how many
    stray processes were killed besides ``pid``."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    strays = 0
    me = os.getpid()
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        left = [c for c in children_of(me) if c not in keep]
        _reap()
        left = [c for c in left if parent_of(c) == me and not _zombie(c)]
        if not left:
            break
        for c in left:
            if c != pid:
                strays += 1
            for kill in (lambda p: os.killpg(p, signal.SIGKILL), lambda p: os.kill(p, signal.SIGKILL)):
                try:
                    kill(c)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.02)
    _reap()
    return strays


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


def exec_isolated(argv: list[str]) -> None:
    """``python -m kernelband.worker.sandbox CMD ...``: run CMD in a new network namespace
    with only a loopback, so a tool and the variant process it launches share 127.0.0.1
    and reach nothing else. The variant process is told not to isolate itself again."""
    state = isolate_network()
    if state.startswith("isolated"):
        try:
            loopback_up()
        except OSError as e:
            state = f"{state} (loopback down: {e.strerror})"
    os.environ["KERNELBAND_SANDBOX_NETWORK"] = "0"
    os.environ["KERNELBAND_SANDBOX_OUTER"] = state
    os.execvp(argv[0], argv)


if __name__ == "__main__":  # pragma: no cover
    import sys

    exec_isolated(sys.argv[1:])

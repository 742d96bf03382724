"""The variant process's view of the file system, built inside its own mount namespace
(``sandbox.enter``), before any untrusted code runs.

- Hidden directories (the parent's HOME, /root, /home, /tmp, /var/tmp, /run) become an
  empty read-only tmpfs that holds only what the process needs below them (the Python
  installation, the package, the user's module folder, the job directory), each bound
  back from the original at its own place, with new searchable directories between.
- /dev (optional) becomes a tmpfs with only null, zero, full, random, urandom and the
  NVIDIA device nodes (CUDA needs nothing else), and a private /dev/shm.
- /proc is a new procfs of the process's own pid namespace, with /proc/sys and friends
  read-only.
- Every mount is then remounted read-only, except the writable directories (the job's
  private directory, which holds its Triton cache), the private /dev/shm and /proc.
- ``writable_holes`` re-reads the mount table afterwards: what it returns is what the
  process could still write besides what it was given.

Everything here needs CAP_SYS_ADMIN over the current mount namespace. Standard library
only.
"""

from __future__ import annotations

import glob
import os
import stat
from dataclasses import dataclass, field
from typing import Iterable, Optional

from . import sandbox_linux as sl

PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
DEV_NODES = ("null", "zero", "full", "random", "urandom")
DEV_GLOBS = ("nvidia*",)  # nvidia0..N, nvidiactl, nvidia-uvm(-tools), nvidia-modeset, nvidia-caps/
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}
SHM_SIZE = "1g"
_MASK_OPTIONS = "mode=0755,size=1m"


@dataclass
class FsPlan:
    writable: list[str]  # bound read-write (real paths of directories)
    readable: list[str] = field(default_factory=list)  # must stay visible below hidden directories
    hide: list[str] = field(default_factory=list)  # replaced by an empty tmpfs, but for what is kept
    read_only: bool = True  # remount everything else read-only
    minimal_dev: bool = False
    private_shm: bool = True
    new_proc: bool = False  # this process is already in its own pid namespace


@dataclass
class FsResult:
    hidden: list[str] = field(default_factory=list)
    not_hidden: list[str] = field(default_factory=list)  # "path (why)"
    dev: str = ""
    proc: str = ""
    shm: str = ""  # the private /dev/shm's path, or why there is none
    rw: list[str] = field(default_factory=list)  # left writable on purpose besides ``writable``


# --------------------------------------------------------------------------- planning
def real(paths: Iterable[str]) -> list[str]:
    """Real paths of those that exist, without duplicates, in order."""
    out: list[str] = []
    for p in paths:
        if not p:
            continue
        try:
            r = os.path.realpath(p)
        except OSError:
            continue
        if os.path.lexists(r) and r not in out:
            out.append(r)
    return out


def is_under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def masks(hide: list[str], keep: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Which directories to cover, each with the kept paths below it to bind back at
    their own place (the directories between are new, empty and searchable, so nothing
    beside a kept path shows, and a kept path below a private directory is reachable).
    A directory that is itself kept, or lies inside a kept one, cannot be hidden; one
    inside another hidden directory is hidden already."""
    plan: dict[str, list[str]] = {}
    refused: list[str] = []
    for top in sorted(real(hide), key=lambda p: (p.count("/"), p)):
        if not os.path.isdir(top) or top == "/" or any(is_under(top, t) for t in plan):
            continue
        blocking = [k for k in keep if is_under(top, k)]
        if blocking:
            refused.append(f"{top} (needed: {blocking[0]})")
            continue
        below = sorted(k for k in keep if is_under(k, top))
        plan[top] = [k for k in below if not any(o != k and is_under(k, o) for o in below)]
    return plan, refused


def unreachable_ancestors(path: str, uid: int, gid: int) -> list[str]:
    """The directories above ``path`` that ``uid`` may not pass through (no search
    permission): what must be hidden, with ``path`` bound back, for it to reach it."""
    out = []
    cur = os.path.dirname(path)
    chain = []
    while True:
        chain.append(cur)
        if cur == "/":
            break
        cur = os.path.dirname(cur)
    for d in reversed(chain):
        if not _allowed(d, uid, gid, stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH):
            out.append(d)
    return out


def readable_by(path: str, uid: int, gid: int, write: bool = False) -> bool:
    """Whether ``uid`` may read ``path`` itself (list a directory, read a file, also
    write a device node when ``write``), ignoring the directories above it."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    need = [(stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)]
    if stat.S_ISDIR(st.st_mode):
        need.append((stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH))
    if write:
        need.append((stat.S_IWUSR, stat.S_IWGRP, stat.S_IWOTH))
    return all(_allowed(path, uid, gid, *bits, st=st) for bits in need)


def _allowed(
    path: str, uid: int, gid: int, user: int, group: int, other: int, st: Optional[os.stat_result] = None
) -> bool:
    try:
        st = st or os.stat(path)
    except OSError:
        return False
    if st.st_uid == uid:
        return bool(st.st_mode & user)
    if st.st_gid == gid:
        return bool(st.st_mode & group)
    return bool(st.st_mode & other)


def dev_entries() -> list[str]:
    names = [n for n in DEV_NODES if os.path.exists(f"/dev/{n}")]
    for pattern in DEV_GLOBS:
        names += sorted(os.path.basename(p) for p in glob.glob(f"/dev/{pattern}"))
    return names


# --------------------------------------------------------------------------- applying
def apply(plan: FsPlan) -> FsResult:
    """Build the view (see the module docstring) in the current mount namespace."""
    result = FsResult()
    sl.mount(None, "/", None, sl.MS_REC | sl.MS_SLAVE)  # nothing we mount leaks to the parent namespace
    writable = real(plan.writable)
    keep = real([*writable, *plan.readable])
    covered, result.not_hidden = masks(plan.hide, keep)
    fds: dict[str, int] = {}
    try:
        for kept in covered.values():
            for path in kept:
                fds[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        dev_names = dev_entries() if plan.minimal_dev else []
        shared_shm = "" if plan.private_shm or not os.path.isdir("/dev/shm") else os.path.realpath("/dev/shm")
        if plan.minimal_dev and shared_shm:
            dev_names.append("shm")  # left shared on purpose: bound back into the new /dev
        for name in dev_names:
            fds[f"/dev/{name}"] = os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC)
        for top, kept in covered.items():
            sl.mount("tmpfs", top, "tmpfs", sl.MS_NOSUID | sl.MS_NODEV, _MASK_OPTIONS)
            for path in kept:
                _make_parents(top, path)
                _bind_from_fd(fds[path], path)
            result.hidden.append(top)
        for w in writable:  # its own mount, so that it stays writable below; no set-uid file or device there
            sl.mount(w, w, None, sl.MS_BIND | sl.MS_REC)
            _remount(w, sl.MS_NOSUID | sl.MS_NODEV)
        allowed_rw = set(writable)
        if plan.minimal_dev:
            result.dev = _minimal_dev(dev_names, fds)
        if plan.private_shm:
            result.shm = _private_shm()
            if result.shm.startswith("/"):
                result.rw.append(result.shm)
        elif shared_shm:
            result.shm = "shared"
            result.rw.append("/dev/shm" if plan.minimal_dev else shared_shm)
        allowed_rw.update(result.rw)
        if plan.new_proc:
            result.proc = _new_proc()
        if plan.read_only:
            _remount_read_only(allowed_rw)
    finally:
        for fd in fds.values():
            os.close(fd)
    return result


def _make_parents(top: str, path: str) -> None:
    """The directories between ``top`` (a fresh tmpfs) and ``path``: searchable by anyone
    whatever the umask (the originals may be private to their owner)."""
    cur = top
    for part in os.path.relpath(os.path.dirname(path), top).split("/"):
        if part in ("", "."):
            continue
        cur = os.path.join(cur, part)
        if not os.path.isdir(cur):
            os.mkdir(cur)
            os.chmod(cur, 0o755)


def _bind_from_fd(fd: int, target: str) -> None:
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.makedirs(target, exist_ok=True)
    elif not os.path.lexists(target):
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
    sl.mount(f"/proc/self/fd/{fd}", target, None, sl.MS_BIND | sl.MS_REC)


def _minimal_dev(names: list[str], fds: dict[str, int]) -> str:
    sl.mount("tmpfs", "/dev", "tmpfs", sl.MS_NOSUID | sl.MS_NOEXEC, "mode=0755,size=1m")
    for name in names:
        _bind_from_fd(fds[f"/dev/{name}"], f"/dev/{name}")
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"/dev/{name}")
    if "shm" not in names:
        os.mkdir("/dev/shm", 0o1777)
    names = [n for n in names if n != "shm"]
    nvidia = [n for n in names if n.startswith("nvidia")]
    plain = ", ".join(n for n in names if n not in nvidia)
    return f"{plain} and {len(nvidia)} NVIDIA entries" if nvidia else f"{plain} (no NVIDIA device here)"


def _private_shm() -> str:
    """A private tmpfs on /dev/shm (POSIX shared memory, semaphores): nothing in the
    parent's /dev/shm is visible or writable. Returns its path, or why there is none."""
    try:
        target = os.path.realpath("/dev/shm")
        if not os.path.isdir(target):
            return "none: /dev/shm is missing"
        sl.mount("tmpfs", target, "tmpfs", sl.MS_NOSUID | sl.MS_NODEV, f"mode=1777,size={SHM_SIZE}")
        return target
    except OSError as e:
        return f"shared: {e.strerror}"


def _new_proc() -> str:
    try:
        sl.mount("proc", "/proc", "proc", sl.MS_NOSUID | sl.MS_NODEV | sl.MS_NOEXEC)
    except OSError as e:
        return f"old /proc kept: {e.strerror}"
    for name in PROC_READ_ONLY:
        path = f"/proc/{name}"
        if os.path.exists(path):
            try:
                sl.mount(path, path, None, sl.MS_BIND | sl.MS_REC)
                sl.mount(
                    None,
                    path,
                    None,
                    sl.MS_REMOUNT | sl.MS_BIND | sl.MS_RDONLY | sl.MS_NOSUID | sl.MS_NODEV | sl.MS_NOEXEC,
                )
            except OSError as e:
                return f"new /proc, but /proc/{name} stays writable: {e.strerror}"
    return "new"


def _remount(path: str, flags: int) -> None:
    """Remount the topmost mount at ``path`` with ``flags`` added to what it has."""
    entry = [e for e in sl.mounts() if e.path == path][-1]
    sl.mount(
        None,
        path,
        None,
        sl.MS_REMOUNT | sl.MS_BIND | entry.kept_flags() | flags | (sl.MS_RDONLY if entry.read_only else 0),
    )


def _exempt(path: str, allowed_rw: set[str]) -> bool:
    return path in allowed_rw or is_under(path, "/proc") and path not in {f"/proc/{n}" for n in PROC_READ_ONLY}


def _remount_read_only(allowed_rw: set[str]) -> None:
    """A mount that cannot be remounted stays writable: ``writable_holes`` reports it."""
    for entry in sl.mounts():
        if entry.read_only or _exempt(entry.path, allowed_rw) or not os.path.lexists(entry.path):
            continue
        try:
            sl.mount(None, entry.path, None, sl.MS_REMOUNT | sl.MS_BIND | sl.MS_RDONLY | entry.kept_flags())
        except OSError:
            pass


def writable_holes(allowed_rw: Iterable[str]) -> list[str]:
    """Mount points, as this process resolves them, that are still writable and not in
    ``allowed_rw`` (nor /proc): each one is a place the process could write."""
    allowed = set(real(allowed_rw))
    holes = []
    for entry in sl.mounts():
        if _exempt(entry.path, allowed) or entry.path in holes:
            continue
        try:
            if not os.statvfs(entry.path).f_flag & os.ST_RDONLY:
                holes.append(entry.path)
        except OSError:
            continue  # hidden below a mount of ours, or gone: not reachable by this path
    return holes

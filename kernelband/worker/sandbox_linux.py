"""Thin wrappers over the Linux calls the sandbox needs (namespaces, mounts, credentials,
capabilities), through ctypes: the standard library of the Pythons we support lacks
most of them. Every failure is an ``OSError`` with the errno, never a silent no-op.
Standard library only: nothing here may import torch or triton (the sandbox is entered
before they are).
"""

from __future__ import annotations

import ctypes
import os
import re
from typing import Optional

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOSYMFOLLOW = 256
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_SLAVE = 1 << 19
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24

# per-mount options of /proc/self/mountinfo that a bind remount must carry over (in a
# user namespace, dropping a locked one is refused)
KEPT_OPTIONS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "nosymfollow": MS_NOSYMFOLLOW,
}

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE,
# each with its lock: uid 0 (where it must be kept) never regains capabilities by exec
SECUREBITS_LOCKED_DOWN = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80

_LINUX_CAPABILITY_VERSION_3 = 0x20080522
NOBODY = 65534


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_libc_cache: list[Optional[ctypes.CDLL]] = []


def libc() -> Optional[ctypes.CDLL]:
    if not _libc_cache:
        try:
            _libc_cache.append(ctypes.CDLL(None, use_errno=True))
        except OSError:  # pragma: no cover - not a libc platform
            _libc_cache.append(None)
    return _libc_cache[0]


def available() -> bool:
    lib = libc()
    return lib is not None and all(hasattr(lib, n) for n in ("unshare", "mount", "prctl"))


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    lib = libc()
    if lib is None or not hasattr(lib, "unshare"):
        raise OSError(38, "unshare is not available on this OS")
    _check(lib.unshare(ctypes.c_int(flags)), "unshare")


def _b(value: Optional[str]) -> Optional[bytes]:
    return None if value is None else os.fsencode(value)


def mount(source: Optional[str], target: str, fstype: Optional[str], flags: int, data: Optional[str] = None) -> None:
    lib = libc()
    assert lib is not None
    lib.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    _check(lib.mount(_b(source), _b(target), _b(fstype), ctypes.c_ulong(flags), _b(data)), f"mount {target}")


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    lib = libc()
    assert lib is not None
    _check(
        lib.prctl(
            ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0), ctypes.c_ulong(0)
        ),
        f"prctl {option}",
    )


def last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return 63


def drop_bounding_and_ambient() -> None:
    """Empty the bounding and ambient sets (needs CAP_SETPCAP, so: before dropping it)."""
    for cap in range(last_capability() + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError as e:
            if e.errno != 22:  # EINVAL: a capability this kernel does not know
                raise
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError as e:
        if e.errno != 22:  # kernels before 4.3 have no ambient set
            raise


def clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets of this thread."""
    lib = libc()
    assert lib is not None
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(lib.capset(ctypes.byref(header), data), "capset")


_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "ppc64le": 271, "s390x": 280}
_KEYCTL_JOIN_SESSION_KEYRING = 1


def join_new_session_keyring() -> None:
    """Leave the inherited session keyring (keys the parent's session stored there)
    for a new, empty one."""
    lib = libc()
    number = _SYS_KEYCTL.get(os.uname().machine)
    if lib is None or number is None:
        raise OSError(38, f"keyctl number unknown on {os.uname().machine}")
    result = lib.syscall(ctypes.c_long(number), ctypes.c_long(_KEYCTL_JOIN_SESSION_KEYRING), ctypes.c_void_p(None))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"keyctl: {os.strerror(err)}")


def write_id_maps(inside: int, outside_uid: int, outside_gid: int) -> None:
    """Map one id of this (new) user namespace onto ours: the only mapping an
    unprivileged process may write."""
    with open("/proc/self/setgroups", "w", encoding="ascii") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w", encoding="ascii") as fh:
        fh.write(f"{inside} {outside_uid} 1")
    with open("/proc/self/gid_map", "w", encoding="ascii") as fh:
        fh.write(f"{inside} {outside_gid} 1")


def id_mapped(inside: int) -> bool:
    """Whether uid and gid ``inside`` exist in this process's user namespace (always in
    the initial one; in a namespace made by ``unshare -r``, only the ids it mapped)."""
    for name in ("uid_map", "gid_map"):
        try:
            with open(f"/proc/self/{name}", encoding="ascii") as fh:
                ranges = [tuple(int(x) for x in line.split()) for line in fh if line.strip()]
        except (OSError, ValueError):
            return False
        if not any(start <= inside < start + count for start, _outside, count in ranges):
            return False
    return True


def status_fields() -> dict[str, str]:
    """/proc/self/status as a dict (Uid, Gid, CapEff, NoNewPrivs, Threads, ...)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def thread_count() -> int:
    try:
        return int(status_fields().get("Threads", "1"))
    except ValueError:
        return 1


class MountEntry:
    """One line of /proc/self/mountinfo."""

    __slots__ = ("mount_id", "parent_id", "path", "options", "fstype")

    def __init__(self, mount_id: int, parent_id: int, path: str, options: list[str], fstype: str) -> None:
        self.mount_id, self.parent_id, self.path, self.options, self.fstype = mount_id, parent_id, path, options, fstype

    @property
    def read_only(self) -> bool:
        return "ro" in self.options

    def kept_flags(self) -> int:
        flags = 0
        for opt in self.options:
            flags |= KEPT_OPTIONS.get(opt, 0)
        if not any(o in self.options for o in ("noatime", "relatime")):
            flags |= MS_STRICTATIME
        return flags


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts() -> list[MountEntry]:
    entries = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            parts = line.split()
            sep = parts.index("-")
            entries.append(
                MountEntry(int(parts[0]), int(parts[1]), _unescape(parts[4]), parts[5].split(","), parts[sep + 1])
            )
    return entries

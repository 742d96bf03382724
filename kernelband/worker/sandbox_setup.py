"""The steps of ``sandbox.enter``: what the job needs to reach, the namespaces, the file
system view (``sandbox_fs``), the credentials, and the check of each layer from inside,
recorded in the ``SandboxReport``. Standard library only: it runs before torch is
imported.
"""

from __future__ import annotations

import os
import pwd
import sys
from dataclasses import dataclass
from typing import Optional, Sequence

from ..proc import all_pids
from . import sandbox_fs, sandbox_linux as sl
from .sandbox_layers import READ_ENV, SandboxReport
from .sandbox_relay import Relay, become_init, die_with, fork_and_relay

_HIDDEN = ("/root", "/home", "/tmp", "/var/tmp", "/run")
_SIOCGIFFLAGS = 0x8913
_IFF_UP = 0x1


@dataclass
class _Needs:
    """What the job must reach, as real paths: ``hard`` ones decide whether uid 65534
    can run it at all; ``soft`` ones (other sys.path entries, CUDA's MPS pipes and
    persistence socket) are kept visible."""

    writable: list[str]
    hard: list[str]
    soft: list[str]
    devices: list[str]  # must be readable and writable (CUDA)


def _env_paths(name: str) -> list[str]:
    return [p for p in os.environ.get(name, "").split(os.pathsep) if p]


def _package_dir(name: str) -> Optional[str]:
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    return os.path.dirname(spec.origin)


def _timing_lock() -> list[str]:
    """The judge's GPU timing lock (the job takes it shared while it runs harnesses):
    created now, readable, so the read-only view still holds it."""
    path = os.environ.get("KERNELBAND_TIMING_LOCK", "")
    if not path or path.lower() in ("off", "0", "none"):
        return []
    paths = [path, path + ".turnstile"]  # the lock and its turnstile (kernelband.worker.gpu_lock)
    for p in paths:
        try:
            fd = os.open(p, os.O_CREAT | os.O_RDONLY | os.O_CLOEXEC, 0o644)
            try:
                st = os.fstat(fd)
                if st.st_uid == os.geteuid() and not st.st_mode & 0o004:
                    os.fchmod(fd, st.st_mode | 0o444)
            finally:
                os.close(fd)
        except OSError:
            pass
    return paths


def _needs(writable: Sequence[str], readable: Sequence[str]) -> _Needs:
    import sysconfig

    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    hard = [
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(os.__file__),
        package_root,
        os.path.dirname(os.path.realpath(sys.executable)),
    ]
    hard += [sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    hard += [d for d in (_package_dir(n) for n in ("torch", "triton", "numpy")) if d]
    hard += [*readable, *_env_paths(READ_ENV), *_timing_lock()]
    devices = [f"/dev/{n}" for n in sandbox_fs.dev_entries() if n.startswith("nvidia")]
    # what CUDA may talk to below hidden directories: an MPS server's pipes, the
    # persistence daemon's socket (kept visible where they exist)
    cuda = [os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), "/run/nvidia-persistenced"]
    soft = [*(p or os.getcwd() for p in sys.path), *cuda]
    return _Needs(
        sandbox_fs.real(writable),
        sandbox_fs.real(hard),
        sandbox_fs.real(soft),
        [d for d in devices if not os.path.isdir(d)],
    )


def _hidden_dirs() -> list[str]:
    dirs = list(_HIDDEN)
    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
        if home and home != "/":
            dirs.insert(0, home)
    except KeyError:
        pass
    return dirs


def _unreadable_for_nobody(needs: _Needs) -> list[str]:
    bad = [p for p in needs.hard if not sandbox_fs.readable_by(p, sl.NOBODY, sl.NOBODY)]
    bad += [d for d in needs.devices if not sandbox_fs.readable_by(d, sl.NOBODY, sl.NOBODY, write=True)]
    return bad


def _reach_masks(needs: _Needs) -> list[str]:
    out: list[str] = []
    for p in [*needs.writable, *needs.hard, *needs.soft]:
        for d in sandbox_fs.unreachable_ancestors(p, sl.NOBODY, sl.NOBODY):
            if d not in out:
                out.append(d)
    return out


def hand_over(paths: Sequence[str], uid: int, gid: int) -> None:
    """Give the job's own directories (each with all it holds) to the uid it will run as."""
    for top in paths:
        os.lchown(top, uid, gid)
        for root, dirs, files in os.walk(top):
            for name in dirs + files:
                try:
                    os.lchown(os.path.join(root, name), uid, gid)
                except FileNotFoundError:  # a shared Triton cache: its writer renamed a temporary file
                    pass


class Setup:
    """One run of ``enter``'s steps; each records its layer in the report."""

    def __init__(
        self,
        report: SandboxReport,
        wanted: list[str],
        writable: list[str],
        readable: Sequence[str],
        cwd: str,
        cache_note: str,
    ) -> None:
        self.report, self.wanted, self.cwd, self.cache_note = report, wanted, cwd, cache_note
        # root that can become uid 65534 for real; otherwise (a user, or root of a user
        # namespace without that id) a new user namespace maps 65534 onto us
        self.root = os.geteuid() == 0 and sl.id_mapped(sl.NOBODY)
        self.needs = _needs(writable, readable)
        unreadable = _unreadable_for_nobody(self.needs) if self.root and "user" in wanted else []
        # why root keeps uid 0 (without capabilities) instead of becoming 65534, if it must
        self.keep_root = f"{unreadable[0]} is not readable by uid {sl.NOBODY}" if unreadable else ""
        self.reach = _reach_masks(self.needs) if self.root and "user" in wanted and not unreadable else []
        self.namespaces: set[str] = set()
        self.outer_pid = os.getpid()
        self.outer_uid = os.getuid()  # what uid 65534 of a new user namespace is outside it
        self.keyring = ""

    def want(self, layer: str) -> bool:
        return layer in self.wanted

    # ---- namespaces (in this process, before the fork)
    def run(self) -> None:
        if not self.root and not self._user_namespace():
            return
        need_mounts = any(self.want(layer) for layer in ("mount", "hide", "dev", "ipc", "pid")) or bool(self.reach)
        for flag, name, needed in (
            (sl.CLONE_NEWNS, "mount", need_mounts),
            (sl.CLONE_NEWIPC, "ipc", self.want("ipc")),
            (sl.CLONE_NEWPID, "pid", self.want("pid")),
            (sl.CLONE_NEWNET, "network", self.want("network")),
        ):
            if not needed:
                continue
            try:
                sl.unshare(flag)
                self.namespaces.add(name)
            except OSError as e:
                self._refuse_namespace(name, e.strerror)
        relay = fork_and_relay() if "pid" in self.namespaces else None
        self._inside(relay)
        become_init(relay)

    def _user_namespace(self) -> bool:
        """Not root: everything else needs a user namespace, where uid 65534 is us."""
        uid, gid = os.getuid(), os.getgid()
        try:
            sl.unshare(sl.CLONE_NEWUSER)
        except OSError as e:
            for name in self.wanted:
                self.report.set(name, "refused", f"no user namespace ({e.strerror}), and not root")
            return False
        try:
            sl.write_id_maps(sl.NOBODY, uid, gid)
        except OSError as e:
            for name in self.wanted:
                self.report.set(name, "refused", f"user namespace without an id map ({e.strerror})")
            try:  # the namespace's capabilities are useless without a map: gone anyway
                sl.drop_bounding_and_ambient()
                sl.clear_capabilities()
                sl.prctl(sl.PR_SET_NO_NEW_PRIVS, 1)
            except OSError:
                pass
            return False
        return True

    def _refuse_namespace(self, name: str, why: Optional[str]) -> None:
        if name == "mount":
            for layer in ("mount", "hide", "dev", "ipc"):
                if self.want(layer):
                    self.report.set(layer, "refused", f"no mount namespace ({why})")
        elif self.want(name):
            self.report.set(name, "refused", f"no {name} namespace ({why})")

    # ---- inside every namespace (after the fork: pid 1 of its own pid namespace)
    def _inside(self, relay: Optional[Relay]) -> None:
        if self.reach and "mount" not in self.namespaces:
            self.keep_root = "no mount namespace to reach what the job needs"
        drop_uid = self.root and self.want("user") and not self.keep_root
        if drop_uid:
            try:
                hand_over(self.needs.writable, sl.NOBODY, sl.NOBODY)
            except OSError as e:
                drop_uid = False
                self.keep_root = f"the job directory could not be handed over ({e.strerror})"
        fs = self._file_system(drop_uid) if "mount" in self.namespaces else None
        os.chdir(self.cwd)  # through the new mounts: the old cwd is on a read-only one now
        self._credentials(drop_uid)
        die_with(relay)
        self._verify(fs)

    def _file_system(self, drop_uid: bool) -> Optional[sandbox_fs.FsResult]:
        hide = _hidden_dirs() if self.want("hide") else []
        if drop_uid:
            hide += self.reach
        plan = sandbox_fs.FsPlan(
            writable=self.needs.writable,
            readable=[*self.needs.hard, *self.needs.soft],
            hide=hide,
            read_only=self.want("mount"),
            minimal_dev=self.want("dev"),
            private_shm=self.want("ipc"),
            new_proc="pid" in self.namespaces,
        )
        try:
            return sandbox_fs.apply(plan)
        except OSError as e:
            for layer in ("mount", "hide", "dev", "ipc"):
                if self.want(layer):
                    self.report.set(layer, "refused", f"mount namespace set up failed: {e}")
            return None

    def _credentials(self, drop_uid: bool) -> None:
        try:
            if drop_uid:
                sl.drop_bounding_and_ambient()
                os.setgroups([])
                os.setresgid(sl.NOBODY, sl.NOBODY, sl.NOBODY)
                os.setresuid(sl.NOBODY, sl.NOBODY, sl.NOBODY)
                sl.clear_capabilities()
                sl.prctl(sl.PR_SET_DUMPABLE, 1)  # the uid change made /proc/self root's
            elif self.root and self.want("user"):
                sl.drop_bounding_and_ambient()
                sl.prctl(sl.PR_SET_SECUREBITS, sl.SECUREBITS_LOCKED_DOWN)
                sl.clear_capabilities()
            elif not self.root:
                sl.drop_bounding_and_ambient()
                sl.clear_capabilities()
            sl.prctl(sl.PR_SET_NO_NEW_PRIVS, 1)
        except OSError as e:
            if self.want("user"):
                self.report.set("user", "refused", f"credentials not dropped: {e}")
        if self.want("user"):
            try:
                sl.join_new_session_keyring()
                self.keyring = "a new session keyring"
            except OSError as e:
                self.keyring = f"the inherited session keyring ({e.strerror})"

    # ---- what holds, observed from inside
    def _verify(self, fs: Optional[sandbox_fs.FsResult]) -> None:
        if self.want("user") and not any(layer.name == "user" for layer in self.report.layers):
            self._verify_user()
        if fs is not None:
            self._verify_mounts(fs)
        elif self.want("ipc") and "ipc" in self.namespaces:
            self.report.set("ipc", "partial", "own IPC namespace, but /dev/shm is shared (no mount namespace)")
        if self.want("pid") and "pid" in self.namespaces:
            self._verify_pid(fs)
        if self.want("network") and "network" in self.namespaces:
            self._verify_network()

    def _verify_user(self) -> None:
        st = sl.status_fields()
        uids = [int(u) for u in st.get("Uid", "0").split()]
        caps = {k: int(st.get(k, "1"), 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
        no_caps = not any(caps.values())
        nnp = st.get("NoNewPrivs") == "1"
        where = "" if self.root else f" in a user namespace (uid {self.outer_uid} outside)"
        if uids and all(u != 0 for u in uids) and no_caps and nnp and (self.root or self.outer_uid != 0):
            self.report.set("user", "held", f"uid {os.getuid()}{where}, no capabilities, no_new_privs, {self.keyring}")
        elif uids and all(u != 0 for u in uids) and no_caps and nnp:
            self.report.set(
                "user",
                "partial",
                f"uid {os.getuid()}{where}: root of a user namespace without uid "
                f"{sl.NOBODY}, so files of uid 0 stay open to it; no capabilities, no_new_privs",
            )
        elif no_caps and nnp:
            self.report.set("user", "partial", f"uid 0 kept without capabilities: {self.keep_root or 'unknown'}")
        else:
            left = ", ".join(f"{k}={v:x}" for k, v in caps.items() if v)
            self.report.set("user", "refused", f"uid {uids}, capabilities left: {left or 'none'}, no_new_privs={nnp}")

    def _verify_mounts(self, fs: sandbox_fs.FsResult) -> None:
        private_shm = fs.shm.startswith("/")
        allowed = [*self.needs.writable, *fs.rw]
        if self.want("mount") and not any(layer.name == "mount" for layer in self.report.layers):
            holes = sandbox_fs.writable_holes(allowed)
            if holes:
                self.report.set("mount", "partial", f"still writable: {', '.join(holes[:4])}")
            else:
                self.report.set("mount", "held", f"read-only except {', '.join(self.needs.writable)}" + self.cache_note)
        if self.want("ipc") and not any(layer.name == "ipc" for layer in self.report.layers):
            if "ipc" in self.namespaces and private_shm:
                self.report.set("ipc", "held", "own IPC namespace and a private /dev/shm")
            else:
                self.report.set(
                    "ipc",
                    "partial",
                    f"IPC namespace: {'ipc' in self.namespaces}; /dev/shm: {fs.shm if not private_shm else 'private'}",
                )
        if self.want("hide") and not any(layer.name == "hide" for layer in self.report.layers):
            if fs.not_hidden:
                self.report.set("hide", "partial", f"hidden: {' '.join(fs.hidden)}; not: {', '.join(fs.not_hidden)}")
            else:
                self.report.set("hide", "held", f"only what the job needs is visible in {' '.join(fs.hidden)}")
        if self.want("dev") and not any(layer.name == "dev" for layer in self.report.layers):
            self.report.set("dev", "held", f"/dev holds {fs.dev}")

    def _verify_pid(self, fs: Optional[sandbox_fs.FsResult]) -> None:
        try:
            pids = all_pids()
        except OSError:
            pids = []
        own = os.getpid() == 1 and os.readlink("/proc/self") == "1"
        if own and fs is not None and fs.proc == "new" and self.outer_pid not in pids:
            self.report.set(
                "pid", "held", "own namespace (the job is pid 2 under a minimal init); /proc shows only its processes"
            )
        elif own:
            why = fs.proc if fs is not None else "no mount namespace"
            self.report.set("pid", "partial", f"own pid namespace, but /proc shows the parent's processes ({why})")
        else:
            self.report.set("pid", "refused", f"pid {os.getpid()} after the fork")

    def _verify_network(self) -> None:
        try:
            with open("/proc/self/net/dev", encoding="ascii") as fh:
                names = [line.split(":")[0].strip() for line in fh.read().splitlines()[2:]]
        except OSError as e:
            self.report.set("network", "partial", f"new network namespace, interfaces unknown ({e.strerror})")
            return
        up = [n for n in names if _interface_up(n)]
        if up:
            self.report.set("network", "partial", f"new network namespace, but up: {', '.join(up)}")
        else:
            self.report.set("network", "held", f"new network namespace, no interface up ({', '.join(names)})")


def _interface_up(name: str) -> bool:
    import fcntl
    import socket
    import struct

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            ifreq = struct.pack("16sH14s", name.encode()[:15], 0, b"\0" * 14)
            return bool(struct.unpack("16sH14s", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, ifreq))[1] & _IFF_UP)
    except OSError:
        return False

"""The variant process's sandbox (DESIGN section 6), and killing its whole process tree.

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

import os
import pwd
import re
import select
import signal
import struct
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Iterable, NoReturn, Optional, Sequence

from ..proc import all_pids, parent_of, state_of
from . import sandbox_fs, sandbox_linux as sl

_ALLOWED_NAMES = {"PATH", "LANG", "LANGUAGE", "TZ", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX",
                  "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "KERNELBAND_DEVICE",
                  "KERNELBAND_TIMING_LOCK", "KERNELBAND_LOCAL_DATA_MAX_BYTES", "KERNELBAND_SANDBOX",
                  "KERNELBAND_SANDBOX_SKIP", "CC", "CXX", "SYSTEMROOT"}
_ALLOWED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TRITON_", "OPENBLAS_", "PYTORCH_", "TORCH_")
_CREDENTIAL = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_DUMPABLE = 4
FILE_SIZE_LIMIT = 1 << 30

LAYERS = ("user", "mount", "hide", "dev", "ipc", "pid", "network")
POLICY_ENV, SKIP_ENV, READ_ENV = "KERNELBAND_SANDBOX", "KERNELBAND_SANDBOX_SKIP", "KERNELBAND_SANDBOX_READ"
_HIDDEN = ("/root", "/home", "/tmp", "/var/tmp", "/run")


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


# --------------------------------------------------------------------------- the report
@dataclass
class Layer:
    name: str
    state: str  # "held" | "partial" | "refused" | "skipped"
    detail: str


@dataclass
class SandboxReport:
    """What ``enter`` could do on this machine, one entry per layer (``LAYERS``)."""

    policy: str
    layers: list[Layer] = field(default_factory=list)

    def layer(self, name: str) -> Layer:
        return next(l for l in self.layers if l.name == name)

    def set(self, name: str, state: str, detail: str) -> None:
        self.layers = [l for l in self.layers if l.name != name] + [Layer(name, state, detail)]
        self.layers.sort(key=lambda l: LAYERS.index(l.name))

    @property
    def failed(self) -> list[Layer]:
        return [l for l in self.layers if l.state in ("refused", "partial")]

    @property
    def network(self) -> str:
        """The network layer in the words the judge reports (``isolated: ...`` or ``not isolated: ...``)."""
        net = self.layer("network")
        return f"isolated: {net.detail}" if net.state == "held" else f"not isolated: {net.detail}"

    def summary(self) -> str:
        return "; ".join(f"{l.name} {l.state}: {l.detail}" for l in self.layers)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class SandboxRefused(SystemExit):
    """A layer the OS refused under ``KERNELBAND_SANDBOX=strict``: the variant process
    exits (code 3) before any job code runs; the reason is on its stderr."""

    def __init__(self, message: str) -> None:
        super().__init__(3)
        self.message = message


# --------------------------------------------------------------------------- inside the child
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


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def isolate_network() -> str:
    """Move this (still single-threaded) process into a new network namespace (as root,
    or inside a new user namespace mapping our own uid). Returns a short description of
    what was possible. Used by the wrapper (``exec_isolated``), which must stay our uid."""
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
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDONLY | os.O_CLOEXEC, 0o644)
        try:
            st = os.fstat(fd)
            if st.st_uid == os.geteuid() and not st.st_mode & 0o004:
                os.fchmod(fd, st.st_mode | 0o444)
        finally:
            os.close(fd)
    except OSError:
        pass
    return [path]


def _needs(writable: Sequence[str], readable: Sequence[str]) -> _Needs:
    import sysconfig

    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    hard = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.__file__), package_root,
            os.path.dirname(os.path.realpath(sys.executable))]
    hard += [sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    hard += [d for d in (_package_dir(n) for n in ("torch", "triton", "numpy")) if d]
    hard += [*readable, *_env_paths(READ_ENV), *_timing_lock()]
    devices = [f"/dev/{n}" for n in sandbox_fs.dev_entries() if n.startswith("nvidia")]
    # what CUDA may talk to below hidden directories: an MPS server's pipes, the
    # persistence daemon's socket (kept visible where they exist)
    cuda = [os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), "/run/nvidia-persistenced"]
    soft = [*(p or os.getcwd() for p in sys.path), *cuda]
    return _Needs(sandbox_fs.real(writable), sandbox_fs.real(hard), sandbox_fs.real(soft),
                  [d for d in devices if not os.path.isdir(d)])


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


def _hand_over(paths: Sequence[str], uid: int, gid: int) -> None:
    """Give the job's own directories to the uid it will run as."""
    for top in paths:
        os.lchown(top, uid, gid)
        for root, dirs, files in os.walk(top):
            for name in dirs + files:
                os.lchown(os.path.join(root, name), uid, gid)


def _single_threaded() -> None:
    """A namespace of users or mounts needs a single-threaded caller: a process with
    threads forks first, and the (single-threaded) child goes on."""
    if sl.thread_count() > 1:
        _fork_and_relay()


@dataclass
class _Relay:
    """The child's ends of the pipes to its relay: ``alive`` reaches end-of-file when
    the relay dies; on ``status`` the pid namespace's init reports how the job ended."""

    alive: int
    status: int


def _fork_and_relay() -> _Relay:
    """Fork: the parent relays (never returns), the child returns its pipe ends."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    alive_r, alive_w = os.pipe()
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        os.close(status_r)
        return _Relay(alive_r, status_w)
    os.close(alive_r)
    os.close(status_w)
    _relay(pid, status_r)


def _exit_like(status: int) -> NoReturn:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        except (OSError, ValueError):  # SIGKILL and SIGSTOP keep their default anyway
            pass
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _stdio_to_null() -> None:
    """The job holds its pipes alone: end-of-file comes when it ends."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def _relay(child: int, status_r: int) -> NoReturn:
    """Stand in for ``child`` outside its namespaces: a termination becomes SIGKILL to
    it (which takes its whole pid namespace), and it exits as the job did."""
    def stop(_signum: int, _frame: object) -> None:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, stop)
    _stdio_to_null()
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            os._exit(1)
    try:
        reported = os.read(status_r, 4)
    except OSError:
        reported = b""
    _exit_like(struct.unpack("i", reported)[0] if len(reported) == 4 else status)


def _die_with(relay: Optional[_Relay]) -> None:
    """SIGKILL this process when the relay outside its pid namespace dies (set after the
    uid change, which clears it); the pipe tells whether the relay died before that."""
    if relay is None:
        return
    sl.prctl(sl.PR_SET_PDEATHSIG, signal.SIGKILL)
    ready, _, _ = select.select([relay.alive], [], [], 0)
    if ready:
        os._exit(1)
    os.close(relay.alive)


def _become_init(relay: Optional[_Relay]) -> None:
    """As pid 1 of the namespace, fork the job (pid 2, with the usual signal semantics:
    an init ignores the signals it sends itself, even SIGKILL), then reap orphans until
    it ends and report its status to the relay; the namespace dies with pid 1."""
    if relay is None:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    job = os.fork()
    if job == 0:
        os.close(relay.status)  # the job must not be able to forge its own status
        return
    sl.prctl(_PR_SET_DUMPABLE, 0)  # nor trace its init to reach that pipe
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, lambda _s, _f: os.kill(job, signal.SIGKILL))
    _stdio_to_null()
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == job:
            try:
                os.write(relay.status, struct.pack("i", status))
            finally:
                os._exit(0)


def _settings(policy: Optional[str], skip: Optional[Iterable[str]]) -> tuple[str, set[str]]:
    policy = (policy or os.environ.get(POLICY_ENV) or "best-effort").strip().lower()
    if policy not in ("strict", "best-effort"):
        policy = "strict"  # an unknown word never weakens the sandbox
    if skip is None:
        skip = [s.strip() for s in os.environ.get(SKIP_ENV, "").split(",")]
    return policy, {s for s in skip if s in LAYERS}


def enter(writable: Optional[Sequence[str]] = None, *, readable: Sequence[str] = (), policy: Optional[str] = None,
          skip: Optional[Iterable[str]] = None) -> SandboxReport:
    """Put this process in the sandbox; call it first thing, before torch or any job
    code is imported (single-threaded, or it forks once more to be). ``writable`` are
    the directories it may write (default: the cwd, the job's private directory);
    ``readable`` are paths it must read besides Python, the package and
    ``KERNELBAND_SANDBOX_READ``. ``policy`` and ``skip`` default to the environment.
    Returns in the sandboxed process only (the relay outside exits with its status).
    Raises ``SandboxRefused`` under the strict policy when a layer did not hold."""
    policy, skipped = _settings(policy, skip)
    report = SandboxReport(policy)
    apply_limits()
    if os.environ.get("KERNELBAND_SANDBOX_NETWORK", "1") == "0":
        outer = os.environ.get("KERNELBAND_SANDBOX_OUTER", "")
        skipped.add("network")
        state = "held" if outer.startswith("isolated") else "refused"
        report.set("network", state, f"{outer or 'disabled'} (entered by the wrapper)")
    for name in skipped:
        if name not in {l.name for l in report.layers}:
            report.set(name, "skipped", "left out by the judge")
    cwd = os.getcwd()
    writable = list(writable) if writable is not None else [cwd]
    cache = os.environ.get("TRITON_CACHE_DIR")
    cache_note = ""
    if cache and not any(sandbox_fs.is_under(os.path.realpath(cache), os.path.realpath(w)) for w in writable):
        cache_note = f"; the Triton cache {cache} is outside the writable directories (read-only)"
    wanted = [l for l in LAYERS if l not in skipped]
    if not sl.available():
        for name in wanted:
            report.set(name, "refused", "namespaces are not available on this OS")
        return _finish(report)
    _single_threaded()
    _Setup(report, wanted, writable, readable, cwd, cache_note).run()
    return _finish(report)


def _finish(report: SandboxReport) -> SandboxReport:
    for name in LAYERS:  # a layer no step reported on did not hold
        if name not in {l.name for l in report.layers}:
            report.set(name, "refused", "not set up: an earlier step failed")
    if report.policy == "strict" and report.failed:
        first = report.failed[0]
        message = f"{first.name} {first.state}: {first.detail}"
        print(f"kernelband-sandbox: refused under {POLICY_ENV}=strict: {message}", file=sys.stderr, flush=True)
        raise SandboxRefused(message)
    return report


class _Setup:
    """One run of ``enter``'s steps; each records its layer in the report."""

    def __init__(self, report: SandboxReport, wanted: list[str], writable: list[str], readable: Sequence[str],
                 cwd: str, cache_note: str) -> None:
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
        need_mounts = any(self.want(l) for l in ("mount", "hide", "dev", "ipc", "pid")) or bool(self.reach)
        for flag, name, needed in ((sl.CLONE_NEWNS, "mount", need_mounts), (sl.CLONE_NEWIPC, "ipc", self.want("ipc")),
                                   (sl.CLONE_NEWPID, "pid", self.want("pid")),
                                   (sl.CLONE_NEWNET, "network", self.want("network"))):
            if not needed:
                continue
            try:
                sl.unshare(flag)
                self.namespaces.add(name)
            except OSError as e:
                self._refuse_namespace(name, e.strerror)
        relay = _fork_and_relay() if "pid" in self.namespaces else None
        self._inside(relay)
        _become_init(relay)

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

    def _refuse_namespace(self, name: str, why: str) -> None:
        if name == "mount":
            for layer in ("mount", "hide", "dev", "ipc"):
                if self.want(layer):
                    self.report.set(layer, "refused", f"no mount namespace ({why})")
        elif self.want(name):
            self.report.set(name, "refused", f"no {name} namespace ({why})")

    # ---- inside every namespace (after the fork: pid 1 of its own pid namespace)
    def _inside(self, relay: Optional[_Relay]) -> None:
        if self.reach and "mount" not in self.namespaces:
            self.keep_root = "no mount namespace to reach what the job needs"
        drop_uid = self.root and self.want("user") and not self.keep_root
        if drop_uid:
            try:
                _hand_over(self.needs.writable, sl.NOBODY, sl.NOBODY)
            except OSError as e:
                drop_uid = False
                self.keep_root = f"the job directory could not be handed over ({e.strerror})"
        fs = self._file_system(drop_uid) if "mount" in self.namespaces else None
        os.chdir(self.cwd)  # through the new mounts: the old cwd is on a read-only one now
        self._credentials(drop_uid)
        _die_with(relay)
        self._verify(fs)

    def _file_system(self, drop_uid: bool) -> Optional[sandbox_fs.FsResult]:
        hide = _hidden_dirs() if self.want("hide") else []
        if drop_uid:
            hide += self.reach
        plan = sandbox_fs.FsPlan(writable=self.needs.writable, readable=[*self.needs.hard, *self.needs.soft],
                                 hide=hide, read_only=self.want("mount"), minimal_dev=self.want("dev"),
                                 private_shm=self.want("ipc"), new_proc="pid" in self.namespaces)
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
                sl.prctl(_PR_SET_DUMPABLE, 1)  # the uid change made /proc/self root's
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
        if self.want("user") and not any(l.name == "user" for l in self.report.layers):
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
            self.report.set("user", "held", f"uid {os.getuid()}{where}, no capabilities, no_new_privs, "
                            f"{self.keyring}")
        elif uids and all(u != 0 for u in uids) and no_caps and nnp:
            self.report.set("user", "partial", f"uid {os.getuid()}{where}: root of a user namespace without uid "
                            f"{sl.NOBODY}, so files of uid 0 stay open to it; no capabilities, no_new_privs")
        elif no_caps and nnp:
            self.report.set("user", "partial", f"uid 0 kept without capabilities: {self.keep_root or 'unknown'}")
        else:
            left = ", ".join(f"{k}={v:x}" for k, v in caps.items() if v)
            self.report.set("user", "refused", f"uid {uids}, capabilities left: {left or 'none'}, no_new_privs={nnp}")

    def _verify_mounts(self, fs: sandbox_fs.FsResult) -> None:
        private_shm = fs.shm.startswith("/")
        allowed = [*self.needs.writable, *fs.rw]
        if self.want("mount") and not any(l.name == "mount" for l in self.report.layers):
            holes = sandbox_fs.writable_holes(allowed)
            if holes:
                self.report.set("mount", "partial", f"still writable: {', '.join(holes[:4])}")
            else:
                self.report.set("mount", "held", f"read-only except {', '.join(self.needs.writable)}" + self.cache_note)
        if self.want("ipc") and not any(l.name == "ipc" for l in self.report.layers):
            if "ipc" in self.namespaces and private_shm:
                self.report.set("ipc", "held", "own IPC namespace and a private /dev/shm")
            else:
                self.report.set("ipc", "partial", f"IPC namespace: {'ipc' in self.namespaces}; /dev/shm: "
                                f"{fs.shm if not private_shm else 'private'}")
        if self.want("hide") and not any(l.name == "hide" for l in self.report.layers):
            if fs.not_hidden:
                self.report.set("hide", "partial", f"hidden: {' '.join(fs.hidden)}; not: {', '.join(fs.not_hidden)}")
            else:
                self.report.set("hide", "held", f"only what the job needs is visible in {' '.join(fs.hidden)}")
        if self.want("dev") and not any(l.name == "dev" for l in self.report.layers):
            self.report.set("dev", "held", f"/dev holds {fs.dev}")

    def _verify_pid(self, fs: Optional[sandbox_fs.FsResult]) -> None:
        try:
            pids = all_pids()
        except OSError:
            pids = []
        own = os.getpid() == 1 and os.readlink("/proc/self") == "1"
        if own and fs is not None and fs.proc == "new" and self.outer_pid not in pids:
            self.report.set("pid", "held", "own namespace (the job is pid 2 under a minimal init); /proc shows "
                            "only its processes")
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

"""Each layer of the variant process's OS sandbox, proven with code sent straight to it
(no screen, no judge: as if the screen had failed). Every attack is first run without
the sandbox, in a throwaway job directory, and must succeed there: the sandboxed run
failing is then the sandbox's doing, and the side effects are checked on the real file
system and process table, not only in what the payload says.

A layer the OS refuses here is skipped with the reason (never passed vacuously);
``KERNELBAND_SANDBOX=strict`` is checked to turn such a refusal into an error.
"""
from __future__ import annotations

import ctypes
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.sandboxed import BOOT, job_dir, parse, run_payload, variant_env

from kernelband.worker import sandbox, sandbox_fs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux namespaces")

SECRET = "sk-kernelband-layer-secret-" + uuid.uuid4().hex


def require(run, *layers: str) -> None:
    """Skip (with what the OS said) when this machine refused a layer the test is about."""
    assert run.report is not None, run.stderr[-3000:]
    missing = [layer for layer in run.report["layers"] if layer["name"] in layers and layer["state"] != "held"]
    if missing:
        pytest.skip("; ".join(f"{layer['name']} {layer['state']}: {layer['detail']}" for layer in missing))


@pytest.fixture(params=["started as root", "unprivileged (user namespace)"])
def entry(request) -> list[str]:
    """How the variant process starts: as root (it drops to uid 65534 for real), or as
    a user without that uid (here: root of a user namespace mapping only itself, where
    ``enter`` makes a nested user namespace that maps 65534 onto it)."""
    if request.param.startswith("started as root"):
        if os.geteuid() != 0:
            pytest.skip("not root here")
        return []
    if not shutil.which("unshare") or subprocess.run(["unshare", "--user", "--map-root-user", "true"]).returncode:
        pytest.skip("user namespaces are not available here")
    return ["unshare", "--user", "--map-root-user"]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# --------------------------------------------------------------------------- writing outside
WRITE = textwrap.dedent("""
    import json, os
    targets, trusted = json.loads(argv[0]), json.loads(argv[1])

    def attempt(name, fn):
        try:
            fn()
            result[name] = "done"
        except OSError as e:
            result[name] = "refused: " + str(e.strerror)

    for where, path in targets.items():
        attempt("create in " + where, lambda p=path: open(p, "w").write("escaped"))
        attempt("mkdir in " + where, lambda p=path: os.mkdir(p + ".d"))
        attempt("symlink in " + where, lambda p=path: os.symlink("/etc/passwd", p + ".lnk"))
    attempt("append to trusted", lambda: open(trusted["a"], "a").write("poison"))
    attempt("truncate trusted", lambda: os.truncate(trusted["a"], 0))
    attempt("chmod trusted", lambda: os.chmod(trusted["a"], 0o777))
    attempt("utime trusted", lambda: os.utime(trusted["a"], (0, 0)))
    attempt("hard link to trusted", lambda: os.link(trusted["a"], trusted["a"] + ".hard"))
    attempt("rename trusted", lambda: os.rename(trusted["b"], trusted["b"] + ".moved"))
    attempt("unlink trusted", lambda: os.unlink(trusted["c"]))
    attempt("job dir", lambda: open("job-file.txt", "w").write("fine"))
    attempt("triton cache", lambda: open(os.path.join(os.environ["TRITON_CACHE_DIR"], "entry"), "w").write("fine"))
    attempt("home (= job dir)", lambda: open(os.path.expanduser("~/.triton-like"), "w").write("fine"))
""")


class Targets:
    """Places outside the job directory, and a stand-in for the judge's trusted Triton
    cache (a copy of what original-only jobs compiled) with files to poison."""

    def __init__(self) -> None:
        name = unique("kb-escape")
        home = pwd.getpwuid(os.getuid()).pw_dir
        self.judge_dir = tempfile.mkdtemp(prefix="kernelband-")
        self.trusted = os.path.join(self.judge_dir, "triton-cache-trusted")
        os.makedirs(self.trusted)
        self.paths = {"/tmp": f"/tmp/{name}", "the repository": str(REPO / name), "the parent's HOME": f"{home}/{name}",
                      "/var/tmp": f"/var/tmp/{name}", "/dev/shm": f"/dev/shm/{name}",
                      "the trusted Triton cache": os.path.join(self.trusted, name)}
        self.files = {k: os.path.join(self.trusted, f"kernel-{k}.cubin") for k in "abc"}
        self.reset()

    def reset(self) -> None:
        self.clean()
        os.makedirs(self.trusted, exist_ok=True)
        for path in self.files.values():
            with open(path, "w") as fh:
                fh.write("trusted binary")
            os.chmod(path, 0o644)
            os.utime(path, (1_000_000, 1_000_000))

    def state(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for path in self.files.values():
            st = os.stat(path)
            out[path] = (Path(path).read_text(), stat.S_IMODE(st.st_mode), st.st_mtime, st.st_nlink)
        out["entries"] = sorted(os.listdir(self.trusted))
        return out

    def leftovers(self) -> list[str]:
        return [p + s for p in self.paths.values() for s in ("", ".d", ".lnk") if os.path.lexists(p + s)]

    def clean(self) -> None:
        for path in self.leftovers():
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            else:
                os.unlink(path)
        shutil.rmtree(self.trusted, ignore_errors=True)

    def args(self) -> list[str]:
        return [json.dumps(self.paths), json.dumps(self.files)]


@pytest.fixture
def targets():
    t = Targets()
    yield t
    t.clean()
    shutil.rmtree(t.judge_dir, ignore_errors=True)


def test_unsandboxed_the_write_attacks_succeed(targets):
    run = run_payload(WRITE, sandboxed=False, args=targets.args())
    assert run.returncode == 0, run.stderr[-2000:]
    assert set(run.result.values()) == {"done"}, run.result
    assert len(targets.leftovers()) == 3 * len(targets.paths)


@pytest.mark.parametrize("skip", ["hide", ""], ids=["read-only, everything visible", "read-only and hidden"])
def test_nothing_outside_the_job_dir_is_writable(targets, skip, entry):
    """Visible (the hide layer left out) or hidden, nothing outside the job directory
    changes: no file, directory or link created in /tmp, the repository, the parent's
    HOME, /var/tmp, the real /dev/shm or the trusted Triton cache; no trusted file
    appended, truncated, re-moded, re-dated, linked, renamed or removed. The job
    directory, its Triton cache and HOME stay writable."""
    before = targets.state()
    run = run_payload(WRITE, sandboxed=True, args=targets.args(), skip=skip, wrapper=entry)
    assert run.returncode == 0, run.stderr[-3000:]
    require(run, "mount")
    assert targets.leftovers() == []
    assert targets.state() == before
    for name in ("job dir", "triton cache", "home (= job dir)"):
        assert run.result[name] == "done", (name, run.result)
    escaped = {k: v for k, v in run.result.items() if v == "done" and k not in ("job dir", "triton cache", "home (= job dir)")}
    # the private /dev/shm takes writes that vanish with the job
    assert set(escaped) <= {"create in /dev/shm", "mkdir in /dev/shm", "symlink in /dev/shm"}, escaped


NESTED = textwrap.dedent("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    target = argv[0]

    def step(name, ok):
        result[name] = "done" if ok else "refused: " + os.strerror(ctypes.get_errno())
        return ok

    uid, gid = os.getuid(), os.getgid()
    if step("new user+mount namespace", libc.unshare(0x10000000 | 0x00020000) == 0):
        for f, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            try:
                open(f"/proc/self/{f}", "w").write(text)
            except OSError:
                pass
    step("remount / read-write", libc.mount(None, b"/", None, 32 | 4096, None) == 0)
    step("unmount what hides /tmp", libc.umount2(b"/tmp", 2) == 0)
    step("remount /tmp read-write", libc.mount(None, b"/tmp", None, 32 | 4096, None) == 0)
    try:
        open(target, "w").write("escaped")
        result["write"] = "done"
    except OSError as e:
        result["write"] = "refused: " + str(e.strerror)
""")


def test_a_nested_namespace_cannot_undo_the_view():
    """From inside, a new user+mount namespace (allowed to anyone) gives the payload
    root's capabilities over a copy of its view: the copied mounts are locked, so it
    can neither remount them read-write nor unmount what hides the real /tmp."""
    target = f"/tmp/{unique('kb-nested')}"
    try:
        proof = run_payload(NESTED, sandboxed=False, args=[target])
        assert proof.result["write"] == "done" and os.path.exists(target), proof.result
        os.unlink(target)
        run = run_payload(NESTED, sandboxed=True, args=[target])
        require(run, "mount", "hide")
        assert run.result["write"].startswith("refused"), run.result
        assert not os.path.exists(target)
        for step in ("remount / read-write", "unmount what hides /tmp", "remount /tmp read-write"):
            assert run.result[step].startswith("refused"), (step, run.result)
    finally:
        if os.path.exists(target):
            os.unlink(target)


# --------------------------------------------------------------------------- reading secrets
READ = textwrap.dedent("""
    import os
    secret, files, ancestor = argv[0], argv[1:-1], argv[-1]
    found = []
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            if secret.encode() in open(f"/proc/{pid}/environ", "rb").read():
                found.append(f"/proc/{pid}/environ")
        except OSError:
            pass
    try:
        text = open(f"/proc/{ancestor}/environ", "rb").read()
        result["ancestor environ"] = "read, secret inside" if secret.encode() in text else "read, no secret"
    except OSError as e:
        result["ancestor environ"] = "refused: " + str(e.strerror)
    for path in files:
        try:
            result[path] = "read, secret inside" if secret in open(path).read() else "read, no secret"
        except OSError as e:
            result[path] = "refused: " + str(e.strerror)
    result["environ with the secret"] = found
    result["own environ has it"] = secret in repr(dict(os.environ))
    result["pid"], result["ppid"] = os.getpid(), os.getppid()
    result["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
""")


@pytest.fixture
def secret_files():
    """World-readable key files where keys are kept: the parent's HOME, /tmp, /var/tmp."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    paths = [f"{home}/.{unique('kb-key')}", f"/tmp/{unique('kb-key')}", f"/var/tmp/{unique('kb-key')}"]
    for p in paths:
        with open(p, "w") as fh:
            fh.write(f"OPENAI_API_KEY={SECRET}\n")
        os.chmod(p, 0o644)
    yield paths
    for p in paths:
        os.unlink(p)


def test_secrets_of_ancestors_and_their_files_stay_out_of_reach(secret_files, entry):
    """The judge's ancestors (the editor, the session) hold API keys in their
    environment and in files: unsandboxed, the payload reads them from
    /proc/<ancestor>/environ and the key files; sandboxed, no ancestor is in its
    /proc, and the files are hidden."""
    ancestor = {"OPENAI_API_KEY": SECRET, "KERNELBAND_API_KEY": SECRET}
    proof = run_payload(READ, sandboxed=False, args=[SECRET, *secret_files], ancestor_env=ancestor)
    assert proof.result["ancestor environ"] == "read, secret inside", proof.result
    assert proof.result["environ with the secret"], proof.result
    assert all(proof.result[p] == "read, secret inside" for p in secret_files), proof.result
    assert proof.result["own environ has it"] is False  # the scrubbed environment alone

    run = run_payload(READ, sandboxed=True, args=[SECRET, *secret_files], ancestor_env=ancestor, wrapper=entry)
    require(run, "pid", "hide")
    assert run.result["environ with the secret"] == [] and run.result["own environ has it"] is False
    assert run.result["ancestor environ"].startswith("refused"), run.result
    for p in secret_files:
        assert run.result[p].startswith("refused"), (p, run.result[p])
    # the job is pid 2 under the namespace's minimal init: nothing else exists for it
    assert run.result["pid"] == 2 and run.result["ppid"] == 1 and run.result["pids"] == [1, 2], run.result
    assert SECRET not in run.stdout + run.stderr


# --------------------------------------------------------------------------- user
USER = textwrap.dedent("""
    import os
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
    result["uids"] = list(os.getresuid())
    result["gids"] = list(os.getresgid())
    result["groups"] = os.getgroups()
    result["caps"] = {k: int(status[k].strip(), 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    result["no_new_privs"] = status["NoNewPrivs"].strip()
    try:
        os.setuid(0)
        result["setuid 0"] = "done"
    except OSError as e:
        result["setuid 0"] = "refused: " + str(e.strerror)
    disks = sorted(d for d in os.listdir("/sys/block") if os.path.exists("/dev/" + d) and not d.startswith(("loop", "ram")))
    result["disk"] = disks[0] if disks else None
    if disks:
        try:
            with open("/dev/" + disks[0], "rb") as fh:
                result["read raw disk"] = "done, %d bytes" % len(fh.read(512))
        except OSError as e:
            result["read raw disk"] = "refused: " + str(e.strerror)
    open("mine", "w").close()
    try:
        os.chown("mine", 0, 0)
        result["chown to root"] = "done"
    except OSError as e:
        result["chown to root"] = "refused: " + str(e.strerror)
""")


def test_an_unprivileged_uid_without_capabilities(entry):
    """uid not 0, no capability in any set, no_new_privs, cannot become root again,
    cannot give a file to root, and (with /dev left whole: the uid alone) cannot read a
    raw disk, which root reads without the sandbox."""
    proof = run_payload(USER, sandboxed=False)
    run = run_payload(USER, sandboxed=True, skip="dev", wrapper=entry)
    require(run, "user")
    assert all(u != 0 for u in run.result["uids"] + run.result["gids"]), run.result
    assert run.result["groups"] in ([], [65534]) and set(run.result["caps"].values()) == {0}, run.result
    assert run.result["no_new_privs"] == "1" and run.result["setuid 0"].startswith("refused"), run.result
    assert run.result["chown to root"].startswith("refused"), run.result
    if os.geteuid() == 0:  # the proof: root, all capabilities, reads the disk
        assert proof.result["uids"] == [0, 0, 0] and proof.result["caps"]["CapEff"] != 0, proof.result
        assert proof.result["chown to root"] == "done", proof.result
        if proof.result.get("disk") and proof.result["read raw disk"].startswith("done"):
            assert run.result["read raw disk"].startswith("refused"), run.result


DEV = textwrap.dedent("""
    import os
    result["entries"] = sorted(os.listdir("/dev"))
    for name in ("null", "zero", "urandom"):
        with open("/dev/" + name, "rb+" if name == "null" else "rb") as fh:
            if name == "null":
                fh.write(b"x")
            result[name] = len(fh.read(8)) if name != "null" else "written"
    for name in argv:
        try:
            open("/dev/" + name, "rb").close()
            result[name] = "opened"
        except OSError as e:
            result[name] = "refused: " + str(e.strerror)
    try:
        os.mknod("/dev/kb-node", 0o600 | 0o020000, os.makedev(1, 3))
        result["mknod"] = "done"
    except OSError as e:
        result["mknod"] = "refused: " + str(e.strerror)
""")


def test_dev_holds_only_what_cuda_and_python_need():
    disks = sorted(d for d in os.listdir("/sys/block") if os.path.exists(f"/dev/{d}"))[:2]
    others = [n for n in ("mem", "kmsg", "port", "fuse", "kvm", "net/tun", "ptmx", "tty") if os.path.exists(f"/dev/{n}")]
    try:
        proof = run_payload(DEV, sandboxed=False, args=disks + others)
    finally:
        made = os.path.lexists("/dev/kb-node")
        if made:
            os.unlink("/dev/kb-node")
    assert any(proof.result[d] == "opened" for d in disks + others), proof.result
    assert proof.result["mknod"] == "done" and made or os.geteuid() != 0, proof.result
    run = run_payload(DEV, sandboxed=True, args=disks + others)
    require(run, "dev")
    assert set(run.result["entries"]) <= {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout",
                                          "stderr", "shm"} | {e for e in run.result["entries"] if e.startswith("nvidia")}
    assert run.result["null"] == "written" and run.result["zero"] == 8 and run.result["urandom"] == 8, run.result
    for name in disks + others + ["mknod"]:
        assert run.result[name].startswith("refused"), (name, run.result[name])
    assert not os.path.exists("/dev/kb-node")


# --------------------------------------------------------------------------- network
NET = textwrap.dedent("""
    import socket
    port, abstract, path = int(argv[0]), argv[1], argv[2]

    def attempt(name, family, address):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(3)
                s.connect(address)
                s.sendall(b"hello from the variant")
            result[name] = "connected"
        except OSError as e:
            result[name] = "refused: " + str(e.strerror or e)

    attempt("tcp 127.0.0.1", socket.AF_INET, ("127.0.0.1", port))
    attempt("abstract unix socket", socket.AF_UNIX, "\\0" + abstract)
    attempt("unix socket file", socket.AF_UNIX, path)
    try:
        socket.getaddrinfo("example.com", 443)
        result["dns"] = "resolved"
    except OSError as e:
        result["dns"] = "refused: " + str(e)
""")


class Listeners:
    """A TCP server on 127.0.0.1, an abstract Unix socket and a Unix socket file (in
    /tmp, mode 0777): what a local agent, daemon or the judge might listen on."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.abstract_name = unique("kb-abstract")
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind("\0" + self.abstract_name)
        self.dir = tempfile.mkdtemp(prefix="kb-sock-")
        os.chmod(self.dir, 0o777)
        self.path = os.path.join(self.dir, "agent.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.path)
        os.chmod(self.path, 0o777)
        self.threads = []
        for s in (self.tcp, self.abstract, self.unix):
            s.listen(4)
            s.settimeout(0.2)
            t = threading.Thread(target=self._serve, args=(s,), daemon=True)
            t.start()
            self.threads.append(t)
        self.stop = False

    def _serve(self, s: socket.socket) -> None:
        while not getattr(self, "stop", False):
            try:
                conn, _ = s.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(100))
                except OSError:
                    pass

    def args(self) -> list[str]:
        return [str(self.tcp.getsockname()[1]), self.abstract_name, self.path]

    def close(self) -> None:
        self.stop = True
        for t in self.threads:
            t.join(2)
        for s in (self.tcp, self.abstract, self.unix):
            s.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def test_no_network_not_even_local_servers():
    listeners = Listeners()
    try:
        proof = run_payload(NET, sandboxed=False, args=listeners.args())
        assert [proof.result[k] for k in ("tcp 127.0.0.1", "abstract unix socket", "unix socket file")] == \
            ["connected"] * 3, proof.result
        time.sleep(0.5)
        assert listeners.received.count(b"hello from the variant") == 3
        listeners.received.clear()
        run = run_payload(NET, sandboxed=True, args=listeners.args())
        require(run, "network")
        for name in ("tcp 127.0.0.1", "abstract unix socket", "unix socket file", "dns"):
            assert run.result[name].startswith("refused"), (name, run.result)
        time.sleep(0.5)
        assert listeners.received == []
    finally:
        listeners.close()


# --------------------------------------------------------------------------- process tree
FORKS = textwrap.dedent("""
    import os, time
    token, linger = argv[0], float(argv[1])

    def sleeper():
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # not holding the job's pipes: only the kill can end it early
            os.dup2(null, fd)
        os.execvp("sleep", ["sleep", token])

    if os.fork() == 0:  # a child that leaves the session and double-forks
        os.setsid()
        if os.fork() == 0:
            sleeper()
        os._exit(0)
    if os.fork() == 0:  # a plain child
        sleeper()
    result["forked"] = True
    time.sleep(linger)
""")


def processes_with(token: str) -> list[int]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if open(f"/proc/{pid}/cmdline", "rb").read() == b"sleep\0" + token.encode() + b"\0":
                state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(pid))
        except OSError:
            pass
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_children_die_with_the_job():
    """Forked, setsid'd and double-forked children: unsandboxed they outlive the job
    (the proof); sandboxed they die with it, as soon as it exits."""
    token = f"86400.{uuid.uuid4().int % 10**9}"
    proof = run_payload(FORKS, sandboxed=False, args=[token, "0"])
    time.sleep(0.5)
    survivors = processes_with(token)
    kill_all(survivors)
    assert proof.result.get("forked") and len(survivors) == 2, (survivors, proof.stderr[-1000:])
    run = run_payload(FORKS, sandboxed=True, args=[token, "0"])
    require(run, "pid")
    time.sleep(0.5)
    left = processes_with(token)
    kill_all(left)
    assert run.result.get("forked") and left == [], left


def start_sandboxed(code: str, args: list[str]) -> tuple[subprocess.Popen, str]:
    workdir = job_dir()
    with open(os.path.join(workdir, "payload.py"), "w") as fh:
        fh.write(code)
    proc = subprocess.Popen([sys.executable, "-c", BOOT, "1", "payload.py", *args], cwd=workdir,
                            env=variant_env(workdir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    return proc, workdir


def wait_for(token: str, n: int, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = processes_with(token)
        if len(found) >= n:
            return found
        time.sleep(0.1)
    return processes_with(token)


@pytest.mark.parametrize("how", ["the process group", "the relay alone"])
def test_killing_the_job_kills_every_process_in_it(how):
    """The judge kills the job's process group (as ``kill_tree`` does): the relay, the
    sandboxed process and everything in its pid namespace go, setsid'd ones included.
    Killing the relay alone takes the namespace with it too (parent-death signal)."""
    token = f"86400.{uuid.uuid4().int % 10**9}"
    proc, workdir = start_sandboxed(FORKS, [token, "120"])
    try:
        found = wait_for(token, 2)
        assert len(found) == 2, (found, proc.stderr.read1(4000) if proc.poll() is not None else "")
        if how == "the process group":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 5
        while processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = processes_with(token)
        kill_all(left)
        assert left == [], f"survived the kill of {how}: {left}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def test_exit_status_and_pipes_pass_through_the_relay():
    code = "import sys\nprint('out-line')\nsys.stderr.write('err-line\\n')\nresult['read'] = sys.stdin.readline().strip()\nraise SystemExit(7)\n"
    workdir = job_dir()
    try:
        with open(os.path.join(workdir, "payload.py"), "w") as fh:
            fh.write(code)
        proc = subprocess.run([sys.executable, "-c", BOOT, "1", "payload.py"], cwd=workdir, env=variant_env(workdir),
                              input="from-stdin\n", capture_output=True, text=True, timeout=60)
        run = parse(proc.returncode, proc.stdout, proc.stderr)
        require(run, "pid")
        assert proc.returncode == 7 and "out-line" in proc.stdout and "err-line" in proc.stderr
        assert run.result["read"] == "from-stdin"
        # the job is not its namespace's init (which ignores signals it sends itself):
        # killing itself, raising SIGTERM or aborting ends it as it would outside
        for code, sig in (("os.kill(os.getpid(), signal.SIGKILL)", signal.SIGKILL),
                          ("signal.raise_signal(signal.SIGTERM)", signal.SIGTERM), ("os.abort()", signal.SIGABRT)):
            with open(os.path.join(workdir, "payload.py"), "w") as fh:
                fh.write(f"import os, signal\n{code}\nresult['survived'] = True\n")
            died = subprocess.run([sys.executable, "-c", BOOT, "1", "payload.py"], cwd=workdir,
                                  env=variant_env(workdir), capture_output=True, text=True, timeout=60)
            assert died.returncode == -sig and "survived" not in died.stdout, (code, died.returncode,
                                                                                died.stderr[-1000:])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------- ipc
IPC = textwrap.dedent("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    key, shm_file = int(argv[0]), argv[1]
    shmid = libc.shmget(ctypes.c_int(key), ctypes.c_size_t(0), ctypes.c_int(0))
    result["sysv segment"] = "attached" if shmid >= 0 else "refused: " + os.strerror(ctypes.get_errno())
    try:
        with open(shm_file, "r+") as fh:
            result["/dev/shm file"] = "read: " + fh.read()
            fh.seek(0)
            fh.write("tampered")
    except OSError as e:
        result["/dev/shm file"] = "refused: " + str(e.strerror)
""")


def test_no_shared_memory_with_other_processes():
    """A System V segment and a /dev/shm file of another process (mode 0666): both
    reachable unsandboxed; sandboxed, the job has its own IPC namespace and /dev/shm.
    Left out on purpose (``skip=ipc``, for CUDA IPC if it needs it), /dev/shm is shared."""
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x4B420000 + uuid.uuid4().int % 0xFFFF
    shmid = libc.shmget(ctypes.c_int(key), ctypes.c_size_t(4096), ctypes.c_int(0o1000 | 0o666))  # IPC_CREAT
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    shm_file = f"/dev/shm/{unique('kb-shm')}"
    Path(shm_file).write_text("judge data")
    os.chmod(shm_file, 0o666)
    try:
        proof = run_payload(IPC, sandboxed=False, args=[str(key), shm_file])
        assert proof.result == {"sysv segment": "attached", "/dev/shm file": "read: judge data"}, proof.result
        Path(shm_file).write_text("judge data")
        run = run_payload(IPC, sandboxed=True, args=[str(key), shm_file])
        require(run, "ipc")
        assert run.result["sysv segment"].startswith("refused") and run.result["/dev/shm file"].startswith("refused")
        assert Path(shm_file).read_text() == "judge data"
        shared = run_payload(IPC, sandboxed=True, args=[str(key), shm_file], skip="ipc")
        assert shared.layers.get("ipc") == "skipped" and shared.result["/dev/shm file"] == "read: judge data", \
            shared.result
        assert shared.held("mount", "dev"), shared.layers
    finally:
        libc.shmctl(ctypes.c_int(shmid), ctypes.c_int(0), None)  # IPC_RMID
        os.unlink(shm_file)


# --------------------------------------------------------------------------- limits
BOMB = textwrap.dedent("""
    import os
    try:
        with open("bomb", "wb") as fh:
            fh.seek((1 << 30) + 4096)
            fh.write(b"x")
        result["write past 1 GiB"] = "done"
    except OSError as e:
        result["write past 1 GiB"] = "refused: " + str(e.strerror)
    finally:
        if os.path.exists("bomb"):
            os.unlink("bomb")
""")


def test_a_file_size_bomb_is_capped():
    proof = run_payload(BOMB, sandboxed=False)
    assert proof.result["write past 1 GiB"] == "done", proof.result
    run = run_payload(BOMB, sandboxed=True)
    assert run.result["write past 1 GiB"] == "refused: File too large", run.result


# --------------------------------------------------------------------------- what must keep working
TRITON = textwrap.dedent('''
    import os, sys
    import torch, triton, triton.language as tl

    @triton.jit
    def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, alpha * x + y, mask=mask)

    x, y = torch.randn(3001), torch.randn(3001)
    out = torch.empty_like(x)
    axpy_kernel[(triton.cdiv(3001, 128),)](x, y, out, 0.5, 3001, BLOCK_SIZE=128)
    result["kernel matches torch"] = bool(torch.allclose(out, 0.5 * x + y))
    result["interpreted"] = os.environ.get("TRITON_INTERPRET")
    # what Triton does for a GPU launcher: C compiled by the system compiler against
    # Python's headers into the job's Triton cache, then loaded
    from triton.runtime import build
    src = """
    #include <Python.h>
    static PyObject* answer(PyObject* self, PyObject* args) { return PyLong_FromLong(42); }
    static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
    static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "kb_probe", NULL, -1, methods};
    PyMODINIT_FUNC PyInit_kb_probe(void) { return PyModule_Create(&def); }
    """
    if hasattr(build, "compile_module_from_src"):
        mod = build.compile_module_from_src(src, "kb_probe")
        result["c module"] = mod.answer()
        cached = [f for _r, _d, fs in os.walk(os.environ["TRITON_CACHE_DIR"]) for f in fs]
        result["cache entries"] = len(cached)
    result["home"] = os.path.expanduser("~")
    # the judge's GPU timing lock, taken shared while harnesses run, in a read-only view
    from kernelband.worker.timing import gpu_lock
    with gpu_lock(exclusive=False):
        result["timing lock"] = "held shared"
''')


def test_the_job_dir_triton_cache_and_a_real_triton_kernel_work_inside():
    lock = f"/tmp/{unique('kb-gpu-lock')}"
    try:
        run = run_payload(TRITON, sandboxed=True, timeout=300, extra_env={"KERNELBAND_TIMING_LOCK": lock})
    finally:
        if os.path.exists(lock):
            os.unlink(lock)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.result["timing lock"] == "held shared", run.result
    assert run.result["kernel matches torch"] is True and run.result["interpreted"] == "1", run.result
    if "c module" in run.result:
        assert run.result["c module"] == 42 and run.result["cache entries"] >= 1, run.result
    assert os.path.basename(run.result["home"]).startswith("kernelband-variant-")
    assert run.held(*sandbox.LAYERS) or pytest.skip(str(run.layers))


def test_enter_from_a_forked_child_of_a_process_with_threads_and_torch():
    """Like the zygote: torch and triton imported (never CUDA), threads running; a
    forked child enters the sandbox (a multi-threaded caller forks once more, since
    user and mount namespaces need a single thread)."""
    code = textwrap.dedent(r"""
        import json, os, sys, threading, time
        import torch, triton
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        from kernelband.worker import sandbox
        threaded = sandbox.sandbox_linux.thread_count() if hasattr(sandbox, "sandbox_linux") else None
        pid = os.fork()
        if pid == 0:
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()  # threads in the child too
            report = sandbox.enter()
            print("KB-REPORT " + json.dumps(report.to_dict()), file=sys.stderr, flush=True)
            print("KB-RESULT " + json.dumps({"uid": os.getuid(), "pid": os.getpid(), "sum": float(torch.ones(4).sum())}),
                  flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
    """)
    workdir = job_dir()
    try:
        proc = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=variant_env(workdir), capture_output=True,
                              text=True, timeout=300)
        run = parse(proc.returncode, proc.stdout, proc.stderr)
        assert proc.returncode == 0, proc.stderr[-3000:]
        require(run, "user", "mount", "pid", "network")
        assert run.result["sum"] == 4.0 and run.result["pid"] == 2 and run.result["uid"] != 0, run.result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------- the escape corpus, unscreened
ESCAPES = REPO / "tests" / "redteam" / "escapes"
# cheap ones (no shell or network work) that create their marker when nothing stops them
PROOF = ("e01_getattr_alias", "e12_module_alias_assign", "e25_collect_env_run", "e34_dunder_import",
         "e41_tensor_tofile", "e46_format_globals_env", "e61_tensor_method_patch")
CORPUS = textwrap.dedent("""
    import importlib.util, json, torch
    for name, path in json.loads(argv[0]).items():
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            mod.axpy(0.5, torch.randn(8), torch.randn(8))
            result[name] = "ran"
        except BaseException as e:  # a payload may raise after (or instead of) its side effect
            result[name] = type(e).__name__ + ": " + str(e)[:200]
""")


@pytest.mark.parametrize("skip", ["hide", ""], ids=["markers visible, read-only", "markers hidden"])
def test_the_escape_corpus_unscreened_leaves_no_side_effect(skip):
    """Every payload of tests/redteam/escapes, the screen skipped, run in the sandbox:
    none creates its marker (nor any file beside it). A few create theirs unsandboxed."""
    payloads = sorted(ESCAPES.glob("e*.py"))
    assert len(payloads) >= 40
    marker_dir = tempfile.mkdtemp(prefix="kb-markers-")
    os.chmod(marker_dir, 0o777)  # so that only the sandbox, not permissions, stops a write
    code_dir = tempfile.mkdtemp(prefix="kb-escapes-")
    os.chmod(code_dir, 0o755)
    try:
        modules = {}
        for path in payloads:
            module = Path(code_dir, path.name)
            module.write_text(path.read_text().replace("{MARKER}", os.path.join(marker_dir, path.stem)))
            module.chmod(0o644)
            modules[path.stem] = str(module)
        proof = run_payload(CORPUS, sandboxed=False, args=[json.dumps({k: modules[k] for k in PROOF})])
        made = sorted(os.listdir(marker_dir))
        assert set(PROOF) <= {m.split(".")[0] for m in made}, (made, proof.result)
        for name in made:
            os.unlink(os.path.join(marker_dir, name))
        run = run_payload(CORPUS, sandboxed=True, args=[json.dumps(modules)], skip=skip,
                          extra_env={sandbox.READ_ENV: code_dir}, timeout=600)
        require(run, "mount", "user", "network", "pid")
        assert len(run.result) == len(payloads), run.stderr[-3000:]
        assert os.listdir(marker_dir) == [], os.listdir(marker_dir)
    finally:
        shutil.rmtree(marker_dir, ignore_errors=True)
        shutil.rmtree(code_dir, ignore_errors=True)


# --------------------------------------------------------------------------- policy and settings
def refusing_wrapper() -> list[str]:
    """A user namespace where we are root but uid 65534 does not exist and no further
    user namespace may be made: every layer is refused (as on a machine without them)."""
    if not shutil.which("unshare"):
        pytest.skip("util-linux unshare is not installed")
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not available here")
    return ["unshare", "--user", "--map-root-user", "sh", "-c",
            'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"', "sh"]


def test_a_refused_layer_is_a_note_by_default_and_an_error_when_strict():
    wrapper = refusing_wrapper()
    code = "result['ran'] = True\n"
    run = run_payload(code, sandboxed=True, wrapper=wrapper)
    assert run.returncode == 0 and run.result == {"ran": True}, run.stderr[-2000:]
    assert run.layers and set(run.layers.values()) == {"refused"}, run.report
    details = {layer["detail"] for layer in run.report["layers"]}
    assert all(d and "\n" not in d for d in details) and any("user namespace" in d for d in details), details

    strict = run_payload(code, sandboxed=True, wrapper=wrapper, policy="strict")
    assert strict.returncode == 3 and strict.result == {} and strict.report is None, strict.stderr[-2000:]
    lines = [ln for ln in strict.stderr.splitlines() if ln.startswith("kernelband-sandbox:")]
    assert len(lines) == 1 and "refused under KERNELBAND_SANDBOX=strict" in lines[0], strict.stderr[-2000:]

    # a layer the judge leaves out on purpose is reported as such, and strict accepts it
    skipped = run_payload(code, sandboxed=True, policy="strict", skip="network")
    assert skipped.returncode == 0 and skipped.layers.get("network") == "skipped", skipped.stderr[-2000:]


def test_settings_never_weaken_by_accident(monkeypatch):
    monkeypatch.setenv(sandbox.POLICY_ENV, "strcit")
    assert sandbox._settings(None, None)[0] == "strict"
    monkeypatch.setenv(sandbox.SKIP_ENV, "pid, bogus ,network")
    assert sandbox._settings(None, None)[1] == {"pid", "network"}
    env = sandbox.scrubbed_env("/tmp/x", {"KERNELBAND_SANDBOX": "strict", "KERNELBAND_SANDBOX_SKIP": "pid",
                                          "KERNELBAND_SANDBOX_READ": "/home/me", "KERNELBAND_TEST_FATAL_MARKER": "m",
                                          "KERNELBAND_SANDBOX_NETWORK": "0", "KERNELBAND_SANDBOX_OUTER": "isolated",
                                          sandbox.ENTERED_ENV: '{"policy": "best-effort", "layers": []}'})
    # the judge's settings pass; what only the judge or the wrapper may set does not
    assert env["KERNELBAND_SANDBOX"] == "strict" and env["KERNELBAND_SANDBOX_SKIP"] == "pid"
    for name in ("KERNELBAND_SANDBOX_READ", "KERNELBAND_TEST_FATAL_MARKER", "KERNELBAND_SANDBOX_NETWORK",
                 "KERNELBAND_SANDBOX_OUTER", sandbox.ENTERED_ENV):  # the last: a forged "already sandboxed"
        assert name not in env


def test_hidden_directories_keep_exactly_what_is_needed(tmp_path):
    """Below a hidden directory only the kept paths come back (not their siblings), a
    kept path inside another is bound with it, a directory inside a hidden one is
    hidden already, and one that is itself kept cannot be hidden."""
    for d in ("a/b/c/x/y", "a/b/sibling", "a/z", "a/secret", "d", "e"):
        (tmp_path / d).mkdir(parents=True)
    t = str(tmp_path)
    plan, refused = sandbox_fs.masks([f"{t}/a", f"{t}/a/b", f"{t}/d"],
                                     [f"{t}/a/b/c/x", f"{t}/a/b/c/x/y", f"{t}/a/z", f"{t}/d", f"{t}/e"])
    assert plan == {f"{t}/a": [f"{t}/a/b/c/x", f"{t}/a/z"]}
    assert refused == [f"{t}/d (needed: {t}/d)"]


# --------------------------------------------------------------------------- a tool inside the sandbox
FAKE_TOOL = """#!/bin/sh
# a stand-in for compute-sanitizer: says where it runs, in its log, then runs its target
log=$1
shift
{
  echo "uid $(id -u)"
  for ns in pid ipc mnt net; do echo "$ns $(readlink /proc/self/ns/$ns)"; done
} > "$log"
exec "$@"
"""

WHERE = textwrap.dedent("""
    import os
    result["uid"] = os.getuid()
    for ns in ("pid", "ipc", "mnt", "net"):
        result[ns] = os.readlink(f"/proc/self/ns/{ns}")
    result["tool"] = dict(line.split(" ", 1) for line in open("tool.log").read().splitlines())
""")


def test_a_tool_runs_inside_the_sandbox_beside_the_process_it_watches(entry):
    """``python -m kernelband.worker.sandbox --whole TOOL ...`` (compute-sanitizer's wrapper):
    the tool and the variant process it starts share every namespace (compute-sanitizer
    finds its target by pid and meets it over loopback and /dev/shm; with the variant's own
    pid, IPC and mount namespaces around the target only, it checked nothing on an H200),
    neither shares the judge's, the tool's folder (here under the hidden /tmp) is readable,
    and the variant process reports the wrapper's layers instead of entering again."""
    tools = tempfile.mkdtemp(prefix="kb-tool-")
    try:
        tool = os.path.join(tools, "fake-sanitizer")
        with open(tool, "w") as fh:
            fh.write(FAKE_TOOL)
        os.chmod(tool, 0o755)
        os.chmod(tools, 0o755)
        wrapper = [*entry, sys.executable, "-m", "kernelband.worker.sandbox", sandbox.WHOLE, tool, "tool.log"]
        run = run_payload(WHERE, sandboxed=True, wrapper=wrapper)
    finally:
        shutil.rmtree(tools, ignore_errors=True)
    assert run.returncode == 0 and run.result.get("tool"), run.stderr[-3000:]
    require(run, "mount", "ipc", "pid", "network")
    assert all(layer["detail"].endswith("(entered by the wrapper)") for layer in run.report["layers"]), run.report
    for ns in ("pid", "ipc", "mnt", "net"):
        assert run.result["tool"][ns] == run.result[ns], (ns, run.result)  # the tool beside its target
        assert run.result[ns] != os.readlink(f"/proc/self/ns/{ns}"), ns  # both inside the sandbox
    assert run.result["tool"]["uid"] == str(run.result["uid"]) == "65534"

"""The variant process's sandbox through the real judge (zygote-forked and spawned
variant processes), proven with code that skips the static screen (sent straight to
the judge): as if a variant had found a way past it. A payload reports what it saw in
the message of the error it raises (it can write nowhere outside its job), and the
tests check on the real file system and process table that no side effect happened.
Each layer alone, with the proof that every attack works unsandboxed:
tests/test_sandbox_layers.py."""
from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest
from helpers.kernels import AXPY, axpy_task

from kernelband.evaluate import Evaluator
from kernelband.machine_cache import trusted_triton_cache
from kernelband.model import Evaluation, Status
from kernelband.worker import sandbox
from kernelband.worker.judge_core import persistent_cache

SECRET = "sk-kernelband-test-secret-0123456789"


def test_scrubbed_env_keeps_the_allow_list_and_drops_credentials():
    env = sandbox.scrubbed_env("/tmp/private", {
        "PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "1", "TRITON_CACHE_DIR": "/c", "LC_ALL": "C",
        "OPENAI_API_KEY": SECRET, "KERNELBAND_API_KEY": SECRET, "HF_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s",
        "CUDA_AUTH_TOKEN": "x", "TRITON_API_KEY": "y", "SSH_AUTH_SOCK": "/s", "RANDOM_VAR": "r",
        "KERNELBAND_TEST_FATAL_MARKER": "m", "KERNELBAND_SANDBOX": "strict",
    })
    assert env["PATH"] == "/usr/bin" and env["CUDA_VISIBLE_DEVICES"] == "1" and env["LC_ALL"] == "C"
    assert env["HOME"] == env["TMPDIR"] == "/tmp/private" and env["KERNELBAND_SANDBOX"] == "strict"
    for dropped in ("OPENAI_API_KEY", "KERNELBAND_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "CUDA_AUTH_TOKEN",
                    "TRITON_API_KEY", "SSH_AUTH_SOCK", "RANDOM_VAR", "KERNELBAND_TEST_FATAL_MARKER"):
        assert dropped not in env
    assert SECRET not in "".join(env.values())


@pytest.fixture(scope="module", params=["zygote", "spawn"])
def judge(request, tmp_path_factory):
    """A real judge whose variant processes are forked by the zygote, or spawned. The
    module's folder is readable by anyone, as a project's usually is, so the sandbox
    can run the job as uid 65534 where this machine lets it."""
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", SECRET)
    mp.setenv("KERNELBAND_API_KEY", SECRET)
    mp.setenv("KERNELBAND_ZYGOTE", "1" if request.param == "zygote" else "0")
    folder = tmp_path_factory.mktemp("sandbox")
    folder.chmod(0o755)
    ev = Evaluator(axpy_task(folder, timeout_s=20.0))
    assert ev.prepare(time_it=False).ok
    yield ev
    ev.close()
    mp.undo()


def unscreened(ev: Evaluator, source: str) -> Evaluation:
    """Straight to the judge: the static screen would have refused all of these."""
    raw = ev.client.request("evaluate", 300, source=source, variant_id="escape", time=False)
    return Evaluation.from_dict(raw)


def payload(code: str) -> str:
    return "import os, sys, socket, threading, time, json\n" + AXPY + "\n" + code + "\n"


def reported(ev: Evaluation) -> dict:
    """What a payload saw, raised at import as ``KB-SAW {json}`` (the sandbox lets it
    write nowhere else): the import fails, and its message carries the report."""
    assert ev.status != Status.OK, ev.message
    m = re.search(r"KB-SAW (\{.*\})", ev.message)
    assert m, ev.message
    return json.loads(m.group(1))


def report_code(body: str) -> str:
    return "saw = {}\n" + body + "\nraise RuntimeError('KB-SAW ' + json.dumps(saw))\n"


@pytest.mark.slow
def test_no_secret_no_ancestor_a_private_cwd_and_nowhere_else_to_write(judge, tmp_path):
    """The job sees no key (environment, ancestors' environ), runs as pid 2 of its own
    namespace with an unprivileged uid where the OS allows, writes its private
    directory, and nothing outside it: not the test's folder, nor the judge's trusted
    Triton cache."""
    marker = tmp_path / "marker.txt"
    trusted = judge.workdir / "triton-cache-trusted"
    trusted.mkdir(exist_ok=True)
    # this machine's caches of the judge's own kernels and of the original's: kept between
    # sessions, loaded by trusted processes only
    kept = [c for c in (trusted_triton_cache("judge"), persistent_cache(judge.task)) if c is not None]
    for folder in kept:
        folder.mkdir(parents=True, exist_ok=True)
    targets = [("marker", marker), ("trusted", trusted / "poison.cubin"),
               *((f"kept {i}", folder / "poison.cubin") for i, folder in enumerate(kept))]
    code = report_code(f"""
env_text = repr(dict(os.environ))
saw["secret in env"] = {SECRET!r} in env_text or "OPENAI_API_KEY" in env_text
saw["environs with the secret"] = []
for p in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        if {SECRET!r}.encode() in open(f"/proc/{{p}}/environ", "rb").read():
            saw["environs with the secret"].append(p)
    except OSError:
        pass
saw["cwd"], saw["pid"], saw["uid"] = os.getcwd(), os.getpid(), os.getuid()
open("relative.txt", "w").write("x")
saw["relative write"] = open("relative.txt").read()
for name, path in {[(name, str(path)) for name, path in targets]!r}:
    try:
        open(path, "w").write("escaped")
        saw[name] = "written"
    except OSError as e:
        saw[name] = "refused: " + str(e.strerror)
""")
    saw = reported(unscreened(judge, payload(code)))
    assert saw["secret in env"] is False and saw["environs with the secret"] == [], saw
    assert "kernelband-variant-" in saw["cwd"] and not Path(saw["cwd"]).exists()  # private, removed afterwards
    assert saw["relative write"] == "x"
    assert kept and all(saw[name].startswith("refused") for name, _ in targets), saw
    assert not any(path.exists() for _, path in targets)
    assert not (Path(judge.task.module_path).parent / "relative.txt").exists()
    layers = sandbox_layers(judge)
    if layers.get("pid") == "held":
        assert saw["pid"] == 2, saw
    if layers.get("user") == "held":
        assert saw["uid"] != 0, saw


def sandbox_layers(ev: Evaluator) -> dict[str, str]:
    """The layers this machine granted, from a sandbox entered the same way here."""
    import subprocess
    import sys

    code = ("import json; from kernelband.worker import sandbox; r = sandbox.enter(); "
            "print(json.dumps({l.name: l.state for l in r.layers}))")
    from helpers.sandboxed import job_dir, variant_env

    workdir = job_dir()
    try:
        out = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=variant_env(workdir), capture_output=True,
                             text=True, timeout=60).stdout
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return json.loads(out.strip().splitlines()[-1])


def test_network_is_unreachable(judge):
    received: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(8)
    port = server.getsockname()[1]

    def serve() -> None:
        try:
            conn, _ = server.accept()
            received.append(conn.recv(1024))
            conn.close()
        except OSError:
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    code = report_code(f"""try:
    s = socket.create_connection(('127.0.0.1', {port}), timeout=3)
    s.sendall(os.environ.get('OPENAI_API_KEY', 'no-key').encode())
    saw["net"] = 'connected'
except OSError as e:
    saw["net"] = 'refused: ' + str(e)
""")
    saw = reported(unscreened(judge, payload(code)))
    t.join(10)
    server.close()
    if saw["net"] == "connected":
        assert received in ([], [b"no-key"])  # no isolation possible here: at least the key never left
        pytest.skip(f"no network namespace on this machine ({judge.client.request('sandbox', 10)['network']})")
    assert saw["net"].startswith("refused") and received == []


def test_forked_and_setsid_children_die_with_the_job(judge):
    token = f"86400.{uuid.uuid4().int % 10**9}"
    code = f"""
def _sleeper():
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.execvp("sleep", ["sleep", {token!r}])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        _sleeper()
    os._exit(0)
if os.fork() == 0:
    _sleeper()
"""
    t0 = time.monotonic()
    unscreened(judge, payload(code))
    assert time.monotonic() - t0 < 60  # the job does not wait for its children
    deadline = time.monotonic() + 5
    while sleepers(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = sleepers(token)
    for pid in left:
        os.kill(pid, 9)
    assert left == []


def sleepers(token: str) -> list[int]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if open(f"/proc/{pid}/cmdline", "rb").read() == b"sleep\0" + token.encode() + b"\0":
                if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_monkeypatching_the_runtime_is_rejected(judge):
    ev = unscreened(judge, payload("import torch\ntorch.Tensor.abs = lambda self: self\n"))
    assert ev.status == Status.REJECTED and "replaced" in ev.message, ev.message
    ev = unscreened(judge, payload("import triton.testing\ntriton.testing.do_bench = lambda *a, **k: 0.001\n"))
    assert ev.status == Status.REJECTED and "do_bench" in ev.message, ev.message


def test_threads_left_running_are_rejected(judge):
    code = AXPY.replace("    return axpy(0.5, x, y)",
                        "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
                        "    return axpy(0.5, x, y)")
    ev = unscreened(judge, "import threading, time\n" + code)
    assert ev.status == Status.REJECTED and "threads" in ev.message, ev.message


@pytest.mark.slow
def test_a_forged_reply_on_any_descriptor_is_not_a_verdict(judge):
    """Write a forged 'ok' reply and a forged frame on every open descriptor: the judge
    reads data frames with a per-job nonce, never verdicts."""
    forged = ('import json, struct\n'
              'for fd in range(3, 64):\n'
              '    for blob in (json.dumps({"ok": True, "result": {"status": "ok"}}).encode() + b"\\n",\n'
              '                 struct.pack("<Q", 40) + b\'{"nonce": "0", "kind": "done", "meta": {}}\'):\n'
              '        try:\n'
              '            os.write(fd, blob)\n'
              '        except OSError:\n'
              '            pass\n')
    wrong = AXPY.replace("alpha * x + y", "alpha * x - y")
    ev = unscreened(judge, "import os\n" + wrong + "\n" + forged)
    assert ev.status != Status.OK, ev.message
    assert judge.client.alive
    ok = judge.evaluate(judge_variant())
    assert ok.status == Status.OK, ok.message


def judge_variant():
    from helpers.kernels import AXPY_LAUNCH, edited

    return edited(AXPY_LAUNCH, AXPY_LAUNCH.replace("128", "256"))


@pytest.mark.slow
def test_a_job_left_running_dies_with_its_judge(tmp_path, monkeypatch):
    """A candidate that spins forever, and a judge that goes away mid-job: no process of
    the job survives (the zygote kills its children; each child dies with the zygote,
    and the job's pid namespace with its relay)."""
    import subprocess

    from kernelband.worker import sandbox as sb

    monkeypatch.setenv("KERNELBAND_ZYGOTE", "1")
    ev = Evaluator(axpy_task(tmp_path, timeout_s=600.0))
    assert ev.prepare(time_it=False).ok
    spin = AXPY.replace("    out = torch.empty_like(x)", "    out = torch.empty_like(x)\n    while True:\n        pass")
    judge_pid = ev.client.info.pid
    def run_spinning() -> None:
        try:
            unscreened(ev, spin)
        except Exception:  # noqa: BLE001 - the judge is killed under it: that is the point
            pass

    t = threading.Thread(target=run_spinning, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    spinning: list[int] = []
    while time.monotonic() < deadline and not spinning:
        time.sleep(0.5)
        zygotes = sb.children_of(judge_pid)
        spinning = [d for z in zygotes for d in descendants(z)]
    assert spinning, "the job never started"
    ev.client.stop(graceful=False)  # SIGKILL to the judge's group, mid-job
    time.sleep(3)
    alive = [p for p in spinning if sb.parent_of(p) is not None and not sb._zombie(p)]
    assert alive == [], subprocess.run(["ps", "-o", "pid,ppid,stat,cmd", "-p", ",".join(map(str, alive))],
                                       capture_output=True, text=True).stdout
    ev.close()


def descendants(pid: int) -> list[int]:
    from kernelband.worker import sandbox as sb

    out, todo = [], sb.children_of(pid)
    while todo:
        p = todo.pop()
        out.append(p)
        todo += sb.children_of(p)
    return out

"""The variant process's sandbox, proven with code that skips the static screen (sent
straight to the judge): as if a variant had found a way past it. Each payload records
what it could do in a marker file, so the tests show the side effect did not happen,
not only that something was refused."""
from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest
from helpers.kernels import AXPY, axpy_task

from kernelband.evaluate import Evaluator
from kernelband.model import Evaluation, Status
from kernelband.worker import sandbox

SECRET = "sk-kernelband-test-secret-0123456789"


def test_scrubbed_env_keeps_the_allow_list_and_drops_credentials():
    env = sandbox.scrubbed_env("/tmp/private", {
        "PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "1", "TRITON_CACHE_DIR": "/c", "LC_ALL": "C",
        "OPENAI_API_KEY": SECRET, "KERNELBAND_API_KEY": SECRET, "HF_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s",
        "CUDA_AUTH_TOKEN": "x", "TRITON_API_KEY": "y", "SSH_AUTH_SOCK": "/s", "RANDOM_VAR": "r",
    })
    assert env["PATH"] == "/usr/bin" and env["CUDA_VISIBLE_DEVICES"] == "1" and env["LC_ALL"] == "C"
    assert env["HOME"] == env["TMPDIR"] == "/tmp/private"
    for dropped in ("OPENAI_API_KEY", "KERNELBAND_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "CUDA_AUTH_TOKEN",
                    "TRITON_API_KEY", "SSH_AUTH_SOCK", "RANDOM_VAR"):
        assert dropped not in env
    assert SECRET not in "".join(env.values())


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", SECRET)
    mp.setenv("KERNELBAND_API_KEY", SECRET)
    ev = Evaluator(axpy_task(tmp_path_factory.mktemp("sandbox"), timeout_s=20.0))
    assert ev.prepare(time_it=False).ok
    yield ev
    ev.close()
    mp.undo()


def unscreened(ev: Evaluator, source: str) -> Evaluation:
    """Straight to the judge: the static screen would have refused all of these."""
    raw = ev.client.request("evaluate", 300, source=source, variant_id="escape", time=False)
    return Evaluation.from_dict(raw)


def payload(code: str) -> str:
    return "import os, sys, socket, threading, time\n" + AXPY + "\n" + code + "\n"


def test_no_secret_in_the_environment_and_a_private_cwd(judge, tmp_path):
    marker = tmp_path / "env.txt"
    code = (f"with open({str(marker)!r}, 'w') as fh:\n"
            "    fh.write(repr(dict(os.environ)) + '\\n' + os.getcwd())\n"
            "open('relative.txt', 'w').write('x')\n")
    ev = unscreened(judge, payload(code))
    assert ev.status == Status.OK, ev.message  # it ran, and passed: but learned nothing
    text = marker.read_text()
    assert SECRET not in text and "OPENAI_API_KEY" not in text and "KERNELBAND_API_KEY" not in text
    cwd = text.splitlines()[-1]
    assert "kernelband-variant-" in cwd and not Path(cwd).exists()  # private, and removed afterwards
    assert not (Path(judge.task.module_path).parent / "relative.txt").exists()
    assert not Path("relative.txt").exists()


def test_network_is_unreachable(judge, tmp_path):
    probe = sandbox.isolate_network  # what this machine allows, checked in a child
    del probe
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
    marker = tmp_path / "net.txt"
    code = (f"try:\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            f"    s.sendall(os.environ.get('OPENAI_API_KEY', 'no-key').encode())\n    r = 'connected'\n"
            f"except OSError as e:\n    r = 'refused: ' + str(e)\n"
            f"open({str(marker)!r}, 'w').write(r)\n")
    unscreened(judge, payload(code))
    t.join(10)
    server.close()
    result = marker.read_text()
    if result == "connected":
        assert received in ([], [b"no-key"])  # no isolation possible here: at least the key never left
        pytest.skip(f"no network namespace on this machine ({judge.client.request('sandbox', 10)['network']})")
    assert result.startswith("refused") and received == []


def test_forked_and_setsid_children_die_with_the_job(judge, tmp_path):
    """The grandchild writes its marker only once the job is over (the test says when),
    so a slow machine cannot make it write while its job still runs."""
    marker, over = tmp_path / "child.txt", tmp_path / "job-over"
    code = ("pid = os.fork()\n"
            "if pid == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        deadline = time.monotonic() + 120\n"
            f"        while not os.path.exists({str(over)!r}) and time.monotonic() < deadline:\n"
            "            time.sleep(0.05)\n"
            f"        open({str(marker)!r}, 'w').write('survived')\n"
            "    os._exit(0)\n")
    t0 = time.monotonic()
    unscreened(judge, payload(code))
    assert time.monotonic() - t0 < 60  # the job does not wait for its children
    over.touch()
    time.sleep(2)  # a survivor writes within 0.05 s of seeing the file
    assert not marker.exists()


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


def test_a_job_left_running_dies_with_its_judge(tmp_path):
    """A candidate that spins forever, and a judge that goes away mid-job: no process of
    the job survives (the zygote kills its children; each child dies with the zygote)."""
    import subprocess

    from kernelband.worker import sandbox as sb

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
        spinning = [c for z in zygotes for c in sb.children_of(z)]
    assert spinning, "the job never started"
    ev.client.stop(graceful=False)  # SIGKILL to the judge's group, mid-job
    time.sleep(3)
    alive = [p for p in spinning if sb.parent_of(p) is not None and not sb._zombie(p)]
    assert alive == [], subprocess.run(["ps", "-o", "pid,ppid,stat,cmd", "-p", ",".join(map(str, alive))],
                                       capture_output=True, text=True).stdout
    ev.close()

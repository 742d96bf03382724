"""Executors for real on the CPU: two local interpreter slots against one,
`optimize-all` over the examples, and a local Ray instance (started by the tests) that
runs sessions and `optimize-all` through Ray actors, one of which is killed mid-search.
Real worker processes, real Ray, real SQLite; all but one slow (marked)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kernelband.batch import RAN, BatchRun, discover
from kernelband.executor import ExecutorOptions
from kernelband.executor.local import LocalExecutor
from kernelband.model import ResultStatus, Task
from kernelband.session import Budget, Session, SessionConfig
from helpers.session import task_of, workspace

REPO = Path(__file__).resolve().parent.parent
VERDICTS = (ResultStatus.IMPROVED, ResultStatus.NO_IMPROVEMENT, ResultStatus.VERIFIED_CORRECT)
# The tests marked slow run in the slow tier (scripts/test.sh --slow); the others keep
# this file in the default tier.


def _statuses(result: dict) -> dict[str, str]:
    return {h["variant_id"]: h["status"] for h in result["history"]}


@pytest.mark.slow
def test_two_local_slots_give_the_verdicts_of_one(tmp_path):
    path = workspace(tmp_path)
    task = task_of(path)
    # exhaustive: both runs evaluate the same variants, whatever order they finish in
    cfg = dict(search="exhaustive", budget=Budget(evaluations=3), strategies=["tiling"], warm_start=False,
               profile_tier=0)
    one = Session(task, SessionConfig(**cfg), executor=LocalExecutor(ExecutorOptions(workers=1))).run().to_dict()
    two = Session(task, SessionConfig(**cfg), executor=LocalExecutor(ExecutorOptions(workers=2))).run().to_dict()
    # under the interpreter the final status rests on CPU times (is any correct variant the
    # "best"?), which load moves; every candidate's correctness verdict must agree exactly
    assert one["status"] in VERDICTS and two["status"] in VERDICTS
    assert len(_statuses(one)) == 3 and _statuses(one) == _statuses(two)
    # the second worker joins once it has prepared: under load worker 0 may do every evaluation
    assert {h.get("worker") for h in two["history"]} <= {"cpu 0", "cpu 1"}
    assert all("worker" not in h for h in one["history"])  # one worker: history as before
    assert sorted(h["index"] for h in two["history"]) == [1, 2, 3]


@pytest.mark.slow
def test_two_local_slots_run_a_bandit_search_to_a_verdict(tmp_path):
    path = workspace(tmp_path)
    cfg = SessionConfig(search="kernelband", budget=Budget(evaluations=4), strategies=["tiling", "pipeline"],
                        warm_start=False, profile_tier=0)
    result = Session(task_of(path), cfg, executor=LocalExecutor(ExecutorOptions(workers=2))).run().to_dict()
    assert result["status"] == ResultStatus.VERIFIED_CORRECT and result["evaluations"] == 4 and len(result["history"]) == 4
    assert result["diff"] and result["best_source"] != task_of(path).source


def _copy_examples(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "examples", root / "examples")
    (root / "pyproject.toml").write_text("[project]\nname = 'ws'\n")
    return root


def _hashes(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*.py")}


def _optimize_all(root: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelband", "optimize-all", str(root / "examples"), "--device", "cpu",
                           "--budget", "1", "--profile-tier", "0", "--rounds", "2", "--out", str(out), "--json", *extra],
                          capture_output=True, text=True, cwd=root, timeout=900)


@pytest.mark.slow
def test_optimize_all_over_the_examples_with_two_local_slots_resumes_and_writes_patches(tmp_path):
    root = _copy_examples(tmp_path)
    before = _hashes(root)
    out = tmp_path / "patches"
    r = _optimize_all(root, out, "--workers", "2")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["kernels"]
    assert {(x["file"], x["kernel"]) for x in rows} == {("add_scale.py", "axpy_kernel"), ("matmul.py", "matmul_kernel"),
                                                        ("softmax.py", "softmax_kernel")}
    assert all(x["status"] in RAN and not x["resumed"] for x in rows), rows
    assert {x["worker"] for x in rows} <= {"cpu 0", "cpu 1"}
    progress = [line for line in r.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 3 and progress[-1].startswith("[3/3] ")  # a line per kernel
    assert _hashes(root) == before  # the user's files are never written
    for x in rows:  # each verified edit is a patch that applies to a copy and gives the variant
        if x["patch"]:
            copy = tmp_path / "apply"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(root / "examples", copy)
            done = subprocess.run(["patch", "-p1", "-d", str(copy), "-i", x["patch"]], capture_output=True, text=True)
            assert done.returncode == 0, done.stdout + done.stderr
            assert (copy / x["file"]).read_text() != (root / "examples" / x["file"]).read_text()
    assert any(x["patch"] for x in rows)

    # a rerun takes every result from the store...
    again = _optimize_all(root, out, "--workers", "2")
    assert again.returncode == 0, again.stderr
    rows2 = json.loads(again.stdout)["kernels"]
    assert all(x["resumed"] for x in rows2) and [x["status"] for x in rows2] == [x["status"] for x in rows]
    # ...but a kernel whose source changed runs again (the key is the exact source)
    src = root / "examples" / "softmax.py"
    src.write_text(src.read_text() + "\n# edited\n")
    third = json.loads(_optimize_all(root, out, "--workers", "2").stdout)["kernels"]
    assert {x["kernel"]: x["resumed"] for x in third} == {"axpy_kernel": True, "matmul_kernel": True,
                                                          "softmax_kernel": False}


# --------------------------------------------------------------------------- Ray

@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance started by the tests (ray is in the test extra)."""
    import ray  # a missing ray is a broken test environment, not a skip

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def _ray_executor(workers: int):
    from kernelband.executor.ray_executor import RayExecutor

    return RayExecutor(ExecutorOptions(name="ray", workers=workers))


@pytest.mark.slow
def test_a_session_runs_through_ray_actors(local_ray, tmp_path):
    path = workspace(tmp_path)
    executor = _ray_executor(2)
    try:
        cfg = SessionConfig(search="kernelband", budget=Budget(evaluations=3), strategies=["tiling"], warm_start=False,
                            profile_tier=0)
        result = Session(task_of(path), cfg, executor=executor).run().to_dict()
    finally:
        executor.close()
    assert result["status"] == ResultStatus.VERIFIED_CORRECT and result["interpreted"], result["message"]
    assert result["evaluations"] == 3 and result["diff"]
    assert {h["worker"] for h in result["history"]} <= {"ray cpu 0", "ray cpu 1"}
    assert not executor._actors  # every actor is gone after the session


@pytest.mark.slow
def test_a_killed_ray_actor_is_replaced_and_the_session_finishes(local_ray, tmp_path):
    from kernelband.executor.ray_executor import RayEvaluator

    class KilledOnce(RayEvaluator):
        """Its actor process is SIGKILLed before the second candidate (a node lost)."""

        calls = 0

        def evaluate(self, variant, *a, **kw):
            KilledOnce.calls += 1
            if KilledOnce.calls == 2:  # 1: first candidate (the original is re-timed by retime_original)
                os.kill(self._get(self._actor.pid.remote(), 60.0), signal.SIGKILL)
            return super().evaluate(variant, *a, **kw)

    path = workspace(tmp_path)
    task = task_of(path)
    executor = _ray_executor(1)
    try:
        slot = executor.slots("cpu")[0]
        evaluator = KilledOnce(executor, slot, task, 0)
        cfg = SessionConfig(search="greedy", budget=Budget(evaluations=3), strategies=["tiling"], warm_start=False,
                            profile_tier=0)
        result = Session(task, cfg, evaluator=evaluator).run().to_dict()
    finally:
        executor.close()
    assert KilledOnce.calls >= 3
    assert result["worker_restarts"] == 1  # one new actor, prepared again from the texts
    assert result["status"] == ResultStatus.VERIFIED_CORRECT and result["evaluations"] == 3
    assert [h["status"] for h in result["history"]].count("ok") >= 1
    assert "worker lost" not in result["stop_reason"]


@pytest.mark.slow
def test_optimize_all_over_the_examples_through_ray(local_ray, tmp_path):
    root = _copy_examples(tmp_path)
    before = _hashes(root)
    jobs = discover(str(root / "examples"), "cpu", 3, 60.0)
    executor = _ray_executor(2)
    cfg = SessionConfig(search="kernelband", budget=Budget(evaluations=1), warm_start=False, profile_tier=0,
                        paired_rounds=2)
    lines: list[str] = []
    try:
        rows = BatchRun(jobs, executor, cfg, str(tmp_path / "kb.db"), tmp_path / "patches", {"t": 1}, device="cpu",
                        on_progress=lines.append).run()
    finally:
        executor.close()
    assert len(rows) == 3 and all(r.status in VERDICTS for r in rows), [(r.kernel, r.status, r.message) for r in rows]
    assert {r.worker for r in rows} <= {"ray cpu 0", "ray cpu 1"} and len(lines) == 3
    assert _hashes(root) == before
    assert all(Path(r.patch).exists() for r in rows if r.patch)
    # resumable through the store: nothing runs again
    rows2 = BatchRun(jobs, _ray_executor(2), cfg, str(tmp_path / "kb.db"), tmp_path / "patches", {"t": 1},
                     device="cpu").run()
    assert all(r.resumed for r in rows2)
    # a different setting is a different key: the cheat of reusing any stored result fails
    assert not any(r.resumed for r in BatchRun(jobs, _LocalNoRun(), cfg, str(tmp_path / "kb.db"), tmp_path / "patches",
                                               {"t": 2}, device="cpu").run())


class _LocalNoRun:
    """An executor whose workers refuse to start: a kernel that is not resumed shows up as an error row."""

    name = "none"

    def slots(self, device):
        return LocalExecutor().slots("cpu")

    def evaluator(self, slot, task: Task, workdir, tier):
        raise RuntimeError("not run")

    def close(self):
        pass


@pytest.mark.slow
def test_a_lost_worker_hands_its_candidate_to_the_other(tmp_path):
    """Two local slots; the second worker is killed for real before its first candidate and
    cannot be restarted (told to use a GPU this machine lacks): it is dropped, its
    candidate is evaluated by the primary, and the session ends normally."""
    from helpers.session import LosesItsWorker

    class OneLoses(LocalExecutor):
        def evaluator(self, slot, task, workdir, profile_tier):
            if slot.label == "cpu 1":  # it re-times the original (retime_original), then dies before its first candidate
                return LosesItsWorker(task, workdir=workdir, profile_tier=profile_tier, after=0)
            return super().evaluator(slot, task, workdir, profile_tier)

    path = workspace(tmp_path)
    cfg = SessionConfig(search="exhaustive", budget=Budget(evaluations=3), strategies=["tiling"], warm_start=False,
                        profile_tier=0)
    result = Session(task_of(path), cfg, executor=OneLoses(ExecutorOptions(workers=2))).run().to_dict()
    # the final status rests on CPU times under the interpreter; the search itself must complete
    assert result["status"] in VERDICTS and result["evaluations"] == 3, result["stop_reason"]
    assert len(result["history"]) == 3 and {h["worker"] for h in result["history"]} == {"cpu 0"}
    assert "worker lost" not in result["stop_reason"]
    assert any("workers lost during the search: cpu 1" in w for w in result["warnings"]), result["warnings"]


# --------------------------------------------------------------------------- Ray by address, and local modules

HELPER = "import torch\n\n\ndef make_inputs(n):\n    return torch.randn(n), torch.randn(n)\n"


def _with_helper(tmp_path: Path) -> Path:
    """The session workspace, its harness drawing inputs from a sibling module of the kernel."""
    from helpers.session import AXPY_SESSION, SESSION_N

    source = AXPY_SESSION.replace("import triton.language as tl\n",
                                  "import triton.language as tl\n\nfrom axpy_helpers import make_inputs\n", 1)
    source = source.replace(f"    x = torch.randn({SESSION_N})\n    y = torch.randn({SESSION_N})\n",
                            f"    x, y = make_inputs({SESSION_N})\n", 1)
    assert f"make_inputs({SESSION_N})" in source
    path = workspace(tmp_path, source)
    (tmp_path / "axpy_helpers.py").write_text(HELPER)
    return path


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports: every socket stays bound until all are chosen (one
    at a time, the system may hand the same port out twice, and Ray refuses to start
    when two of its components are given one port)."""
    import contextlib
    import socket

    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without Ray settings (a local ray.init in this process sets RAY_AUTH_MODE)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    env.update(TRITON_INTERPRET="1", **extra)
    return env


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """A Ray head node started as a user would (`ray start --head`), with token
    authentication on (Ray 2.52+; the default for new clusters from Ray 2.61): its own
    token file, temp dir and free ports. `--block` keeps it in the foreground, so
    stopping it is SIGTERM to the process this fixture started (never `ray stop`, which
    stops every Ray instance of this user)."""
    import secrets
    import tempfile
    import time

    import ray  # noqa: F401  (the test extra's; missing is a failure, not a skip)

    tmp = Path(tempfile.mkdtemp(prefix="kbray", dir="/tmp"))  # Ray's socket paths must stay short
    token = tmp / "token"
    token.write_text(secrets.token_hex(32))
    env = _clean_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    port, listen, grpc, runtime_env, metrics = _free_ports(5)
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", f"--port={port}",
           "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={tmp}",
           f"--dashboard-agent-listen-port={listen}", f"--dashboard-agent-grpc-port={grpc}",
           f"--runtime-env-agent-port={runtime_env}", f"--metrics-export-port={metrics}"]
    log = open(tmp / "head.log", "w")
    head = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "will now block forever" not in (tmp / "head.log").read_text():
            assert head.poll() is None, (tmp / "head.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Ray head did not start in 120 s"
            time.sleep(0.5)
        yield {"address": f"127.0.0.1:{port}", "token": str(token)}
    finally:
        head.terminate()  # `ray start --block` stops the node's processes on SIGTERM
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)  # whatever of its process group is left
        except ProcessLookupError:
            pass
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _optimize_on(head: dict, path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelband", "optimize", str(path), "--kernel", "axpy_kernel",
                           "--harness", "harness_axpy", "--device", "cpu", "--executor", "ray", "--ray-address",
                           head["address"], "--workers", "2", "--search", "exhaustive", "--budget", "2",
                           "--strategies", "tiling", "--profile-tier", "0", "--no-store", "--json"],
                          capture_output=True, text=True, cwd=path.parent, env=env, timeout=900)


@pytest.mark.slow
def test_a_session_runs_on_a_ray_head_given_by_address_with_its_sibling_modules(ray_head, tmp_path):
    """What a user pointing at a cluster does: `--executor ray --ray-address HOST:PORT`
    with the cluster's token. The kernel's harness imports a sibling module: the actors
    get it (executor/ship.py), and this engine's code as the job's py_modules."""
    path = _with_helper(tmp_path)
    env = _clean_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=ray_head["token"])
    r = _optimize_on(ray_head, path, env)
    assert r.returncode in (0, 1), r.stderr[-3000:]
    result = json.loads(r.stdout)
    # every candidate ran (correct) on the actors; the final status rests on CPU times here
    assert result["status"] in VERDICTS and result["interpreted"], result["message"]
    assert result["evaluations"] == 2 and {h["status"] for h in result["history"]} == {"ok"}
    assert {h["worker"] for h in result["history"]} <= {"ray cpu 0", "ray cpu 1"}


@pytest.mark.slow
def test_a_driver_without_the_clusters_token_gets_one_line(ray_head, tmp_path):
    path = _with_helper(tmp_path)
    r = _optimize_on(ray_head, path, _clean_env())  # no RAY_AUTH_MODE: an explicit address never turns it on
    assert r.returncode == 2 and not r.stdout
    last = r.stderr.strip().splitlines()[-1]
    assert last == (f"kernelband: cannot connect to Ray at {ray_head['address']}: the cluster requires Ray token "
                    "authentication; set RAY_AUTH_MODE=token and give the cluster's token (RAY_AUTH_TOKEN_PATH, "
                    "RAY_AUTH_TOKEN or ~/.ray/auth_token; docs/RAY.md)"), r.stderr[-2000:]
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_without_its_sibling_modules_a_ray_actor_cannot_run_the_kernel(local_ray, tmp_path, monkeypatch):
    """The counterpart of the session above: the same kernel through Ray actors with
    nothing of its folder sent fails to import its helper, so sending them is what works."""
    from kernelband.evaluate import SetupError
    from kernelband.executor import ray_executor, ship

    path = _with_helper(tmp_path)
    task = task_of(path)
    assert set(ship.collect(task.module_path, [(task.module_path, task.source)])) == {"axpy_helpers.py"}
    monkeypatch.setattr(ship, "collect", lambda *a, **kw: {})
    executor = ray_executor.RayExecutor(ExecutorOptions(name="ray", workers=1))
    cfg = SessionConfig(search="exhaustive", budget=Budget(evaluations=1), warm_start=False, profile_tier=0)
    try:
        with pytest.raises(SetupError, match="axpy_helpers"):
            Session(task, cfg, executor=executor).run()
    finally:
        executor.close()

"""Executors and batched decisions, the fast part: which workers a job gets,
pending pulls as virtual losses in every policy, and the CLI's one-line errors. The
real runs (2 local CPU slots, a local Ray instance) are in test_executor_runs.py."""
from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kernelband.events import EventPayload, Log
from kernelband.executor import ExecutorOptions, ExecutorUnavailable, make_executor
from kernelband.executor.local import LocalExecutor, visible_gpus
from kernelband.executor.pool import WorkerPool
from kernelband.model import Evaluation, PairedTiming, ResultStatus, SanitizerReport, Status, Timing, Variant, WideReport
from kernelband.profile.schema import DeviceFacts
from kernelband.search import BanditConfig, Candidate, Outcome, make_policy
from kernelband.search.base import add_pending

REPO = Path(__file__).resolve().parent.parent
POLICIES = ("kernelband", "kernelband-v1", "kernelband-v2", "ucb1", "greedy", "random")
STRATS = ["tiling", "vectorization", "pipeline", "access_layout"]


def cand(name: str, t: float) -> Candidate:
    return Candidate(id=name, variant=Variant(source=f"# {name}\n", id=name), time_ms=t)


# --------------------------------------------------------------------------- slots


def test_local_slots_pin_one_worker_per_visible_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert visible_gpus() == ["3", "5"]
    slots = LocalExecutor().slots("auto")
    # each worker sees exactly one physical GPU: timing on it is never shared
    assert [s.env for s in slots] == [{"CUDA_VISIBLE_DEVICES": "3"}, {"CUDA_VISIBLE_DEVICES": "5"}]
    assert all(s.gpu and s.device == "cuda" for s in slots)
    assert len(LocalExecutor(ExecutorOptions(workers=1)).slots("auto")) == 1
    assert len(LocalExecutor(ExecutorOptions(workers=8)).slots("auto")) == 2  # never two workers on one GPU
    # a timing lock file the user set guards one GPU: one per GPU, else timing would take turns across GPUs
    monkeypatch.setenv("KERNELBAND_TIMING_LOCK", "/tmp/kb.lock")
    assert [s.env["KERNELBAND_TIMING_LOCK"] for s in LocalExecutor().slots("auto")] == ["/tmp/kb.lock-gpu3",
                                                                                       "/tmp/kb.lock-gpu5"]
    monkeypatch.setenv("KERNELBAND_TIMING_LOCK", "off")
    assert all("KERNELBAND_TIMING_LOCK" not in s.env for s in LocalExecutor().slots("auto"))
    monkeypatch.delenv("KERNELBAND_TIMING_LOCK")
    # an explicit "cuda" is the first GPU, as before, unless --workers asks for more
    assert [s.env for s in LocalExecutor().slots("cuda")] == [{}]
    assert len(LocalExecutor(ExecutorOptions(workers=2)).slots("cuda")) == 2
    # an explicit GPU is that GPU alone, unpinned further, as before executors existed
    one = LocalExecutor().slots("cuda:1")
    assert len(one) == 1 and one[0].device == "cuda:1" and one[0].env == {}


def test_local_slots_on_the_cpu_and_with_one_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []
    assert [s.device for s in LocalExecutor().slots("auto")] == ["auto"]  # one slot, the default
    two = LocalExecutor(ExecutorOptions(workers=2)).slots("cpu")
    assert [s.label for s in two] == ["cpu 0", "cpu 1"] and not any(s.gpu or s.env for s in two)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,-1,2")  # CUDA stops at the first invalid id
    assert visible_gpus() == ["0"]
    single = LocalExecutor().slots("auto")
    assert len(single) == 1 and single[0].env == {} and single[0].device == "auto"  # exactly as before


def test_bad_executor_options_are_refused():
    with pytest.raises(ExecutorUnavailable, match="unknown executor 'slurm'"):
        make_executor(ExecutorOptions(name="slurm"))
    with pytest.raises(ExecutorUnavailable, match="at least 1"):
        make_executor(ExecutorOptions(workers=0))


# --------------------------------------------------------------------------- virtual losses


def _offered(c: Candidate) -> list[str]:
    return list(STRATS)


def _policy(name: str):
    # equal priors: kb's learned priors favour tiling by far more than one virtual loss
    return make_policy(name, BanditConfig(strategy_prior={s: 0.01 for s in STRATS}))


@pytest.mark.parametrize("name", [p for p in POLICIES if p != "random"])
def test_a_pending_pull_steers_the_next_decision_elsewhere(name):
    pool = [cand("orig", 2.0)]
    rng = random.Random(0)
    p = _policy(name)
    first = p.select(pool, _offered, rng)
    assert first is not None
    add_pending(p, *first)  # handed to worker 1
    second = p.select(pool, _offered, rng)
    assert second is not None and second[1] != first[1], (name, first[1], second[1])
    # the cheat: a policy that is not told about the running pull picks the same arm again
    blind = _policy(name)
    assert blind.select(pool, _offered, random.Random(0))[1] == first[1]
    assert blind.select(pool, _offered, random.Random(0))[1] == first[1]


@pytest.mark.parametrize("name", [p for p in POLICIES if p != "random"])
def test_a_pending_pull_scores_exactly_as_a_failed_pull(name):
    """The virtual loss is a failure's reward: select sees the same scores as after a
    real failed pull of that arm (kb's shipped priors, unequal, included)."""
    pool = [cand("orig", 2.0), cand("a", 1.5)]
    pending, failed = make_policy(name), make_policy(name)
    c, s = pending.select(pool, _offered, random.Random(0))
    failed.select(pool, _offered, random.Random(0))
    add_pending(pending, c, s)
    failed.update(c, s, Outcome(False, c.time_ms, None), None)
    a = pending.select(pool, _offered, random.Random(1))
    b = failed.select(pool, _offered, random.Random(1))
    assert (a[0].id, a[1]) == (b[0].id, b[1])
    strip = lambda last: {k: v for k, v in last.items() if k != "t"}  # noqa: E731 - t counts real updates
    assert strip(pending.state()["last"]) == strip(failed.state()["last"])


@pytest.mark.parametrize("name", POLICIES)
def test_pending_then_update_learns_exactly_what_update_alone_learns(name):
    """With one worker every pull is pending only between select and update: the policy
    must end where a policy that never heard of pending pulls ends."""
    pool = [cand("orig", 2.0), cand("a", 1.5), cand("b", 1.8)]
    told, plain = make_policy(name), make_policy(name)
    r1, r2 = random.Random(7), random.Random(7)
    for i in range(12):
        c1, s1 = told.select(pool, _offered, r1)
        c2, s2 = plain.select(pool, _offered, r2)
        assert (c1.id, s1) == (c2.id, s2)
        outcome = Outcome(i % 3 != 0, c1.time_ms, c1.time_ms * (0.9 if i % 2 else 1.1))
        add_pending(told, c1, s1)
        told.update(c1, s1, outcome, None)
        plain.update(c2, s2, outcome, None)
    assert told.state() == plain.state()


def test_several_pending_pulls_spread_over_arms_and_clear_on_update():
    pool = [cand("orig", 2.0)]
    p = _policy("kernelband")
    rng = random.Random(0)
    picks = []
    for _ in range(4):  # four free workers at once
        c, s = p.select(pool, _offered, rng)
        add_pending(p, c, s)
        picks.append(s)
    assert len(set(picks)) >= 3, picks  # a batch, not four copies of one decision
    for s in picks:
        p.update(pool[0], s, Outcome(False, 2.0, None), None)
    assert p._pending.total == 0


# --------------------------------------------------------------------------- CLI


def _cli(args: list[str], hide_ray: bool = False) -> subprocess.CompletedProcess:
    pre = "import sys; sys.modules['ray'] = None; " if hide_ray else ""  # import ray -> ImportError
    code = pre + "from kernelband.cli import main; sys.exit(main(sys.argv[1:]))"
    if not pre:
        code = "import sys; " + code
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_without_ray_the_ray_executor_is_a_one_line_error(tmp_path):
    ex = REPO / "examples" / "add_scale.py"
    for cmd in (["optimize", str(ex), "--device", "cpu"], ["optimize-all", str(REPO / "examples"), "--device", "cpu",
                                                            "--out", str(tmp_path / "p")]):
        r = _cli([*cmd, "--executor", "ray"], hide_ray=True)
        assert r.returncode == 2, r.stderr
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert lines == ["kernelband: the ray executor needs Ray: pip install 'kernelband[ray]'"], r.stderr
        assert "Traceback" not in r.stderr and not r.stdout
    assert not (tmp_path / "p").exists()


def test_executor_flags_are_checked(tmp_path):
    ex = str(REPO / "examples" / "add_scale.py")
    r = _cli(["optimize", ex, "--device", "cpu", "--ray-address", "ray://nowhere:10001"])
    assert r.returncode == 2 and r.stderr.strip() == "kernelband: --ray-address needs --executor ray"
    r = _cli(["optimize-all", str(tmp_path / "missing"), "--device", "cpu"])
    assert r.returncode == 2 and "no such file or directory" in r.stderr
    r = _cli(["optimize-all", str(REPO / "examples"), "--device", "cpu", "--workers", "-1"])
    assert r.returncode == 2 and "argument --workers: expected an integer of at least 0, not -1" in r.stderr, r.stderr


# --------------------------------------------------------------------------- the pool: setup, joining, the end


class _FakeWorker:
    """The Evaluator API without a judge: fixed times; ``gate`` holds its setup back."""

    interpreted = False
    worker_restarts = 0
    baseline = None
    lanes = 1

    def __init__(self, retime_ms: float, gate: "threading.Event | None" = None, fail: str = "") -> None:
        self.retime_ms, self.gate, self.fail = retime_ms, gate, fail
        self.facts = DeviceFacts()
        self.prepared_with: dict = {}
        self.evaluated: list[str] = []
        self.closed = False

    def start(self):
        return None

    def prepare(self, time_it=True, profile_tier=None):
        self.prepared_with = {"time_it": time_it, "profile_tier": profile_tier}
        if self.gate is not None:
            assert self.gate.wait(20), "the test never released this worker"
        if self.fail:
            raise RuntimeError(self.fail)

    def retime_original(self):
        return Timing(self.retime_ms, self.retime_ms, self.retime_ms, "cuda-events", 1)

    def evaluate(self, variant, profile_tier=None):
        self.evaluated.append(variant.id)
        return Evaluation(Status.OK, timing=Timing(1.0, 1.0, 1.0, "cuda-events", 1), variant_id=variant.id)

    def close(self):
        self.closed = True


def _drive(pool: WorkerPool, n: int, after_each=None) -> list[tuple[str, str, float]]:
    """Dispatch n variants over the pool; returns (variant id, worker, scaled ms) in completion order."""
    todo = [Variant(source=f"# v{i}\n", id=f"v{i}") for i in range(n)]
    done: list[tuple[str, str, float]] = []

    def dispatch():
        if not todo:
            return "done"
        v = todo.pop(0)
        pool.submit(lambda ev: ev.evaluate(v), lambda worker, ev: complete(v, worker, ev))
        return None

    def complete(v, worker, ev):
        done.append((v.id, worker, ev.time_ms))
        if after_each:
            after_each(len(done))

    assert pool.drive(dispatch, "wait") == "done"
    return done


def test_a_second_worker_still_preparing_never_holds_up_the_primary():
    gate = threading.Event()
    primary, second = _FakeWorker(2.0), _FakeWorker(4.0, gate=gate)
    events: list[EventPayload] = []
    pool = WorkerPool([primary, second], ["gpu 0", "gpu 1"], emit=events.append)
    pool.begin_others()
    assert pool.finish_others(Variant(source="# o\n"), 2.0, DeviceFacts(copy_gbs=1.0)) == []  # returns at once: gpu 1 is not ready
    assert pool.live == [0]
    # the primary evaluates alone until gpu 1 is released (after its second candidate)
    def release_after_two(k: int) -> None:
        if k == 2:
            gate.set()
            # its "ready" is queued before the next dispatch: joining does not race the instant fakes
            for t in threading.enumerate():
                if t.name == "kb-prepare-1":
                    t.join(20)

    done = _drive(pool, 6, after_each=release_after_two)
    assert [d[1] for d in done[:2]] == ["gpu 0", "gpu 0"]
    assert second.evaluated, "the second worker joined once prepared"
    assert len(primary.evaluated) + len(second.evaluated) == 6
    # its candidates are scaled to the primary's clock (2.0 / 4.0), the primary's are not
    assert {ms for _, w, ms in done if w == "gpu 1"} == {0.5} and {ms for _, w, ms in done if w == "gpu 0"} == {1.0}
    # it prepared references only (no timing, no profile) and got the primary's device facts
    assert second.prepared_with == {"time_it": False, "profile_tier": 0} and second.facts == DeviceFacts(copy_gbs=1.0)
    logs = [p.message for p in events if isinstance(p, Log)]
    assert any(m.startswith("gpu 1 takes candidates from") for m in logs), logs
    assert any(m.startswith("search phase of") and "gpu 1" in m for m in logs), logs
    usage = pool.usage()
    assert usage["gpu 0"]["evaluations"] + usage["gpu 1"]["evaluations"] == 6
    pool.close()
    assert primary.closed and second.closed


def test_a_second_worker_that_cannot_prepare_is_dropped_and_the_search_goes_on():
    primary, second = _FakeWorker(2.0), _FakeWorker(2.0, fail="no GPU there")
    pool = WorkerPool([primary, second], ["gpu 0", "gpu 1"])
    pool.begin_others()
    done = _drive(pool, 3)
    assert [d[1] for d in done] == ["gpu 0"] * 3 and not second.evaluated
    assert pool.lost == ["gpu 1: prepare failed: RuntimeError: no GPU there"]
    assert pool.spare() is None


def _outcome(best_source: str = "# faster\n"):
    from kernelband.result_builder import SearchOutcome

    original = Candidate(id="o", variant=Variant(source="# o\n", id="o"), time_ms=2.0)
    best = Candidate(id="b", variant=Variant(source=best_source, id="b"), time_ms=1.0, parent_id="o")
    return SearchOutcome(session_id="s", stop_reason="budget", original=original, best=best, strategy_path=["tiling"],
                         evaluations=2, seconds=1.0, tokens=0, dollars=0.0, history=[], warnings=[])


class _Final(_FakeWorker):
    """The primary and the spare at the end: memcheck and the paired re-measurement."""

    def __init__(self, memcheck: SanitizerReport, met: threading.Event, wait_for: "threading.Event | None",
                 wide: "WideReport | None" = None) -> None:
        super().__init__(2.0)
        self.memcheck, self.met, self.wait_for = memcheck, met, wait_for
        self.wide = wide or WideReport(ran=True, calls=("embedding(8192 int64, 655363x4096 float32)",))
        self.calls: list[str] = []

    def sanitize(self, variant):
        self.calls.append("sanitize")
        self.met.set()
        if self.wait_for is not None:  # the memcheck only ends once the re-measurement runs
            self.wait_for.wait(10)
        return self.memcheck

    def wide_calls(self, variant):
        self.calls.append("wide")
        return self.wide

    def paired_timing(self, variant, rounds=10):
        self.calls.append("paired")
        self.met.set()
        if self.wait_for is not None:
            self.wait_for.wait(10)
        return PairedTiming(2.0, 1.0, 2.0, 1.9, 2.1, rounds, "cuda-events")


def _build(primary, spare):
    from kernelband.model import Task
    from kernelband.result_builder import ResultBuilder
    from kernelband.session import SessionConfig

    task = Task(module_path="/x/k.py", source="# o\n", kernel="k", harness="h", device="cuda")
    warnings: list[str] = []
    result = ResultBuilder(task, SessionConfig(), primary, warnings.append, lambda m: None, spare=spare).build(_outcome())
    return result, warnings


def test_the_finalists_memcheck_runs_on_the_spare_worker_while_the_primary_re_measures():
    ok = SanitizerReport(ran=True, ok=True)
    paired_running, memcheck_running = threading.Event(), threading.Event()
    primary = _Final(ok, met=paired_running, wait_for=memcheck_running)
    spare = _Final(ok, met=memcheck_running, wait_for=paired_running)
    t0 = time.monotonic()
    result, _ = _build(primary, spare)
    # each waited for the other to be running: one after the other would have waited 10 s twice
    assert time.monotonic() - t0 < 8
    assert primary.calls == ["paired"] and spare.calls == ["sanitize", "wide"]
    assert result.status == ResultStatus.IMPROVED and result.speedup == 2.0
    assert result.extra["checked"]["wide"] == {"ran": True, "ok": True,
                                               "calls": ["embedding(8192 int64, 655363x4096 float32)"]}


def test_a_wrong_result_past_int32_offsets_refuses_the_winner_on_either_path():
    """The finalist's calls past int32 offsets run after its memcheck, on the spare beside
    the re-measurement or on the primary before it; a wrong result keeps no_improvement."""
    wrong = WideReport(ran=True, ok=False, calls=("embedding(8192 int64, 655363x4096 float32)",),
                       status=Status.RUNTIME_ERROR, message="raises where the original does not: illegal address")
    ok = SanitizerReport(ran=True, ok=True)
    for spare in (None, _Final(ok, threading.Event(), None, wide=wrong)):
        primary = _Final(ok, threading.Event(), None, wide=wrong)
        result, warnings = _build(primary, spare)
        assert result.status == ResultStatus.NO_IMPROVEMENT and result.unverified_variant_id == "b"
        assert result.extra["checked"]["wide"]["ok"] is False
        assert any("fails on a call past int32 offsets: raises where the original does not" in w for w in warnings)
        assert primary.calls == (["sanitize", "wide"] if spare is None else ["paired"])


def test_a_memcheck_failure_on_the_spare_still_refuses_the_winner():
    bad = SanitizerReport(ran=True, ok=False, findings=("Invalid __global__ write of size 4",))
    primary = _Final(SanitizerReport(ran=True, ok=True), threading.Event(), None)
    spare = _Final(bad, threading.Event(), None)
    result, warnings = _build(primary, spare)
    assert result.status == ResultStatus.NO_IMPROVEMENT and result.memcheck == bad and result.unverified_variant_id == "b"
    assert any("fails compute-sanitizer memcheck" in w for w in warnings)
    # a spare that cannot run it hands the memcheck back to the primary
    class Broken(_Final):
        def sanitize(self, variant):
            raise RuntimeError("actor lost twice")

    primary = _Final(bad, threading.Event(), None)
    result, _ = _build(primary, Broken(bad, threading.Event(), None))
    assert primary.calls == ["paired", "sanitize"] and result.status == ResultStatus.NO_IMPROVEMENT
    assert result.extra["checked"]["wide"]["reason"] == "not run: compute-sanitizer refused the variant first"


# --------------------------------------------------------------------------- what a Ray worker is sent


def test_the_local_modules_a_kernel_imports_are_collected_and_nothing_else(tmp_path, monkeypatch):
    from kernelband.executor.ship import collect, local_imports, unpack

    (tmp_path / "kern.py").write_text("import torch\nimport helpers\nfrom pkg.ops import f\nfrom . import rel\n")
    (tmp_path / "helpers.py").write_text("from deeper import g\n")  # followed transitively
    (tmp_path / "deeper.py").write_text("X = 1\n")
    (tmp_path / "rel.py").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "ops.py").write_text("from . import table\n")
    (tmp_path / "pkg" / "table.json").write_text("{}")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "ops.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "unrelated.py").write_text("SECRET = 1\n")  # never imported: never sent
    (tmp_path / ".env").write_text("API_KEY=x\n")
    kern = tmp_path / "kern.py"
    names = [p.name for p in local_imports(str(kern), [(str(kern), kern.read_text())])]
    assert names == ["deeper.py", "helpers.py", "pkg", "rel.py"]
    files = collect(str(kern), [(str(kern), kern.read_text())])
    assert sorted(files) == ["deeper.py", "helpers.py", "pkg/__init__.py", "pkg/ops.py", "pkg/table.json", "rel.py"]
    out = tmp_path / "actor"
    out.mkdir()
    unpack(files, out)
    assert (out / "pkg" / "ops.py").read_text() == "from . import table\n"
    with pytest.raises(ValueError, match="outside"):
        unpack({"../escape.py": b""}, out)
    # a kernel importing nothing of its folder sends nothing
    (tmp_path / "alone.py").write_text("import triton\n")
    assert collect(str(tmp_path / "alone.py"), [(str(tmp_path / "alone.py"), "import triton\n")]) == {}
    # over the limit: one line that names the modules and the setting
    monkeypatch.setenv("KERNELBAND_RAY_SHIP_MAX_MB", "0.00001")
    with pytest.raises(ExecutorUnavailable) as e:
        collect(str(kern), [(str(kern), kern.read_text())])
    msg = str(e.value)
    assert "\n" not in msg and "deeper.py, helpers.py, pkg/, rel.py" in msg and "KERNELBAND_RAY_SHIP_MAX_MB" in msg


def test_the_scaling_benchmark_reports_both_rates_phases_and_resumes(tmp_path):
    """benchmarks/executor_scaling.py's arithmetic and report on made-up runs (the real runs
    need 2 GPUs; `--device cpu --budget 4 --profile-tier 0` is its smoke test)."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("executor_scaling", REPO / "benchmarks" / "executor_scaling.py")
    es = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(es)

    def run(workers, search_s, session_s, verdicts):
        usage = {f"gpu {i}": {"evaluations": 24 // workers, "busy_s": search_s, "ready_at_s": 10.0,
                              "busy_share": 0.95} for i in range(workers)}
        return {"workers": workers, "evaluations": 24, "setup_s": 10.0, "search_s": search_s, "final_s": 5.0,
                "close_s": 1.0, "session_s": session_s, "search_evals_per_min": round(60 * 24 / search_s, 2),
                "session_evals_per_min": round(60 * 24 / session_s, 2), "status": "improved", "verdicts": verdicts,
                "usage": usage}

    one, two = run(1, 120.0, 136.0, {"a": "ok", "b": "wrong"}), run(2, 64.0, 80.0, {"a": "ok", "b": "wrong"})
    row = {"kernel": "gelu_fp32", "one": one, "two": two, "compare": es.compare(one, two)}
    assert row["compare"]["ratio"] == 1.875 and row["compare"]["ratio_session"] == 1.7
    assert row["compare"]["verdicts_agree"] and row["compare"]["final_status_agrees"]
    s = es.summarize([row], [], 1.0)
    assert s["ratio_pooled"] == 1.875 and s["ratio_session_pooled"] == 1.7 and s["all_verdicts_agree"]
    md = es.table([row], s)
    assert "| gelu_fp32 | 24 / 24 | 12.0 | 22.5 | 1.875 | 10.59 | 18.0 | 1.7 | yes | improved / improved |" in md
    assert "gpu 1: 12 ev, busy 95%, ready 10.0 s" in md
    bad = es.compare(one, run(2, 64.0, 80.0, {"a": "ok", "b": "ok"}))
    assert not bad["verdicts_agree"] and bad["disagreements"] == {"b": ["wrong", "ok"]}
    # resume: rows of a run with the same settings are kept, others are not
    settings = {"budget": 24, "seed": 0, "device": "auto", "profile_tier": 2}
    (tmp_path / "executor_scaling.json").write_text(json.dumps({"schema": es.SCHEMA, **settings, "kernels": [row]}))
    assert set(es._previous(tmp_path / "executor_scaling.json", settings)) == {"gelu_fp32"}
    assert es._previous(tmp_path / "executor_scaling.json", {**settings, "budget": 12}) == {}


def test_the_local_and_ray_executors_share_one_deadline_rule() -> None:
    """One rule (worker/deadlines.py): the local evaluator waits request_deadline_s for the
    judge's reply; the Ray driver waits for the actor's Evaluator as long as that evaluator
    may take for the same op (a judge started, the request, a re-prepare after a lost judge),
    never a second formula that drifts below it."""
    from kernelband.evaluate import Evaluator
    from kernelband.executor.ray_executor import RayEvaluator
    from kernelband.model import Task
    from kernelband.worker.deadlines import (JUDGE_START_S, call_deadline_s, evaluation_runs, reply_deadline_s,
                                             request_deadline_s)

    task = Task(module_path="/tmp/k.py", source="", kernel="k", harness="bench_k", check_harnesses=["test_k", "bench_k"],
                seeds=[0, 1, 2], timeout_s=7.0)
    from kernelband.model import Baseline

    local = Evaluator.__new__(Evaluator)
    ray = RayEvaluator.__new__(RayEvaluator)
    local.task = ray.task = task
    local.baseline = ray.baseline = None
    ops = ("prepare", "evaluate", "retime", "paired", "profile", "sanitize", "device_facts")
    for op in ops:
        assert local._deadline(op) == request_deadline_s(op, task)
        assert ray._deadline(op) == call_deadline_s(op, task) >= local._deadline(op) + JUDGE_START_S
    assert local._deadline("paired", 40) > local._deadline("paired", 10)
    assert ray._deadline("paired", 40) == call_deadline_s("paired", task, rounds=40)
    runs = evaluation_runs(task.harness, task.check_harnesses, len(task.seeds))
    assert runs == 2 * (3 + 2) + 4  # bench_k listed twice counts once
    assert local._deadline("evaluate") == reply_deadline_s(7.0, runs)
    # after a lost judge the evaluator prepares a fresh one before it returns: Ray waits for that too
    assert ray._deadline("evaluate") >= local._deadline("evaluate") + local._deadline("prepare")
    # after prepare, each call beyond the harness is a run of the judge's job deadline: the
    # session's wait counts them too, or it gives up on a hang before the judge reports it
    local.baseline = ray.baseline = Baseline(ok=True, derived_calls=13)
    assert local._deadline("evaluate") == reply_deadline_s(7.0, runs + 13) == request_deadline_s("evaluate", task, 13)
    assert ray._deadline("evaluate") == call_deadline_s("evaluate", task, 13)


def test_a_search_candidate_gets_a_multiple_of_the_originals_slowest_run() -> None:
    """A hung or hopelessly slow search candidate frees its lane in about a minute: ten
    times the original's slowest run (compile included), at least 20 s, never more than
    the task's run timeout (which `check` and the final verification keep)."""
    from kernelband.worker.deadlines import SEARCH_RUN_FLOOR_S, deadline_s, search_run_timeout_s

    assert search_run_timeout_s(120.0, 0.3) == SEARCH_RUN_FLOOR_S == 20.0
    assert search_run_timeout_s(120.0, 4.0) == 40.0
    assert search_run_timeout_s(120.0, 30.0) == 120.0  # capped by the run timeout
    assert search_run_timeout_s(4.0, 0.3) == 4.0
    # the kept run and its replay: the whole first batch of a hung candidate within 70 s
    assert deadline_s(search_run_timeout_s(120.0, 0.3), 2) == 70.0

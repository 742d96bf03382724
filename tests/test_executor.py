"""Executors and batched decisions (issue 15), the fast part: which workers a job gets,
pending pulls as virtual losses in every policy, and the CLI's one-line errors. The
real runs (2 local CPU slots, a local Ray instance) are in test_executor_runs.py."""
from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from kernelband.executor import ExecutorOptions, ExecutorUnavailable, make_executor
from kernelband.executor.local import LocalExecutor, visible_gpus
from kernelband.model import Variant
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

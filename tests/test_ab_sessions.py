"""``benchmarks/ab_sessions.py``: the paired summary that decides an A/B of two trees, and
the order of the sessions (alternating by round, so that drift of the machine cancels).
The sessions themselves run ``eval_speed.py`` on a GPU; here the orchestration is driven
with a stand-in for one session, and the statistics with known numbers."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from benchmarks import ab_sessions


def test_the_paired_summary_finds_a_real_change_and_not_noise():
    rng = random.Random(1)
    same = [(60.0, 60.0)] * 5
    assert ab_sessions.paired_summary(same) == {"ratio": 1.0, "ci_low": 1.0, "ci_high": 1.0, "pairs": 5}
    faster = [(b, b * 1.2 * rng.uniform(0.95, 1.05)) for b in (50, 60, 70, 80, 55, 65, 75, 85)]
    s = ab_sessions.paired_summary(faster)
    assert s is not None and 1.15 < s["ratio"] < 1.25 and s["ci_low"] > 1.0
    # session-to-session spread of 20% either way: no verdict
    noisy = [(b, b * rng.choice([0.8, 1.25])) for b in (50, 60, 70, 80, 55, 65, 75, 85)]
    n = ab_sessions.paired_summary(noisy)
    assert n is not None and n["ci_low"] < 1.0 < n["ci_high"]
    assert ab_sessions.paired_summary([(0.0, 10.0), (None, 1.0)]) is None  # type: ignore[list-item]


def test_rounds_alternate_the_order_of_the_trees_and_pair_by_kernel_and_round(monkeypatch, tmp_path: Path):
    calls: list[tuple[str, str]] = []

    caches: list[Path] = []

    def session(tree: Path, kernel: str, out: Path, extra: list[str], cache: Path, gpu: None = None) -> dict:
        arm = out.name.split("_")[0]
        calls.append((arm, kernel))
        caches.append(cache)
        return {"evals_per_min": 60.0 if arm == "old" else 66.0, "first_verdict_s": 10.0, "status": "improved"}

    machine = tmp_path / "machine"
    (machine / "triton" / "3.6.0" / "abc").mkdir(parents=True)  # an original's compiled kernels
    (machine / "pycache").mkdir()
    (machine / "device_facts.json").write_text("{}")
    monkeypatch.setenv("KERNELBAND_CACHE_DIR", str(machine))
    monkeypatch.setattr(ab_sessions, "_session", session)
    report = ab_sessions.run(tmp_path / "a", tmp_path / "b", ["k1", "k2"], 2, tmp_path, [])
    assert calls == [("old", "k1"), ("new", "k1"), ("old", "k2"), ("new", "k2"),
                     ("new", "k1"), ("old", "k1"), ("new", "k2"), ("old", "k2")]
    assert report["summary"]["evals_per_min"]["ratio"] == 1.1 and report["summary"]["evals_per_min"]["pairs"] == 4
    assert report["summary"]["first_verdict_s"]["ratio"] == 1.0
    assert "| evals_per_min | 1.1 |" in ab_sessions.markdown(report)
    # every session its own machine cache: the device facts and bytecode, never another
    # session's compiled originals
    assert len(set(caches)) == len(calls) and machine not in caches
    for cache in caches:
        assert (cache / "device_facts.json").is_file() and (cache / "pycache").resolve() == machine / "pycache"
        assert not (cache / "triton").exists()


def test_side_by_side_arms_run_at_once_on_two_gpus_swapped_every_round(monkeypatch, tmp_path: Path):
    """``--gpus``: the two sessions of a (kernel, round) run at the same time, one on each
    GPU, each with a cache of its own; the GPUs swap every round. The stand-in session
    waits for its pair at a barrier: run one after the other, the barrier breaks."""
    import threading

    both = threading.Barrier(2, timeout=10)
    seen: list[tuple[int, str, str, Path]] = []

    def session(tree: Path, kernel: str, out: Path, extra: list[str], cache: Path, gpu: str) -> dict:
        both.wait()
        arm, _, r = out.name.split("_")
        seen.append((int(r), arm, gpu, cache))
        return {"evals_per_min": 60.0 if arm == "old" else 66.0, "first_verdict_s": 10.0, "status": "improved"}

    monkeypatch.setenv("KERNELBAND_CACHE_DIR", str(tmp_path / "machine"))
    monkeypatch.setattr(ab_sessions, "_session", session)
    report = ab_sessions.run(tmp_path / "a", tmp_path / "b", ["k"], 2, tmp_path, [], gpus=("0", "1"))
    on = {(r, arm): gpu for r, arm, gpu, _ in seen}
    assert on == {(0, "old"): "0", (0, "new"): "1", (1, "new"): "0", (1, "old"): "1"}
    assert len({cache for *_, cache in seen}) == 4
    assert report["summary"]["evals_per_min"]["ratio"] == 1.1 and report["summary"]["evals_per_min"]["pairs"] == 2
    assert "side by side on GPUs 0 and 1" in ab_sessions.markdown(report)


def test_the_same_gpu_twice_is_refused(tmp_path: Path, capsys):
    tree = Path(__file__).resolve().parents[1]
    with pytest.raises(SystemExit) as e:
        ab_sessions.main(["--old", str(tree), "--new", str(tree), "--kernels", "k", "--out", str(tmp_path / "o"),
                          "--gpus", "0", "0"])
    assert e.value.code == 2 and "two different GPUs" in capsys.readouterr().err


def test_a_session_without_a_row_is_left_out_of_the_pairs():
    runs = [{"round": 0, "kernel": "k", "arm": "old", "evals_per_min": 50.0, "first_verdict_s": 9.0},
            {"round": 0, "kernel": "k", "arm": "new", "error": "eval_speed.py exited 1 without a row"},
            {"round": 1, "kernel": "k", "arm": "new", "evals_per_min": 55.0, "first_verdict_s": 8.0},
            {"round": 1, "kernel": "k", "arm": "old", "evals_per_min": 50.0, "first_verdict_s": 8.0}]
    summary = ab_sessions.summarize(runs)
    assert summary["evals_per_min"]["pairs"] == 1 and summary["evals_per_min"]["ratio"] == 1.1


def test_a_folder_that_is_not_a_tree_is_refused_in_one_line(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as e:
        ab_sessions.main(["--old", str(tmp_path), "--new", str(tmp_path), "--kernels", "k", "--out", str(tmp_path / "o")])
    assert e.value.code == 2 and "is not a tree of KernelBand" in capsys.readouterr().err


@pytest.mark.slow
def test_two_trees_run_real_sessions_and_write_the_report(tmp_path: Path):
    """The whole tool on this tree twice: real ``eval_speed.py`` sessions (the Triton
    interpreter here), a row from each arm, the report and its summary written."""
    import json
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "ab"
    proc = subprocess.run([sys.executable, "benchmarks/ab_sessions.py", "--old", ".", "--new", ".", "--kernels",
                           "gelu_fp32", "--rounds", "1", "--out", str(out), "--", "--budget", "2", "--cap", "240"],
                          cwd=repo, env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((out / "ab.json").read_text())
    assert {r["arm"] for r in report["runs"]} == {"old", "new"}
    assert all(r.get("evals_per_min") for r in report["runs"]), report["runs"]
    assert report["summary"]["evals_per_min"]["pairs"] == 1
    assert (out / "ab.md").read_text().startswith("# A/B:")
